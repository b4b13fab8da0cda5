"""Nothing silently wrong in ``ifir synthesize`` / ``ifir verify``: the real command, in-process,
against the local OpenAI-compatible server (no mocks).

- no secret on disk or on screen: a key planted in the environment, in the base URL's userinfo
  and in a base-URL query parameter appears in no file under the output folder or the cache, and
  nowhere in stdout, stderr or the log;
- an output's options are part of its identity: a rerun with another backend / model /
  --negative / --template is refused (exit 2, one line, nothing touched, no request) unless
  --extend; options that do not change a row's meaning are not refused;
- the decoding (--temperature, --top-p, --max-tokens) is part of that identity, and each row
  records its own; sidecars without it accept a rerun and record it;
- a rerun whose seeds changed since their rows were written (edited, another file reusing the
  ids) is refused before any request unless --redo-changed appends new rows;
- shards written under other options are not merged; verify fails at once beside a writer, and
  names the file and line of a row whose seed is gone;
- a cut last line is set aside in a side file named in a warning, never glued to a new row;
- an --out that cannot be written fails with one line before any request.
"""

import base64
import json
import logging
import os
from pathlib import Path

import pytest

from ifir_lib import cli
from ifir_lib.testing.inputs import make_seed, write_seeds
from ifir_lib.testing.openai_server import DEFAULT_MODEL, free_port

PLANTED = "sk-PLANTED-1234567890"


@pytest.fixture
def planted(server, monkeypatch):
    """The server, with the planted key in $OPENAI_API_KEY."""
    monkeypatch.setenv("OPENAI_API_KEY", PLANTED)
    return server


def _synth(tmp_path, *extra, out=None, backend="openai"):
    seeds = tmp_path / "seeds.jsonl"
    if not seeds.exists():
        write_seeds(seeds, 4)
    out = out or tmp_path / "out" / "o.jsonl"
    args = ["synthesize", "--preset", "paper", "--seeds", str(seeds), "--out", str(out), "--no-progress"]
    return cli.main([*args, "--backend", backend, *extra])


def _llm(url):
    return ["--model", DEFAULT_MODEL, "--base-url", url, "--max-retries", "1", "--backoff", "0.01"]


def _one_line(err: str) -> str:
    assert "Traceback" not in err
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    return lines[0]


def _no_key_anywhere(tmp_path, *texts):
    """No file under ``tmp_path`` (output folder, cache, seeds) nor any text holds the planted key."""
    files = [p for p in Path(tmp_path).rglob("*") if p.is_file()]
    assert files
    for p in files:
        assert PLANTED.encode() not in p.read_bytes(), p
    for t in texts:
        assert PLANTED not in t


def _snapshot(folder):
    return {p.name: p.read_bytes() for p in Path(folder).iterdir() if p.is_file()}


# ---- no secret on disk, ever --------------------------------------------------------------------


def test_planted_key_in_env_and_userinfo_never_stored_or_printed(planted, tmp_path, capsys, caplog):
    caplog.set_level(logging.DEBUG)
    planted.rules = {make_seed(1)["query"]: "500"}  # this seed's rows fail for good
    url = f"http://user:{PLANTED}@127.0.0.1:{planted.port}/v1"
    assert _synth(tmp_path, *_llm(url), "--negative", "all") == 1  # failed rows: exit 1
    out, err = capsys.readouterr()
    _no_key_anywhere(tmp_path, out, err, caplog.text)
    token = base64.b64encode(f"user:{PLANTED}".encode()).decode()
    assert f"Basic {token}" in planted.auth_headers  # the URL's credentials still reached the server
    rows = [json.loads(x) for x in (tmp_path / "out" / "o.jsonl").read_text().splitlines()]
    assert [r["reason"] for r in rows if r["status"] == "failed"] == ["HTTP 500 after 2 attempts"] * 2
    side = json.loads((tmp_path / "out" / "o.config.json").read_text())
    assert side["config"]["base_url"] == f"http://***@127.0.0.1:{planted.port}/v1"
    assert side["runs"][0]["config"]["base_url"] == side["config"]["base_url"]


