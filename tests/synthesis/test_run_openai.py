"""Synthesis through the real ``openai`` client against a local OpenAI-compatible server.

No mocks: ifir_lib/testing/openai_server.py speaks HTTP on 127.0.0.1 and injects 429 / 500 / slow replies /
dropped connections / tagless / declined answers; the CLI runs in-process or as a subprocess.
"""

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import OPENAI_KEY as KEY  # noqa: E402

from ifir_lib import cli
from ifir_lib.synthesis import prompts
from ifir_lib.synthesis import run as sio
from ifir_lib.synthesis import run as syn
from ifir_lib.testing.inputs import make_seed, write_seeds
from ifir_lib.testing.openai_server import DEFAULT_MODEL, free_port

REPO = Path(__file__).resolve().parents[2]


def cfg(server, **kw):
    base = dict(
        backend="openai",
        model=DEFAULT_MODEL,
        base_url=server.url,
        concurrency=4,
        backoff_base_s=0.02,
        backoff_max_s=0.5,
        max_retries=3,
        timeout_s=5.0,
        progress=False,
    )
    return syn.SynthesisConfig(**{**base, **kw})


def keys(path):
    return [json.loads(line)["key"] for line in Path(path).read_text().splitlines()]


def _synth_args(tmp_path, model, url, out=None, *extra):
    """``ifir synthesize`` arguments for the seeds under ``tmp_path`` against ``url``, then ``extra``."""
    seeds, out = str(tmp_path / "seeds.jsonl"), str(out or tmp_path / "o.jsonl")
    flags = ["--seeds", seeds, "--out", out, "--backend", "openai", "--model", model, "--base-url", url]
    return ["synthesize", "--preset", "paper", *flags, *extra]


def test_rows_schema_usage_and_template_version(server, tmp_path):
    seeds = [make_seed(i) for i in range(3)]
    s = syn.synthesize(
        seeds, tmp_path / "o.jsonl", cfg(server, negative="all", prices={DEFAULT_MODEL: (1.0, 2.0)})
    )
    rows = sio.load_synthesis(tmp_path / "o.jsonl")
    assert sorted(r["key"] for r in rows) == sorted(f"{s['id']}#{j}" for s in seeds for j in (0, 1))
    assert server.requests == 6 and s.requests == 6 and s.accepted == 6
    r = rows[0]
    assert r["status"] == "accepted" and r["reversal"].startswith("Only include documents centred on")
    assert r["reasoning"] == "The chosen document differs from the other one in its focus."
    assert (
        r["template"] == "reversal_prompt"
        and r["template_version"] == prompts.load_template("reversal_prompt.j2").full_version
    )
    assert r["usage"]["prompt_tokens"] > 0 and r["attempts"] == 1 and r["cached"] is False
    assert r["cost_usd"] == pytest.approx(
        (r["usage"]["prompt_tokens"] * 1.0 + r["usage"]["completion_tokens"] * 2.0) / 1e6
    )
    assert s.cost_usd == pytest.approx(sum(x["cost_usd"] for x in rows))
    assert s.prompt_tokens == sum(x["usage"]["prompt_tokens"] for x in rows)
    # decoding params reach the server
    assert server.bodies[0]["temperature"] == 0.7 and server.bodies[0]["max_tokens"] == 2048


@pytest.mark.parametrize("fault", ["429", "500", "slow", "drop"])
def test_fault_recovered_by_retry(server, tmp_path, fault):
    server.faults = [fault]
    server.slow_s, server.retry_after = 2.0, "0.5"
    t0 = time.monotonic()
    s = syn.synthesize([make_seed(0)], tmp_path / "o.jsonl", cfg(server, timeout_s=0.8))
    elapsed = time.monotonic() - t0
    [row] = sio.load_synthesis(tmp_path / "o.jsonl")
    assert row["status"] == "accepted" and row["attempts"] == 2
    assert server.requests == 2 and s.retries == 1
    if fault == "429":
        assert elapsed >= 0.5  # Retry-After honoured although our backoff base is 0.02 s


