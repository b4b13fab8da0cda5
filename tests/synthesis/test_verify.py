"""Verification of reversals: the retriever flip check (MiniLM) and the LLM judge (local server)."""

import json
from pathlib import Path

import pytest

from ifir_lib import cli
from ifir_lib.core.models import encode, format_query
from ifir_lib.synthesis import run as sio
from ifir_lib.synthesis import run as syn
from ifir_lib.synthesis.verify import flip_margins, judge_order, parse_judge, verify, verify_file
from ifir_lib.testing.openai_server import DEFAULT_MODEL

SNAKE = "The python is a large constricting snake found in Africa and Asia."
CODE = "Python is a programming language popular for data science and scripting."
SEED = {
    "id": "py",
    "query": "python",
    "instruction": "Only documents about the snake species.",
    "instruction_type": "required_attribute",
    "positive": {"id": "snake", "text": SNAKE},
    "instruction_negatives": [{"id": "code", "text": CODE}],
    "hard_negatives": [
        {"id": "h1", "text": "Boa constrictors."},
        {"id": "h2", "text": "Monty Python sketches."},
    ],
}
GOOD = "Only documents about the programming language."


def _rows():
    base = {"seed_id": "py", "negative_index": 0, "negative_id": "code", "backend": "test", "model": "m"}
    return [
        {**base, "key": "py#0", "status": "accepted", "reversal": GOOD},
        {**base, "key": "py#1", "status": "accepted", "reversal": SEED["instruction"]},  # no flip: same text
        {**base, "key": "py#2", "status": "declined", "reversal": None},
    ]


def test_flip_margins_match_hand_computed_scores(minilm):
    [(og, rev)] = flip_margins(minilm, ["python"], [SEED["instruction"]], [GOOD], [SNAKE], [CODE])
    q = encode(minilm, [format_query("python", SEED["instruction"]), format_query("python", GOOD)], "query")
    d = encode(minilm, [SNAKE, CODE], "document")
    assert og == pytest.approx(float(q[0] @ d[0] - q[0] @ d[1]), abs=1e-5)
    assert rev == pytest.approx(float(q[1] @ d[1] - q[1] @ d[0]), abs=1e-5)
    assert og > 0 and rev > 0  # MiniLM sees snake vs code on this textbook case


def test_verify_columns(minilm):
    rows = verify(_rows(), [SEED], embedder=minilm)
    good, same, declined = rows
    assert good["verify_flip"] is True and good["verify_margin_rev"] > 0
    # reversal == original instruction: the two views agree, so the rev margin is minus the og margin
    assert same["verify_flip"] is False and same["verify_margin_rev"] == pytest.approx(
        -same["verify_margin_og"], abs=1e-5
    )
    assert all(
        declined[c] is None for c in ("verify_flip", "verify_margin_og", "verify_margin_rev", "verify_judge")
    )
    assert good["verify_judge"] is None  # no judge asked for
    assert {k: good[k] for k in ("key", "reversal")} == {
        "key": "py#0",
        "reversal": GOOD,
    }  # rows keep their fields


def test_verify_file_rewrites_atomically(minilm, tmp_path):
    p = tmp_path / "rows.jsonl"
    p.write_text("".join(json.dumps(r) + "\n" for r in _rows()))
    s = verify_file(p, [SEED], embedder=minilm)
    assert (s.rows, s.checked, s.flips, s.flip_checked) == (3, 2, 1, 2)
    rows = sio.load_synthesis(p)
    assert [r["verify_flip"] for r in rows] == [True, False, None]
    assert (
        "minilm" in rows[0]["verify_embedder"] and rows[2]["verify_embedder"] is None
    )  # which embedder said so
    # no temp file left; the lock file (core.locks) stays behind, empty
    assert sorted(x.name for x in tmp_path.iterdir()) == ["rows.jsonl", "rows.jsonl.lock"]


@pytest.mark.parametrize(
    "raw, a_is_n, expected",
    [
        ("ok\n<answer><a>yes</a><b>no</b></answer>", True, True),
        ("<answer><a>yes</a><b>no</b></answer>", False, False),  # then P+ is A: P+ relevant, N* not
        ("<answer><a>no</a><b>yes</b></answer>", False, True),
        ("<answer><a>yes</a><b>yes</b></answer>", True, False),  # both relevant: no flip
        ("yes, no", True, None),
    ],
)
def test_parse_judge(raw, a_is_n, expected):
    assert parse_judge(raw, a_is_n)[0] is expected