@pytest.mark.parametrize("case", ["query", "unreachable", "echoed"])
def test_planted_key_out_of_error_lines(planted, tmp_path, capsys, caplog, case):
    caplog.set_level(logging.DEBUG)
    url = {
        "query": f"http://127.0.0.1:{planted.port}/v1?API_KEY={PLANTED}&x=1",  # sent as the query
        "unreachable": f"http://user:{PLANTED}@127.0.0.1:{free_port()}/v1",
        "echoed": planted.url,
    }[case]
    if case == "echoed":
        planted.api_key = "sk-the-right-one"  # the 401 echoes our (planted) key back
    if case == "query":
        planted.models = set()  # the server answers 404 (no such model), naming the URL
    assert _synth(tmp_path, *_llm(url)) == 2
    out, err = capsys.readouterr()
    line = _one_line(err)
    expect = {
        "query": f"HTTP 404 from http://127.0.0.1:{planted.port}/v1?API_KEY=***&x=1 for model",
        "unreachable": f"cannot connect to http://***@127.0.0.1:{url.rsplit(':', 1)[1]}",
        "echoed": "refused the API key from $OPENAI_API_KEY (HTTP 401: Incorrect API key provided: ***)",
    }[case]
    assert line.startswith("ifir synthesize: error: ") and expect in line
    _no_key_anywhere(tmp_path, out, err, caplog.text)


def test_an_answer_that_echoes_the_key_is_a_failed_request_never_stored(planted, tmp_path, capsys, caplog):
    """A gateway passing an upstream error on as HTTP 200 content repeated the Authorization
    header: the key went into rows (raw, reasoning) and the answer cache as a 'rejected' answer."""
    caplog.set_level(logging.DEBUG)
    planted.rules = {make_seed(1)["query"]: "echo_auth"}
    assert _synth(tmp_path, *_llm(planted.url)) == 1  # failed rows: exit 1
    out, err = capsys.readouterr()
    _no_key_anywhere(tmp_path, out, err, caplog.text)
    assert any(PLANTED in h for h in planted.auth_headers)  # the key did reach the server
    rows = {r["key"]: r for r in map(json.loads, (tmp_path / "out" / "o.jsonl").read_text().splitlines())}
    bad = rows[make_seed(1)["id"]]
    assert (
        bad["status"] == "failed"
        and bad["raw"] is None
        and "repeats the request's credentials" in bad["reason"]
    )
    planted.rules = {}
    assert _synth(tmp_path, *_llm(planted.url)) == 0  # not cached: the rerun asks again
    rows = {r["key"]: r for r in map(json.loads, (tmp_path / "out" / "o.jsonl").read_text().splitlines())}
    assert rows[make_seed(1)["id"]]["status"] == "accepted"


def test_verify_judge_never_stores_the_planted_key(planted, tmp_path, capsys, caplog):
    caplog.set_level(logging.DEBUG)
    rev = tmp_path / "out" / "o.jsonl"
    assert _synth(tmp_path, backend="template") == 0
    planted.rules = {make_seed(2)["query"]: "500"}
    url = f"http://user:{PLANTED}@127.0.0.1:{planted.port}/v1"
    args = ["verify", "--reversals", str(rev), "--seeds", str(tmp_path / "seeds.jsonl"), "--no-embedder"]
    v = tmp_path / "out" / "v.jsonl"
    assert cli.main([*args, "--out", str(v), "--judge-backend", "openai", *_llm(url)]) == 1  # failed
    reasons = [json.loads(x)["verify_judge_reason"] for x in v.read_text().splitlines()]
    assert "judge request failed: HTTP 500 after 2 attempts" in reasons
    first = capsys.readouterr()
    assert "1 judge requests failed" in first.err
    bad = f"http://user:{PLANTED}@127.0.0.1:{free_port()}/v1"
    assert cli.main([*args, "--out", str(v), "--judge-backend", "openai", *_llm(bad)]) == 2
    out, err = capsys.readouterr()
    assert "cannot connect to http://***@127.0.0.1:" in _one_line(err)
    _no_key_anywhere(tmp_path, out, err, first.out, first.err, caplog.text)