def test_persistent_faults_recorded_as_failed_then_retried_on_rerun(server, tmp_path):
    seeds = [make_seed(i) for i in range(3)]
    server.rules = {seeds[0]["query"]: "500", seeds[1]["query"]: "slow"}
    server.slow_s = 2.0
    s = syn.synthesize(seeds, tmp_path / "o.jsonl", cfg(server, max_retries=2, timeout_s=0.5))
    by = {r["key"]: r for r in sio.load_synthesis(tmp_path / "o.jsonl")}
    assert by["seed-0000"]["status"] == "failed" and by["seed-0000"]["reason"] == "HTTP 500 after 3 attempts"
    assert by["seed-0001"]["status"] == "failed" and by["seed-0001"]["reason"] == "timeout after 3 attempts"
    assert by["seed-0000"]["attempts"] == 3 and by["seed-0002"]["status"] == "accepted"
    assert (s.failed, s.accepted, s.fail_reasons) == (2, 1, {"HTTP 500": 1, "timeout": 1})
    # the server recovers; the same call retries only the failed keys and keeps one row per key
    server.rules, server.requests = {}, 0
    s2 = syn.synthesize(seeds, tmp_path / "o.jsonl", cfg(server))
    assert (s2.skipped, s2.written, server.requests) == (1, 2, 2)
    assert sorted(keys(tmp_path / "o.jsonl")) == [s["id"] for s in seeds]
    assert all(r["status"] == "accepted" for r in sio.load_synthesis(tmp_path / "o.jsonl"))


def test_tagless_declined_garbled_replies(server, tmp_path):
    seeds = [make_seed(i) for i in range(4)]
    server.rules = {seeds[0]["query"]: "tagless", seeds[1]["query"]: "none", seeds[2]["query"]: "garbled"}
    s = syn.synthesize(seeds, tmp_path / "o.jsonl", cfg(server))
    by = {r["key"]: r for r in sio.load_synthesis(tmp_path / "o.jsonl")}
    assert (by["seed-0000"]["status"], by["seed-0000"]["reason"]) == ("rejected", "missing <answer> tag")
    assert by["seed-0000"]["raw"].startswith("I think")
    assert (by["seed-0001"]["status"], by["seed-0001"]["reason"], by["seed-0001"]["reversal"]) == (
        "declined",
        None,
        None,
    )
    assert by["seed-0001"]["reasoning"].startswith("No attribute")
    assert by["seed-0002"]["status"] == "rejected" and by["seed-0002"]["reason"].startswith("garbled tags")
    assert by["seed-0003"]["status"] == "accepted"
    assert (s.rejected, s.declined, s.accepted, server.requests) == (
        2,
        1,
        1,
        4,
    )  # not retried: answers are answers


def test_cache_hit_means_zero_requests(server, tmp_path):
    seeds = [make_seed(i) for i in range(5)]
    syn.synthesize(seeds, tmp_path / "a.jsonl", cfg(server))
    assert server.requests == 5
    # a different output file, same prompts: all from the cache
    s = syn.synthesize(seeds, tmp_path / "b.jsonl", cfg(server))
    assert server.requests == 5 and s.requests == 0 and s.cached == 5
    rows = sio.load_synthesis(tmp_path / "b.jsonl")
    assert all(r["cached"] and r["attempts"] == 0 for r in rows)
    first = {r["key"]: r["reversal"] for r in sio.load_synthesis(tmp_path / "a.jsonl")}  # completion order
    assert {r["key"]: r["reversal"] for r in rows} == first
    # same output file: nothing to do at all
    s = syn.synthesize(seeds, tmp_path / "b.jsonl", cfg(server))
    assert (s.written, s.skipped, server.requests) == (0, 5, 5)
    # another decoding setting is another key
    syn.synthesize(seeds[:1], tmp_path / "c.jsonl", cfg(server, temperature=0.0))
    assert server.requests == 6
    cache_files = list((tmp_path / "cache" / "llm").rglob("*.json"))
    assert len(cache_files) == 6