def test_judge_through_the_openai_backend(server, tmp_path):
    judge = syn.SynthesisConfig(
        backend="openai",
        model=DEFAULT_MODEL,
        base_url=server.url,
        temperature=0.0,
        progress=False,
        backoff_base_s=0.01,
    )
    server.faults = ["429"]
    server.retry_after = "0"
    rows = verify(_rows(), [SEED], embedder=None, judge=judge)
    # the fake judge always answers A=yes, B=no: a flip exactly when N* was shown as A
    assert [r["verify_judge"] for r in rows] == [judge_order("py#0"), judge_order("py#1"), None]
    assert rows[0]["verify_judge_reason"].startswith("N* relevant: ")
    assert server.requests == 3  # 2 accepted rows + one 429 retried
    prompt = server.bodies[-1]["messages"][0]["content"]
    assert "<judge>" in prompt and SNAKE in prompt and CODE in prompt
    verify(_rows(), [SEED], embedder=None, judge=judge)
    assert server.requests == 3  # cached


def test_a_judge_answer_cut_at_max_tokens_gives_no_verdict(server, tmp_path):
    """``verify`` read the verdict of a judge answer cut mid-revision (``finish_reason: length``):
    the first, abandoned ``<answer>`` became ``verify_judge``, and nothing said it was cut."""
    judge = syn.SynthesisConfig(
        backend="openai", model=DEFAULT_MODEL, base_url=server.url, max_tokens=512, progress=False
    )
    server.rules = {GOOD: "truncated"}  # py#0's judge prompt holds its reversal
    rows = verify(_rows(), [SEED], embedder=None, judge=judge)
    assert rows[0]["verify_judge"] is None
    assert rows[0]["verify_judge_reason"] == "judge answer truncated: the answer reached max_tokens (512)"
    assert rows[1]["verify_judge"] is judge_order("py#1")  # a whole answer still gives its verdict
    server.rules, n = {}, server.requests
    again = verify(_rows(), [SEED], embedder=None, judge=judge)  # from the cache: still no verdict
    assert server.requests == n and again[0]["verify_judge"] is None


def test_verify_cli_with_judge(server, tmp_path, capsys):
    seeds = tmp_path / "seeds.jsonl"
    seeds.write_text(json.dumps(SEED) + "\n")
    rows = tmp_path / "rows.jsonl"
    rows.write_text("".join(json.dumps(r) + "\n" for r in _rows()))
    rc = cli.main(
        [
            "verify",
            "--in",
            str(rows),
            "--seeds",
            str(seeds),
            "--out",
            str(tmp_path / "v.jsonl"),
            "--no-embedder",
            "--judge-backend",
            "openai",
            "--model",
            DEFAULT_MODEL,
            "--base-url",
            server.url,
        ]
    )
    out = capsys.readouterr().out
    yes = judge_order("py#0") + judge_order("py#1")  # the fake judge: A=yes, B=no
    assert rc == 0 and f"judge yes {yes}/2" in out
    # no flip check ran: it said "retriever flip 0/2", read as "no reversal flips"
    assert "retriever flip not run (--no-embedder)" in out and "flip 0/" not in out
    assert Path(rows).read_text().count("verify_") == 0  # --out given: the input is untouched
    assert {
        r["verify_judge_model"]
        for r in sio.load_synthesis(tmp_path / "v.jsonl")
        if r["verify_judge"] is not None
    } == {DEFAULT_MODEL}
    assert [r["verify_judge"] is not None for r in sio.load_synthesis(tmp_path / "v.jsonl")] == [
        True,
        True,
        False,
    ]