def test_notebook_01_and_the_config_s_repr_never_show_the_url_s_credentials(capsys):
    """Notebook 01 printed ``IFIR_BASE_URL`` as given, so a gateway key in its query (or
    userinfo) was saved with the notebook's output; ``repr(SynthesisConfig)`` showed it too."""
    import types

    import nbformat

    from ifir_lib.synthesis.run import SynthesisConfig

    nb = nbformat.read(
        Path(__file__).resolve().parents[1] / "notebooks" / "01_synthesize.ipynb", as_version=4
    )
    (cell,) = [c for c in nb.cells if c.cell_type == "code" and "FakeOpenAIServer" in c.source]
    url = f"http://user:{PLANTED}@gpu-box:8000/v1?api-key=GATEWAY-{PLANTED}"
    chain = types.SimpleNamespace(synthesis_target=lambda standin: "reversals.jsonl")
    exec(cell.source, {"BASE_URL": url, "MODEL": "m", "LIMIT": 2, "chain": chain, "seeds": []})
    out = capsys.readouterr().out
    assert "endpoint http://***@gpu-box:8000/v1?api-key=***" in out and PLANTED not in out
    shown = repr(SynthesisConfig(base_url=url))
    assert "base_url='http://***@gpu-box:8000/v1?api-key=***'" in shown and PLANTED not in shown


# ---- an output's options are part of its identity ------------------------------------------------


def test_rerun_with_other_options_is_refused_before_any_request(planted, tmp_path, capsys):
    out = tmp_path / "out" / "o.jsonl"
    assert _synth(tmp_path, backend="template") == 0
    before = _snapshot(out.parent)
    capsys.readouterr()
    assert _synth(tmp_path, "--negative", "all", backend="template") == 2
    assert _one_line(capsys.readouterr().err) == (
        f"ifir synthesize: error: {out} holds rows written with other options (negative 'first' -> 'all'); "
        "write to another --out, or pass --extend to add rows under the new options"
    )
    assert _synth(tmp_path, *_llm(planted.url)) == 2
    line = _one_line(capsys.readouterr().err)
    assert f"(backend 'template' -> 'openai', model 'template' -> '{DEFAULT_MODEL}', template " in line
    assert line.endswith("write to another --out, or pass --extend to add rows under the new options")
    assert planted.requests == 0 and _snapshot(out.parent) == before  # nothing touched


def test_options_that_keep_a_rows_meaning_are_not_refused(tmp_path, capsys):
    assert _synth(tmp_path, "--limit", "2", backend="template") == 0
    for extra in (["--concurrency", "3", "--timeout", "9"], ["--shard", "0/2"], ["--limit", "3"], []):
        assert _synth(tmp_path, *extra, backend="template") == 0, capsys.readouterr().err
    rows = (tmp_path / "out" / "o.jsonl").read_text().splitlines()
    assert len(rows) == 4
    side = json.loads((tmp_path / "out" / "o.config.json").read_text())
    assert len(side["runs"]) == 1 and side["config"]["limit"] is None  # the last run's config


def test_extend_records_every_option_set(tmp_path, capsys):
    out = tmp_path / "out" / "o.jsonl"
    assert _synth(tmp_path, backend="template") == 0
    assert _synth(tmp_path, "--negative", "all", "--extend", backend="template") == 0
    keys = [json.loads(x)["key"] for x in out.read_text().splitlines()]
    assert len(keys) == 12 and "seed-0000" in keys and "seed-0000#1" in keys
    side = json.loads((tmp_path / "out" / "o.config.json").read_text())
    assert [r["identity"]["negative"] for r in side["runs"]] == ["first", "all"]
    assert _synth(tmp_path, backend="template") == 0  # either recorded option set may resume
    assert _synth(tmp_path, "--negative", "random", backend="template") == 2