def test_another_endpoint_is_another_cache_entry(server, tmp_path):
    """Two servers may serve other weights under one model name (vLLM's --served-model-name, a
    quantised build): server B's run read server A's answers from the cache, sent no request, and
    its sidecar named B. The endpoint is in the key; a trailing slash is the same endpoint."""
    seeds = [make_seed(i) for i in range(3)]
    syn.synthesize(seeds, tmp_path / "a.jsonl", cfg(server))
    syn.synthesize(seeds, tmp_path / "a2.jsonl", cfg(server, base_url=server.url + "/"))
    assert server.requests == 3
    other = server.url.replace("127.0.0.1", "localhost")  # the same server under another name
    s = syn.synthesize(seeds, tmp_path / "b.jsonl", cfg(server, base_url=other))
    assert server.requests == 6 and s.cached == 0


def test_concurrency_is_bounded_and_used(server, tmp_path):
    server.latency_s = 0.2
    t0 = time.monotonic()
    syn.synthesize([make_seed(i) for i in range(8)], tmp_path / "o.jsonl", cfg(server, concurrency=8))
    assert time.monotonic() - t0 < 0.2 * 8 / 2  # 8 x 200 ms in parallel, far from sequential 1.6 s


def test_bad_seed_file_fails_before_any_request(server, tmp_path, capsys):
    p = tmp_path / "seeds.jsonl"
    rows = [make_seed(i) for i in range(3)]
    del rows[2]["positive"]
    p.write_text("".join(json.dumps(r) + "\n" for r in rows))
    rc = cli.main(_synth_args(tmp_path, DEFAULT_MODEL, server.url, None, "--no-progress"))
    err = capsys.readouterr().err
    assert rc == 2 and server.requests == 0
    assert f"{p}:3: field 'positive': missing" in err and "Traceback" not in err
    assert not (tmp_path / "o.jsonl").exists()


@pytest.mark.parametrize("case", ["unreachable", "bad_key", "unknown_model"])
def test_fatal_errors_exit_2_with_one_line(server, tmp_path, capsys, case):
    write_seeds(tmp_path / "seeds.jsonl", 3)
    url, model = server.url, DEFAULT_MODEL
    if case == "unreachable":
        url = f"http://127.0.0.1:{free_port()}/v1"
    elif case == "bad_key":
        server.api_key = "sk-the-right-one"  # our KEY is wrong; the server echoes it back in the 401
    else:
        model = "no-such-model"
    rc = cli.main(_synth_args(tmp_path, model, url) + ["--backoff", "0.01", "--no-progress"])
    out, err = capsys.readouterr()
    lines = [x for x in err.splitlines() if x.strip()]
    assert rc == 2 and len(lines) == 1 and lines[0].startswith("ifir synthesize: error: "), err
    assert "Traceback" not in err and KEY not in err + out
    expect = {
        "unreachable": "cannot connect",
        "bad_key": "refused the API key from $OPENAI_API_KEY (HTTP 401",
        "unknown_model": "HTTP 404",
    }[case]
    assert expect in lines[0]
    if case == "bad_key":
        assert server.auth_headers[0] == f"Bearer {KEY}" and "***" in lines[0]  # echoed key redacted


def _cli_env(tmp_path, **extra):
    env = dict(
        os.environ,
        OPENAI_API_KEY=KEY,
        IFIR_CACHE=str(tmp_path / "cache"),
        HF_HUB_OFFLINE="1",
        PYTHONPATH=str(REPO),
        **extra,
    )
    return env