def test_verify_counts_rows_the_judge_gave_no_verdict_and_exits_1_on_failed_requests(
    server, tmp_path, capsys
):
    """A judge request that failed left ``verify_judge`` None and vanished: the summary read
    "judge yes 1/1" and ``ifir verify`` exited 0, where ``synthesize`` says "N rows failed" and
    exits 1. An answer without a verdict (here: cut) is counted too, but a rerun cannot mend it."""
    seeds, rows = tmp_path / "seeds.jsonl", tmp_path / "rows.jsonl"
    seeds.write_text(json.dumps(SEED) + "\n")
    rows.write_text("".join(json.dumps(r) + "\n" for r in _rows()))
    args = ["verify", "--in", str(rows), "--seeds", str(seeds), "--out", str(tmp_path / "v.jsonl")]
    args += ["--no-embedder", "--judge-backend", "openai", "--model", DEFAULT_MODEL, "--base-url", server.url]
    args += ["--max-retries", "1", "--backoff", "0.01"]
    server.rules = {GOOD: "500"}  # py#0's judge request fails for good
    assert cli.main(args) == 1
    cap = capsys.readouterr()
    assert (
        "judge yes" in cap.out
        and "judge gave no verdict for 1 (1 request(s) failed: rerun to retry)" in cap.out
    )
    assert "ifir verify: 1 judge requests failed" in cap.err
    server.rules = {GOOD: "truncated"}  # answered, but cut: no verdict, nothing a rerun would mend
    assert cli.main(args) == 0
    out = capsys.readouterr().out
    assert "judge gave no verdict for 1;" in out or out.rstrip().endswith("judge gave no verdict for 1")
    assert "failed" not in out
    server.rules = {}
    assert cli.main([*args, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["judge_no_verdict"] == 1  # the cut answer is cached


def test_verify_file_waits_for_no_writer_it_fails_at_once(tmp_path):
    """While ``synthesize`` holds the output's lock (it appends rows), verify neither reads nor
    rewrites the file (its rename would cut off every row appended after the read)."""
    from ifir_lib.core.errors import OutputLocked
    from ifir_lib.core.locks import exclusive

    p = tmp_path / "rows.jsonl"
    p.write_text("".join(json.dumps(r) + "\n" for r in _rows()))
    before = p.read_bytes()
    with exclusive(p, "synthesis output"):
        with pytest.raises(
            OutputLocked, match=r"rows.jsonl: this synthesis output is being written by another process"
        ):
            verify_file(p, [SEED], embedder=None)
        with pytest.raises(OutputLocked):  # to another --out too: it would miss the rows still coming
            verify_file(p, [SEED], tmp_path / "v.jsonl", embedder=None)
    assert p.read_bytes() == before and not (tmp_path / "v.jsonl").exists()
    assert verify_file(p, [SEED], embedder=None).rows == 3  # the writer is done: it runs


def test_verify_to_another_out_reads_an_input_it_cannot_lock(tmp_path, monkeypatch, caplog):
    """An input in a folder we cannot write (its lock file cannot be made): with another ``out`` it
    is read unlocked, with a warning (no writer can be appending there); in place, one clear error."""
    from ifir_lib.core.errors import ConfigError
    from ifir_lib.synthesis import verify as vmod

    p = tmp_path / "ro" / "rows.jsonl"
    p.parent.mkdir()
    p.write_text("".join(json.dumps(r) + "\n" for r in _rows()))
    real = vmod.exclusive

    def exclusive(path, what="output"):
        if Path(path).parent == p.parent:
            raise PermissionError(13, "Permission denied", str(path) + ".lock")
        return real(path, what)

    monkeypatch.setattr(vmod, "exclusive", exclusive)
    out = tmp_path / "v.jsonl"
    with caplog.at_level("WARNING", logger="ifir_lib.synthesis.verify"):
        assert verify_file(p, [SEED], out, embedder=None).rows == 3
    assert "rows.jsonl: not locked (Permission denied); reading it as it is" in caplog.text
    assert len(sio.load_synthesis(out)) == 3
    with pytest.raises(
        ConfigError, match=r"rows.jsonl: cannot make its lock file \(Permission denied\); pass --out"
    ):
        verify_file(p, [SEED], embedder=None)
    with pytest.raises(ConfigError, match="cannot make its lock file"):  # the same file by another name
        verify_file(p, [SEED], tmp_path / "ro" / ".." / "ro" / "rows.jsonl", embedder=None)


def test_verify_names_the_file_and_line_of_a_row_without_its_seed(tmp_path):
    from ifir_lib.core.errors import DataError

    p = tmp_path / "rows.jsonl"
    rows = _rows()
    rows[1] = {**rows[1], "seed_id": "gone"}
    p.write_text("".join(json.dumps(r) + "\n" for r in rows))
    with pytest.raises(
        DataError, match=r"rows.jsonl:2: field 'seed_id': row 'py#1' names seed 'gone', which is not"
    ):
        verify_file(p, [SEED], embedder=None)
    with pytest.raises(DataError, match=r"^<rows>:2: field 'seed_id'"):  # rows given in memory: their number
        verify(rows, [SEED], embedder=None)


def test_verify_skips_rows_written_for_another_version_of_the_seed(minilm, tmp_path, caplog):
    from ifir_lib.seeds.schema import seed_fingerprint

    p = tmp_path / "rows.jsonl"
    rows = _rows()
    rows[0]["seed_sha"] = seed_fingerprint(SEED, 0)  # written for the seed as it is
    rows[1]["seed_sha"] = "0123456789abcdef"  # for an earlier version
    redone = {**rows[1], "seed_sha": seed_fingerprint(SEED, 0), "reversal": GOOD}  # its redo, appended
    p.write_text("".join(json.dumps(r) + "\n" for r in [*rows, redone]))
    with caplog.at_level("WARNING", logger="ifir_lib.synthesis.verify"):
        s = verify_file(p, [SEED], embedder=minilm)
    assert (s.rows, s.checked) == (4, 2)  # every row kept, the stale one not checked
    assert "rows.jsonl: 1 accepted row was written for another version of their seed" in caplog.text
    assert [r["verify_flip"] for r in sio.iter_synthesis(p, by_version=True)] == [True, None, None, True]