def test_output_without_sidecar_keeps_working_and_gets_one(tmp_path, capsys):
    out = tmp_path / "out" / "o.jsonl"
    assert _synth(tmp_path, "--limit", "2", backend="template") == 0
    (tmp_path / "out" / "o.config.json").unlink()
    # no sidecar: the rows' own backend / model / template stand in for it
    assert _synth(tmp_path, backend="reference") == 2
    assert "(backend 'template' -> 'reference', model 'template' -> 'reference'" in _one_line(
        capsys.readouterr().err
    )
    assert not (tmp_path / "out" / "o.config.json").exists()  # nothing touched
    assert _synth(tmp_path, backend="template") == 0  # the same options resume it, and record them
    side = json.loads((tmp_path / "out" / "o.config.json").read_text())
    assert [r["identity"]["backend"] for r in side["runs"]] == ["template"]
    assert len(out.read_text().splitlines()) == 4


def test_sidecar_of_the_older_format_counts_as_one_run(tmp_path, capsys):
    assert _synth(tmp_path, backend="template") == 0
    side = tmp_path / "out" / "o.config.json"
    doc = json.loads(side.read_text())
    side.write_text(json.dumps({k: doc[k] for k in ("config", "template", "template_version", "seeds")}))
    assert _synth(tmp_path, backend="template") == 0
    assert _synth(tmp_path, "--negative", "all", backend="template") == 2
    assert "(negative 'first' -> 'all')" in _one_line(capsys.readouterr().err)


def test_rerun_with_other_decoding_is_refused_and_rows_record_theirs(planted, tmp_path, capsys):
    out = tmp_path / "out" / "o.jsonl"
    assert _synth(tmp_path, "--limit", "2", *_llm(planted.url)) == 0
    assert [json.loads(x)["decoding"] for x in out.read_text().splitlines()] == [
        {"temperature": 0.7, "top_p": 0.8, "max_tokens": 2048}
    ] * 2
    before, n = _snapshot(out.parent), planted.requests
    capsys.readouterr()
    assert _synth(tmp_path, *_llm(planted.url), "--temperature", "0", "--max-tokens", "64") == 2
    assert _one_line(capsys.readouterr().err) == (
        f"ifir synthesize: error: {out} holds rows written with other options (temperature 0.7 -> 0.0, "
        "max_tokens 2048 -> 64); write to another --out, or pass --extend to add rows under the new options"
    )
    assert planted.requests == n and _snapshot(out.parent) == before
    assert _synth(tmp_path, *_llm(planted.url), "--temperature", "0", "--limit", "3", "--extend") == 0
    side = json.loads((tmp_path / "out" / "o.config.json").read_text())
    assert [r["identity"]["temperature"] for r in side["runs"]] == [0.7, 0.0]
    assert [json.loads(x)["decoding"]["temperature"] for x in out.read_text().splitlines()] == [0.7, 0.7, 0.0]


def _strip_decoding(side, config_too: bool) -> None:
    """Make ``side`` look as an earlier version wrote it: no decoding in the identities (and, with
    ``config_too``, none in the configs either)."""
    doc = json.loads(side.read_text())
    for r in doc["runs"]:
        r["identity"] = {
            k: v for k, v in r["identity"].items() if k not in ("temperature", "top_p", "max_tokens")
        }
        if config_too:
            r["config"] = {
                k: v for k, v in r["config"].items() if k not in ("temperature", "top_p", "max_tokens")
            }
    side.write_text(json.dumps(doc))


def test_sidecar_without_decoding_accepts_a_rerun_and_records_it(planted, tmp_path, capsys):
    out = tmp_path / "out" / "o.jsonl"
    assert _synth(tmp_path, "--limit", "2", *_llm(planted.url), "--temperature", "0") == 0
    side = tmp_path / "out" / "o.config.json"
    # an earlier sidecar: no decoding in the identity, but its config records it: a change is refused
    _strip_decoding(side, config_too=False)
    before = _snapshot(out.parent)
    capsys.readouterr()
    assert _synth(tmp_path, *_llm(planted.url)) == 2
    assert "(temperature 0.0 -> 0.7)" in _one_line(capsys.readouterr().err)
    assert _snapshot(out.parent) == before  # the old entry (temperature 0) is kept
    assert _synth(tmp_path, *_llm(planted.url), "--temperature", "0") == 0  # the same decoding: resumed
    assert [r["config"]["temperature"] for r in json.loads(side.read_text())["runs"]] == [0.0]
    # no decoding recorded anywhere: unknown, accepted ...
    _strip_decoding(side, config_too=True)
    assert _synth(tmp_path, *_llm(planted.url), "--top-p", "1") == 0
    runs = json.loads(side.read_text())["runs"]
    assert [r["identity"].get("top_p") for r in runs] == [1.0]  # ... and recorded
    assert _synth(tmp_path, *_llm(planted.url), "--top-p", "0.5") == 2
    assert "(top_p 1.0 -> 0.5)" in _one_line(capsys.readouterr().err)