def test_api_key_never_written_or_printed(server, tmp_path):
    write_seeds(tmp_path / "seeds.jsonl", 6)
    server.api_key = KEY
    server.faults = ["429", "500", "drop", "tagless"]
    server.retry_after = "0.1"
    extra = ["--backoff", "0.01", "--concurrency", "2", "--json"]
    cmd = [sys.executable, "-m", "ifir_lib", "-v"]
    cmd += _synth_args(tmp_path, DEFAULT_MODEL, server.url, tmp_path / "out" / "o.jsonl", *extra)
    r = subprocess.run(cmd, capture_output=True, text=True, env=_cli_env(tmp_path), cwd=tmp_path, timeout=60)
    assert r.returncode == 0, r.stderr
    assert set(server.auth_headers) == {f"Bearer {KEY}"}  # the key was used...
    assert "retry" in r.stderr  # (-v logs the retries)
    files = [p for p in tmp_path.rglob("*") if p.is_file() and p.name != "seeds.jsonl"]
    assert len(files) >= 8  # output, its config, cache entries
    for text in [r.stdout, r.stderr] + [p.read_text(errors="replace") for p in files]:
        assert KEY not in text and KEY[8:20] not in text  # ...and never written or printed
    summary = json.loads(r.stdout.strip().splitlines()[-1])
    assert summary["written"] == 6 and summary["retries"] == 3


def test_a_gateway_key_in_the_url_query_is_sent_and_never_written_or_printed(server, tmp_path, capsys):
    """Azure-style gateways take their key as ``?subscription-key=``: the OpenAI client would glue
    the route onto the query (a 404), and only ``key``/``token``-named parameters were masked."""
    write_seeds(tmp_path / "seeds.jsonl", 3)
    secret = "SUBKEY-5555555"
    url = f"{server.url}?subscription-key={secret}&api-version=2024-06-01"
    out = tmp_path / "o.jsonl"
    assert cli.main(["-v", *_synth_args(tmp_path, DEFAULT_MODEL, url, out, "--no-progress")]) == 0
    assert server.queries[0] == {"subscription-key": secret, "api-version": "2024-06-01"}
    printed = "".join(capsys.readouterr())
    files = [p for p in tmp_path.rglob("*") if p.is_file() and p.name != "seeds.jsonl"]
    assert files and len(keys(out)) == 3
    for text in [printed] + [p.read_text(errors="replace") for p in files]:
        assert secret not in text
    assert "subscription-key=***" in (tmp_path / "o.config.json").read_text()


def test_credentials_in_the_url_are_named_when_refused_and_never_printed_encoded(server, tmp_path, capsys):
    """The HTTP client sends ``user:pass@`` as Basic auth in place of the key; a server that
    echoes the header must not leak it base64-encoded, and the error names what was sent."""
    write_seeds(tmp_path / "seeds.jsonl", 2)
    server.api_key = "sk-the-right-one"
    url = server.url.replace("http://", "http://alice:URLPASS-98765@")
    rc = cli.main(_synth_args(tmp_path, DEFAULT_MODEL, url) + ["--backoff", "0.01", "--no-progress"])
    err = capsys.readouterr().err
    assert rc == 2 and server.auth_headers[0].startswith("Basic ")
    assert "refused the credentials in --base-url" in err
    assert server.auth_headers[0].removeprefix("Basic ") not in err and "URLPASS" not in err


def test_a_resume_against_another_server_under_the_same_model_name_is_refused(server, tmp_path):
    """Two self-hosted servers may serve other weights under one model name: a rerun against the
    second resumed the first's output, mixing two LLMs' rows, and the sidecar kept only the second."""
    seeds = [make_seed(i) for i in range(6)]
    out = tmp_path / "o.jsonl"
    syn.synthesize(seeds[:3], out, cfg(server))
    rows = [json.loads(x) for x in out.read_text().splitlines()]
    assert {r["endpoint"] for r in rows} == {server.url}
    other = server.url.replace("127.0.0.1", "localhost")  # another server, as far as a URL can tell
    with pytest.raises(
        ValueError, match=rf"other options \(endpoint '{re.escape(server.url)}' -> '{re.escape(other)}'\)"
    ):
        syn.synthesize(seeds, out, cfg(server, base_url=other))
    assert len(keys(out)) == 3
    sio.sidecar_path(out).unlink()  # the rows alone tell it too
    with pytest.raises(ValueError, match="endpoint"):
        syn.synthesize(seeds, out, cfg(server, base_url=other))
    assert syn.synthesize(seeds, out, cfg(server)).written == 3  # the same server resumes


def test_a_resume_between_openai_s_own_api_and_a_self_hosted_server_is_refused(server, tmp_path, monkeypatch):
    """OpenAI's own API recorded no endpoint and a missing one is "unknown": a resume against a
    self-hosted server of the same model name (or with $OPENAI_BASE_URL newly exported) appended
    its rows to the OpenAI run's without a word. The local server plays api.openai.com here."""
    from ifir_lib.synthesis import backends

    seeds = [make_seed(i) for i in range(4)]
    other = server.url.replace("127.0.0.1", "localhost")
    monkeypatch.setattr(backends, "OPENAI_API", server.url)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    out = tmp_path / "o.jsonl"
    syn.synthesize(seeds[:2], out, cfg(server, base_url=None))
    rows = [json.loads(x) for x in out.read_text().splitlines()]
    assert {r["endpoint"] for r in rows} == {"https://api.openai.com/v1"}
    assert (
        json.loads(sio.sidecar_path(out).read_text())["identity"]["endpoint"] == "https://api.openai.com/v1"
    )
    with pytest.raises(ValueError, match=r"endpoint 'https://api\.openai\.com/v1' -> 'http://localhost"):
        syn.synthesize(seeds, out, cfg(server, base_url=other))
    monkeypatch.setenv("OPENAI_BASE_URL", other)  # left exported in another shell
    with pytest.raises(ValueError, match="endpoint"):
        syn.synthesize(seeds, out, cfg(server, base_url=None))
    sio.sidecar_path(out).unlink()  # the rows alone tell it too
    with pytest.raises(ValueError, match="endpoint"):
        syn.synthesize(seeds, out, cfg(server, base_url=None))
    assert len(keys(out)) == 2
    back = tmp_path / "back.jsonl"  # the other way round: self-hosted first, then OpenAI's
    syn.synthesize(seeds[:2], back, cfg(server, base_url=other))
    monkeypatch.delenv("OPENAI_BASE_URL")
    with pytest.raises(ValueError, match="endpoint"):
        syn.synthesize(seeds, back, cfg(server, base_url=None))
    assert syn.synthesize(seeds, out, cfg(server, base_url=None)).written == 2  # OpenAI's resumes


def test_shards_written_against_two_servers_of_one_model_merge(server, tmp_path):
    """docs/paper_scale.md §4: one shard per machine, each against its own server; the merged
    rows keep the endpoint each was written against."""
    seeds = tmp_path / "seeds.jsonl"
    write_seeds(seeds, 6)
    urls = [server.url, server.url.replace("127.0.0.1", "localhost")]
    outs = [tmp_path / f"shard{i}.jsonl" for i in range(2)]
    for i, (url, out) in enumerate(zip(urls, outs)):
        syn.synthesize(seeds, out, cfg(server, base_url=url, shard=f"{i}/2"))
    merged = tmp_path / "merged.jsonl"
    syn.merge_shards(outs, merged, seeds=seeds)
    rows = [json.loads(x) for x in merged.read_text().splitlines()]
    assert len(rows) == 6 and {r["endpoint"] for r in rows} == set(urls)