def test_another_seeds_file_reusing_the_ids_is_refused_before_any_request(planted, tmp_path, capsys):
    out = tmp_path / "out" / "o.jsonl"
    assert _synth(tmp_path, "--limit", "3", *_llm(planted.url)) == 0
    other = [make_seed(i + 7) for i in range(3)]
    for i, s in enumerate(other):
        s["id"] = f"seed-{i:04d}"  # other topics and queries, the same ids
    (tmp_path / "seeds.jsonl").write_text("".join(json.dumps(s) + "\n" for s in other))
    before, n = _snapshot(out.parent), planted.requests
    capsys.readouterr()
    assert _synth(tmp_path, *_llm(planted.url)) == 2
    assert _one_line(capsys.readouterr().err) == (
        f"ifir synthesize: error: {out}: 3 keys were written for another version of their seed (its query, "
        "instruction, positive or N* changed, or another seeds file reuses the ids), e.g. seed-0000, "
        "seed-0001, seed-0002; pass --redo-changed to synthesize them again (the old rows stay in the "
        "file), or write to another --out"
    )
    assert planted.requests == n and _snapshot(out.parent) == before
    assert _synth(tmp_path, *_llm(planted.url), "--redo-changed") == 0
    assert "redone 3: their seed changed" in capsys.readouterr().out
    assert len(out.read_text().splitlines()) == 6 and planted.requests == n + 3


def test_merge_of_shards_of_other_models_is_refused(planted, tmp_path, capsys):
    planted.models = {DEFAULT_MODEL, "other-model"}
    s0, s1 = tmp_path / "out" / "s0.jsonl", tmp_path / "out" / "s1.jsonl"
    assert _synth(tmp_path, "--shard", "0/2", *_llm(planted.url), out=s0) == 0
    other = [a if a != DEFAULT_MODEL else "other-model" for a in _llm(planted.url)]
    assert _synth(tmp_path, "--shard", "1/2", *other, out=s1) == 0
    capsys.readouterr()
    merged = tmp_path / "out" / "m.jsonl"
    assert cli.main(["synthesize-merge", str(s0), str(s1), "--out", str(merged), "--no-check"]) == 2
    assert _one_line(capsys.readouterr().err) == (
        f"ifir synthesize-merge: error: shards {s0} and {s1} were written with other options "
        f"(model '{DEFAULT_MODEL}' -> 'other-model'); merge only shards of one run; nothing was written"
    )
    assert not merged.exists()


def test_verify_beside_a_running_synthesis_fails_at_once(tmp_path, capsys):
    from ifir_lib.core.locks import exclusive

    out = tmp_path / "out" / "o.jsonl"
    assert _synth(tmp_path, backend="reference") == 0
    before = out.read_bytes()
    capsys.readouterr()
    args = ["verify", "--reversals", str(out), "--seeds", str(tmp_path / "seeds.jsonl"), "--no-embedder"]
    with exclusive(out, "synthesis output"):  # as a running `ifir synthesize` holds it
        assert cli.main(args) == 2
    line = _one_line(capsys.readouterr().err)
    assert line.startswith(
        f"ifir verify: error: {out}: this synthesis output is being written by another process (pid "
    )
    assert out.read_bytes() == before