@pytest.mark.slow
def test_resume_after_sigkill(server, tmp_path):
    n = 40
    write_seeds(tmp_path / "seeds.jsonl", n)
    server.latency_s = 0.08
    out = tmp_path / "o.jsonl"
    cmd = [sys.executable, "-m", "ifir_lib"]
    cmd += _synth_args(tmp_path, DEFAULT_MODEL, server.url, out, "--concurrency", "3", "--no-progress")
    proc = subprocess.Popen(
        cmd, env=_cli_env(tmp_path), cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and (not out.exists() or len(out.read_bytes().splitlines()) < 8):
        time.sleep(0.02)
    proc.send_signal(signal.SIGKILL)
    proc.wait(10)
    written = len(out.read_bytes().splitlines())
    assert 8 <= written < n, "the kill should land mid-run"
    with out.open("ab") as fh:  # what a kill during a write leaves behind
        fh.write(b'{"key": "seed-0039", "seed_id": "seed-00')
    first_requests = server.requests
    r = subprocess.run(cmd, env=_cli_env(tmp_path), cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    ks = keys(out)
    assert len(ks) == n and len(set(ks)) == n  # exactly one row per seed
    assert sorted(ks) == [f"seed-{i:04d}" for i in range(n)]
    assert all(row["status"] == "accepted" for row in sio.load_synthesis(out))  # none lost
    # only the rows not on disk were asked for again (answers cached before the kill were free);
    # the server saw at most the 3 requests in flight at the kill twice
    assert server.requests - first_requests <= n - written
    assert server.requests <= n + 3
    assert f"{written} already done" in r.stdout


def test_shards_then_merge_cli(server, tmp_path, capsys):
    write_seeds(tmp_path / "seeds.jsonl", 9)
    outs = []
    for i in range(3):
        outs.append(str(tmp_path / f"shard{i}.jsonl"))
        extra = ["--shard", f"{i}/3", "--no-progress", "--negative", "all"]
        assert cli.main(_synth_args(tmp_path, DEFAULT_MODEL, server.url, outs[-1], *extra)) == 0
    assert server.requests == 18
    per = [len(keys(o)) for o in outs]
    assert sum(per) == 18 and all(per)
    # a re-run shard overlapping another's output (e.g. a copied file): merge de-duplicates
    Path(outs[2]).write_text(Path(outs[2]).read_text() + Path(outs[0]).read_text().splitlines(True)[0])
    capsys.readouterr()
    seeds = ["--seeds", str(tmp_path / "seeds.jsonl")]
    rc = cli.main(["synthesize-merge", *outs, "--out", str(tmp_path / "all.jsonl"), *seeds])
    assert rc == 0 and "18 rows, 1 duplicates dropped" in capsys.readouterr().out
    assert len(set(keys(tmp_path / "all.jsonl"))) == 18
    rc = cli.main(["synthesize-merge", *outs[:2], "--out", str(tmp_path / "part.jsonl"), *seeds])
    o = capsys.readouterr()
    assert rc == 1 and "missing keys: seed-" in o.err


def test_cli_summary_and_failed_exit_code(server, tmp_path, capsys):
    write_seeds(tmp_path / "seeds.jsonl", 2)
    server.rules = {make_seed(1)["query"]: "500"}
    rc = cli.main(
        _synth_args(tmp_path, DEFAULT_MODEL, server.url)
        + ["--no-progress", "--max-retries", "1", "--backoff", "0.01", "--price", "0.5,1.5"]
    )
    o = capsys.readouterr()
    assert rc == 1 and "1 accepted, 0 declined, 0 rejected, 1 failed" in o.out
    assert "failed: HTTP 500 x1" in o.out and "rerun the same command" in o.err


def test_edited_seed_is_refused_then_redone_and_appended(server, tmp_path):
    """A rerun after a seed was edited (same id; other instruction, negatives reordered) neither
    counts its old row as done nor drops it: refused before any request, then with
    ``redo_changed`` one new row is appended, written for the seed as it is now."""
    from ifir_lib.core.errors import ConfigError
    from ifir_lib.seeds.schema import seed_fingerprint
    from ifir_lib.training.trainsets import load_reversals, match_reversals

    out = tmp_path / "o.jsonl"
    seeds = [make_seed(i) for i in range(3)]
    syn.synthesize(seeds, out, cfg(server))
    rows = sorted(
        (json.loads(x) for x in out.read_text().splitlines()), key=lambda r: r["key"]
    )  # written as answered
    assert [r["seed_sha"] for r in rows] == [seed_fingerprint(s, 0) for s in seeds]
    edited = [dict(s) for s in seeds]
    edited[0]["instruction"] = "Only consider studies conducted in Kenya."
    edited[0]["instruction_negatives"] = list(reversed(seeds[0]["instruction_negatives"]))
    before, n = out.read_bytes(), server.requests
    with pytest.raises(
        ConfigError,
        match=r"o.jsonl: 1 key was written for another version of their seed .*"
        r"e\.g\. seed-0000; pass --redo-changed",
    ):
        syn.synthesize(edited, out, cfg(server))
    assert server.requests == n and out.read_bytes() == before  # no request, nothing touched

    s = syn.synthesize(edited, out, cfg(server, redo_changed=True))
    assert (s.keys, s.skipped, s.written, s.redone, server.requests) == (3, 2, 1, 1, n + 1)
    assert "redone 1: their seed changed" in s.format()
    rows = [json.loads(x) for x in out.read_text().splitlines()]
    assert sorted(r["key"] for r in rows[:3]) == ["seed-0000", "seed-0001", "seed-0002"]
    assert rows[-1]["key"] == "seed-0000"  # appended
    rows = sorted(rows[:3], key=lambda r: r["key"]) + rows[3:]
    new = rows[-1]
    assert new["seed_sha"] == seed_fingerprint(edited[0], 0) != rows[0]["seed_sha"]
    assert new["negative_id"] == edited[0]["instruction_negatives"][0]["id"] == "neg-0000-1"
    # resumed again: both versions stay (not "duplicates"), nothing to redo, no request
    s = syn.synthesize(edited, out, cfg(server))
    assert (s.skipped, s.written, server.requests) == (3, 0, n + 1)
    assert len(out.read_text().splitlines()) == 4
    # training takes the row written for the seed as it is now
    assert match_reversals(edited, load_reversals(out))["seed-0000"]["reversal"] == new["reversal"]


def test_an_answer_cut_at_max_tokens_is_rejected_even_from_the_cache(server, tmp_path):
    """``finish_reason: length`` was dropped: an answer cut mid-revision was accepted with the
    reversal the model had just abandoned, and the cache kept it for every rerun."""
    seeds = [make_seed(i) for i in range(2)]
    server.rules = {seeds[0]["query"]: "truncated"}
    syn.synthesize(seeds, tmp_path / "a.jsonl", cfg(server))
    by = {r["key"]: r for r in sio.load_synthesis(tmp_path / "a.jsonl")}
    assert (by["seed-0000"]["status"], by["seed-0000"]["reversal"]) == ("rejected", None)
    assert by["seed-0000"]["reason"].startswith("truncated: the answer reached max_tokens (2048)")
    assert by["seed-0001"]["status"] == "accepted"
    server.rules, server.requests = {}, 0
    syn.synthesize(seeds, tmp_path / "b.jsonl", cfg(server))  # the same prompts: from the cache
    again = {r["key"]: r for r in sio.load_synthesis(tmp_path / "b.jsonl")}
    assert server.requests == 0 and again["seed-0000"]["reason"].startswith("truncated")


def test_a_gateway_parameter_given_twice_is_refused(server, tmp_path, capsys):
    """The query went to the client as a dict: a parameter given twice kept its last value."""
    write_seeds(tmp_path / "seeds.jsonl", 2)
    secret = "SUBKEY-6666666"
    url = f"{server.url}?subscription-key={secret}&api-version=2024-06-01&api-version=2023-01-01"
    out = tmp_path / "o.jsonl"
    assert cli.main(_synth_args(tmp_path, DEFAULT_MODEL, url, out, "--no-progress")) == 2
    err = capsys.readouterr().err
    assert "query parameter(s) 'api-version' given twice" in err and secret not in err
    assert server.requests == 0


def test_an_answer_the_server_did_not_finish_is_never_taken_as_whole(server, tmp_path):
    """Only ``finish_reason: length`` counted as cut: an answer stopped by the content filter was
    accepted with the reversal the model had abandoned, and an aborted generation (vLLM ``abort``,
    empty content) or ``content: null`` became 'rejected: missing <answer> tag', cached, so neither
    a rerun nor a fresh --out ever asked again. ``finish_reason: null`` is a whole answer."""
    seeds = [make_seed(i) for i in range(4)]
    faults = ["content_filter", "abort", "null_content", "finish_null"]
    server.rules = {s["query"]: f for s, f in zip(seeds, faults)}
    out = tmp_path / "o.jsonl"
    s = syn.synthesize(seeds, out, cfg(server, max_retries=1))
    by = {r["key"]: r for r in sio.load_synthesis(out)}
    assert (by["seed-0000"]["status"], by["seed-0000"]["reversal"]) == ("rejected", None)
    assert by["seed-0000"]["reason"].startswith("truncated: the server's content filter stopped the answer")
    assert by["seed-0001"]["status"] == by["seed-0002"]["status"] == "failed" and s.failed == 2
    assert "finish_reason 'abort', empty content" in by["seed-0001"]["reason"]
    assert "null content" in by["seed-0002"]["reason"]
    assert by["seed-0003"]["status"] == "accepted"
    server.rules, server.requests = {}, 0
    s = syn.synthesize(seeds, out, cfg(server))  # the server recovered: only the failed are asked again
    assert server.requests == 2 and s.accepted == 2
    server.requests = 0
    syn.synthesize(seeds, tmp_path / "fresh.jsonl", cfg(server))  # all four from the cache
    again = {r["key"]: r for r in sio.load_synthesis(tmp_path / "fresh.jsonl")}
    assert server.requests == 0 and again["seed-0000"]["reason"].startswith("truncated: the server's content")


def test_a_reply_from_another_model_is_recorded_and_warned_about(server, tmp_path, caplog):
    """A gateway falling back to another model answered under its name: the row said
    ``model: test-model`` and the model that wrote it was recorded nowhere."""
    seeds = [make_seed(i) for i in range(3)]
    server.rules = {seeds[0]["query"]: "other_model", seeds[1]["query"]: "other_model"}
    syn.synthesize(seeds, tmp_path / "o.jsonl", cfg(server))
    by = {r["key"]: r for r in sio.load_synthesis(tmp_path / "o.jsonl")}
    assert [by[s["id"]].get("served_model") for s in seeds] == ["some-other-model", "some-other-model", None]
    assert by["seed-0000"]["model"] == DEFAULT_MODEL
    warned = [r.message for r in caplog.records if "some-other-model" in r.message]
    assert len(warned) == 1 and "served_model" in warned[0]  # once per run and model
    syn.synthesize(seeds, tmp_path / "again.jsonl", cfg(server))  # from the cache: still recorded
    assert sio.load_synthesis(tmp_path / "again.jsonl")[0].get("served_model") == "some-other-model"


def test_replies_without_usage_are_counted_and_the_cost_is_a_lower_bound(server, tmp_path, capsys, caplog):
    """A reply without a ``usage`` block (some gateways, local servers) was costed $0 without a
    word: the printed and saved cost read as the whole run's."""
    write_seeds(tmp_path / "seeds.jsonl", 3)
    server.rules = {make_seed(0)["query"]: "no_usage"}
    args = _synth_args(tmp_path, DEFAULT_MODEL, server.url) + ["--no-progress", "--price", "0.5,1.5"]
    assert cli.main([*args, "--json"]) == 0
    s = json.loads(capsys.readouterr().out)
    assert s["no_usage"] == 1 and s["cost_is_lower_bound"] is True and s["accepted"] == 3
    assert "1 of 3 replies had no usage block" in caplog.text and "lower bound" in caplog.text
    by = {r["seed_id"]: r for r in sio.load_synthesis(tmp_path / "o.jsonl")}
    assert by["seed-0000"]["usage_missing"] is True and by["seed-0000"]["cost_usd"] == 0
    assert "usage_missing" not in by["seed-0001"] and by["seed-0001"]["cost_usd"] > 0
    summary = syn.SynthesisSummary(**{**s, "out": Path(s["out"])}).format()
    assert "est. cost at least $" in summary and "(1 reply without a usage block, costed $0)" in summary