def test_verify_after_a_seed_was_removed_names_file_and_line(tmp_path, capsys):
    out = tmp_path / "out" / "o.jsonl"
    assert _synth(tmp_path, backend="reference") == 0
    seeds = tmp_path / "seeds.jsonl"
    seeds.write_text("".join(seeds.read_text().splitlines(True)[1:]))  # seed-0000 removed
    capsys.readouterr()
    args = ["verify", "--reversals", str(out), "--seeds", str(seeds), "--no-embedder"]
    assert cli.main(args) == 2
    assert _one_line(capsys.readouterr().err) == (
        f"ifir verify: error: {out}:1: field 'seed_id': row 'seed-0000' names seed 'seed-0000', which is "
        "not in the seed set (removed from it?); pass the seeds the rows were written from"
    )


# ---- a cut last line is set aside, never dropped or glued ----------------------------------------


def test_cut_last_line_is_set_aside_in_a_side_file(tmp_path, capsys, caplog):
    out = tmp_path / "out" / "o.jsonl"
    assert _synth(tmp_path, "--limit", "2", backend="template") == 0
    fragment = '{"key": "seed-0002", "seed_id": "seed-00'
    with out.open("a") as fh:
        fh.write(fragment)
    assert _synth(tmp_path, backend="template") == 0
    sides = list(out.parent.glob("o.jsonl.cut-*"))
    assert len(sides) == 1 and sides[0].read_text() == fragment
    assert str(sides[0]) in caplog.text and "was cut" in caplog.text  # the warning names the side file
    rows = [json.loads(x) for x in out.read_text().splitlines()]  # every line a whole row
    assert [r["key"] for r in rows] == [f"seed-{i:04d}" for i in range(4)]


def test_whole_last_row_without_newline_is_kept(tmp_path):
    out = tmp_path / "out" / "o.jsonl"
    assert _synth(tmp_path, "--limit", "2", backend="template") == 0
    out.write_text(out.read_text().rstrip("\n"))
    assert _synth(tmp_path, backend="template") == 0
    assert not list(out.parent.glob("o.jsonl.cut-*"))
    assert len([json.loads(x) for x in out.read_text().splitlines()]) == 4


# ---- check before work: an --out that cannot be written --------------------------------------------


def test_out_under_a_regular_file_fails_before_any_request(planted, tmp_path, capsys):
    blocker = tmp_path / "f"
    blocker.write_text("not a folder")
    out = blocker / "sub" / "o.jsonl"
    assert _synth(tmp_path, *_llm(planted.url), out=out) == 2
    assert _one_line(capsys.readouterr().err) == (
        f"ifir synthesize: error: {out}: cannot be written: {blocker} is a file, not a folder"
    )
    assert planted.requests == 0 and blocker.read_text() == "not a folder"


def test_out_that_is_a_folder_fails(planted, tmp_path, capsys):
    assert _synth(tmp_path, *_llm(planted.url), out=tmp_path) == 2
    assert _one_line(capsys.readouterr().err) == (
        f"ifir synthesize: error: {tmp_path}: cannot be written: it is a folder; name a file"
    )
    assert planted.requests == 0


def test_out_in_a_folder_nobody_may_write_fails(planted, tmp_path, capsys):
    out = Path("/proc/ifir-no-such-folder/o.jsonl")  # not writable, even for root
    assert _synth(tmp_path, *_llm(planted.url), out=out) == 2
    line = _one_line(capsys.readouterr().err)
    assert line.startswith(f"ifir synthesize: error: {out}: cannot be written: /proc is not writable (")
    assert planted.requests == 0


@pytest.mark.skipif(os.geteuid() == 0, reason="root may write in a read-only folder")
def test_out_in_a_read_only_folder_fails(planted, tmp_path, capsys):
    folder = tmp_path / "ro"
    folder.mkdir()
    folder.chmod(0o555)
    try:
        assert _synth(tmp_path, *_llm(planted.url), out=folder / "o.jsonl") == 2
        line = _one_line(capsys.readouterr().err)
        assert f"{folder / 'o.jsonl'}: cannot be written: {folder} is not writable (" in line
        assert planted.requests == 0 and not list(folder.iterdir())
    finally:
        folder.chmod(0o755)
