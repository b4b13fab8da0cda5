"""Bad input, tried on purpose: what people really feed each command.

Every case runs the real command (``ifir ...`` in-process) and checks one of two outcomes: a
clear one-line error (exit 2) that names the file, the line and the field, with nothing
half-written left behind; or, where the input is legitimate but awkward (a BOM, CRLF, a cut last
line, a huge passage, qrels for unknown queries), a correct result. ``CASES`` counts them.
"""

import http.server
import json
import logging
import threading

import pytest

from ifir_lib import cli
from ifir_lib.evaluation.corpora import write_followir
from ifir_lib.testing.inputs import make_seed, synthetic_followir, write_beir

CASES = (
    "empty file",
    "UTF-8 BOM",
    "Windows line endings",
    "truncated last line",
    "JSON array",
    "empty passage",
    "50,000-word passage",
    "non-string id",
    "duplicate id across shards",
    "results CSV missing a column",
    "qrels for unknown queries",
    "BEIR folder with an infinite score, a fractional score, a numeric title, an id twice",
    "model path that is not a SentenceTransformer folder",
    "--base-url that answers HTML",
    "--curation file that does not exist",
    "--reversals from another seed file",
    "--reversals row with a null negative_index",
    "--out that is a file",
)


def _lines(n=3, **kw):
    return [json.dumps(make_seed(i, **kw)) for i in range(n)]


def _synth(tmp_path, seeds_bytes: bytes, capsys):
    seeds, out = tmp_path / "seeds.jsonl", tmp_path / "out" / "o.jsonl"
    seeds.write_bytes(seeds_bytes)
    code = cli.main(
        ["synthesize", "--preset", "paper", "--seeds", str(seeds), "--out", str(out)]
        + ["--backend", "template", "--no-progress"]
    )
    return code, capsys.readouterr().err, seeds, out


def _rows(path):
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def test_empty_file(tmp_path, capsys):
    code, err, seeds, out = _synth(tmp_path, b"", capsys)
    assert code == 2 and f"{seeds}: no seed rows" in err
    assert not out.exists()


def test_utf8_bom_is_read(tmp_path, capsys):
    code, _, _, out = _synth(tmp_path, b"\xef\xbb\xbf" + "\n".join(_lines()).encode() + b"\n", capsys)
    assert code == 0 and len(_rows(out)) == 3


def test_windows_line_endings_are_read(tmp_path, capsys):
    code, _, _, out = _synth(tmp_path, "\r\n".join(_lines()).encode() + b"\r\n", capsys)
    assert code == 0 and [r["seed_id"] for r in _rows(out)] == ["seed-0000", "seed-0001", "seed-0002"]


def test_truncated_last_line_is_dropped_with_a_warning(tmp_path, capsys, caplog):
    cut = "\n".join(_lines()) + "\n" + _lines(4)[3][:40]
    with caplog.at_level(logging.WARNING):
        code, _, seeds, out = _synth(tmp_path, cut.encode(), capsys)
    assert code == 0 and len(_rows(out)) == 3
    assert f"{seeds}: dropping a cut last line" in caplog.text


@pytest.mark.parametrize("indent", [None, 2])
def test_json_array_is_named(tmp_path, capsys, indent):
    text = json.dumps([make_seed(0), make_seed(1)], indent=indent)
    code, err, seeds, out = _synth(tmp_path, text.encode(), capsys)
    assert code == 2 and f"{seeds}:1:" in err and "looks like a JSON array" in err
    assert not out.exists()


def test_empty_passage(tmp_path, capsys):
    bad = make_seed(1)
    bad["positive"]["text"] = "  "
    lines = [json.dumps(make_seed(0)), json.dumps(bad)]
    code, err, seeds, out = _synth(tmp_path, ("\n".join(lines) + "\n").encode(), capsys)
    assert code == 2 and f"{seeds}:2: field 'positive': missing or empty 'text'" in err
    assert not out.exists()


@pytest.mark.slow
def test_50k_word_passage_is_truncated_not_fatal(tmp_path, capsys):
    data = synthetic_followir(3, 20, rng_seed=5)
    doc = next(iter(data.corpus))
    data.corpus[doc]["text"] = " ".join(["erosion"] * 50_000)
    folder = write_followir(data, tmp_path / "fir")
    code = cli.main(["evaluate", "--model", "minilm", "--followir", str(folder), "--json", "--no-cache"])
    out = capsys.readouterr().out
    assert code == 0 and json.loads(out.strip().splitlines()[-1])["p_mrr_n_queries"] == 3


def test_non_string_id(tmp_path, capsys):
    bad = make_seed(0)
    bad["id"] = 17
    code, err, seeds, out = _synth(tmp_path, (json.dumps(bad) + "\n").encode(), capsys)
    assert code == 2 and f"{seeds}:1: field 'id': must be a non-empty string" in err
    assert not out.exists()


def test_duplicate_id_across_shards(tmp_path, capsys):
    """Two shard outputs hold different accepted reversals for one key: merge names both files."""
    row = {"key": "seed-0000", "seed_id": "seed-0000", "status": "accepted", "negative_index": 0}
    a, b, out = tmp_path / "a.jsonl", tmp_path / "b.jsonl", tmp_path / "all.jsonl"
    a.write_text(json.dumps({**row, "reversal": "Only studies from Chile."}) + "\n")
    b.write_text(json.dumps({**row, "reversal": "Only studies from Peru."}) + "\n")
    code = cli.main(["synthesize-merge", str(a), str(b), "--out", str(out), "--no-check"])
    err = capsys.readouterr().err
    assert code == 2 and f"{b}: field 'reversal': key 'seed-0000' has another accepted reversal in {a}" in err
    assert not out.exists()


def test_results_csv_missing_a_column(tmp_path, capsys):
    csv = tmp_path / "results.csv"
    csv.write_text("run_id,model,mode,rng_seed,dataset,value\nr,m,base,0,d,1.0\n")  # no 'metric'
    code = cli.main(["figures", "--results", str(csv), "--out", str(tmp_path / "figs")])
    err = capsys.readouterr().err
    assert code == 2 and str(csv) in err and "metric" in err
    assert not list((tmp_path / "figs").glob("*")) if (tmp_path / "figs").exists() else True


@pytest.mark.slow
def test_qrels_for_unknown_queries_are_excluded_and_named(tmp_path, capsys, caplog):
    data = synthetic_followir(3, 20, rng_seed=6)
    data.qrels_og["ghost-query"] = {next(iter(data.corpus)): 1}
    folder = write_followir(data, tmp_path / "fir")
    with caplog.at_level(logging.WARNING):
        code = cli.main(["evaluate", "--model", "minilm", "--followir", str(folder), "--json", "--no-cache"])
    res = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert code == 0 and res["p_mrr_n_queries"] == 3
    assert "ghost-query" in caplog.text and "qrels_og" in caplog.text


BEIR_ROWS = {  # (file, line appended, what the one line says): a traceback or a silent cut before
    "inf": ("qrels/test.tsv", "q1\td01\tinf", "field 'score': not a finite number: 'inf'"),
    "0.5": ("qrels/test.tsv", "q1\td01\t0.5", "field 'score': not a whole number: '0.5'"),
    "title 1998": ("corpus.jsonl", '{"_id": "d99", "title": 1998, "text": "x"}', "field 'title': must be"),
    "id twice": ("queries.jsonl", '{"_id": "q1", "text": "again"}', "field '_id': duplicate id 'q1'"),
}


@pytest.mark.parametrize("case", list(BEIR_ROWS))
def test_beir_folder_with_rows_no_reader_takes(tmp_path, capsys, case):
    name, line, says = BEIR_ROWS[case]
    data = synthetic_followir(2, 10, rng_seed=8)
    folder = write_beir(
        tmp_path / "beir",
        {d: v["text"] for d, v in data.corpus.items()},
        {q: v["text"] for q, v in data.queries.items()},
        data.qrels_og,
    )
    with open(folder / name, "a") as fh:
        fh.write(line + "\n")
    code = cli.main(
        ["evaluate", "--model", "minilm", "--beir", str(folder), "--bootstrap", "0", "--no-cache"]
    )
    err = capsys.readouterr().err
    last = err.strip().splitlines()[-1]  # the model's loading bar may come first
    assert code == 2 and "Traceback" not in err and says in last
    assert last.startswith(f"ifir evaluate: error: {folder / name}:")


def test_model_path_that_is_not_a_sentence_transformer(tmp_path, capsys):
    folder = tmp_path / "weights"
    folder.mkdir()
    (folder / "notes.txt").write_text("not a model")
    fir = write_followir(synthetic_followir(2, 10, rng_seed=7), tmp_path / "fir")
    code = cli.main(["evaluate", "--model", str(folder), "--followir", str(fir)])
    err = capsys.readouterr().err
    assert code == 2 and f"{folder}: not a SentenceTransformer folder" in err


class _HtmlHandler(http.server.BaseHTTPRequestHandler):
    """A web page where an API was expected (a wrong --base-url, a captive portal)."""

    def do_POST(self):  # noqa: N802
        body = b"<!doctype html><html><body><h1>Welcome to the router</h1></body></html>"
        self.send_response(200)
        self.send_header("Content-Type", "text/html; charset=utf-8")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


class _QuietServer(http.server.ThreadingHTTPServer):
    def handle_error(self, request, client_address):  # the client hanging up is expected here
        pass


def test_base_url_that_answers_html(tmp_path, capsys, monkeypatch):
    srv = _QuietServer(("127.0.0.1", 0), _HtmlHandler)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    monkeypatch.setenv("IFIR_CACHE", str(tmp_path / "cache"))
    seeds, out = tmp_path / "seeds.jsonl", tmp_path / "o.jsonl"
    seeds.write_text("\n".join(_lines(2)) + "\n")
    url = f"http://127.0.0.1:{srv.server_port}/"
    try:
        code = cli.main(
            ["synthesize", "--preset", "paper", "--seeds", str(seeds), "--out", str(out)]
            + ["--backend", "openai"]
            + ["--model", "m", "--base-url", url, "--no-progress"]
        )
    finally:
        srv.shutdown()
    err = capsys.readouterr().err
    assert code == 2 and "answered HTTP 200 with an HTML page, not the OpenAI chat API" in err
    assert [line for line in err.splitlines() if line.strip()] == [err.strip()]  # one line
    assert not out.exists() or not out.read_text().strip()


def _train(tmp_path, reversal_rows, *extra):
    """``ifir train`` (ins-dv) on 4 seeds and the given reversal rows; returns (code, err, out)."""
    seeds, revs, out = tmp_path / "seeds.jsonl", tmp_path / "rev.jsonl", tmp_path / "run"
    seeds.write_text("\n".join(_lines(4)) + "\n")
    revs.write_text("".join(json.dumps(r) + "\n" for r in reversal_rows))
    args = ["train", "--seeds", str(seeds), "--mode", "ins-dv", "--reversals", str(revs), "--out", str(out)]
    code = cli.main(args + ["--preset", "smoke", "--num-negatives", "2", "--report-to", "none", *extra])
    return code, revs, out


def _accepted(seed_id, **kw):
    return {
        "seed_id": seed_id,
        "status": "accepted",
        "reversal": "Focus on Spain.",
        "negative_index": 0,
        **kw,
    }


def test_curation_file_that_does_not_exist(tmp_path, capsys):
    """A typo in --curation would train the rejected reversals: it is an error naming the path."""
    missing = tmp_path / "curation.json"
    rows = [_accepted(f"seed-{i:04d}") for i in range(4)]
    code, _, out = _train(tmp_path, rows, "--curation", str(missing), "--dry-run")
    err = capsys.readouterr().err
    assert code == 2 and f"curation file {missing} does not exist" in err
    assert [line for line in err.splitlines() if line.strip()] == [err.strip()]  # one line


def test_reversals_from_another_seed_file(tmp_path, capsys):
    """No reversal names a seed: no model trained on 0 examples, an error saying why."""
    code, revs, out = _train(tmp_path, [_accepted(f"other-{i}") for i in range(4)], "--max-steps", "1")
    err = capsys.readouterr().err
    assert code == 2 and f"none of the 4 accepted reversals in {revs} names a seed" in err
    assert not out.exists()


def test_reversals_row_with_a_null_negative_index(tmp_path, capsys):
    rows = [_accepted(f"seed-{i:04d}") for i in range(4)]
    rows[1]["negative_index"] = None
    code, revs, _ = _train(tmp_path, rows, "--dry-run")
    assert (
        code == 2 and f"{revs}:2: field 'negative_index': must be a whole number" in capsys.readouterr().err
    )


def test_out_that_is_a_file(tmp_path, capsys):
    """A file where a folder is needed: one line naming it, no traceback, the file untouched."""
    out = tmp_path / "notes.txt"
    out.write_text("keep me")
    for argv in (["train", "--preset", "smoke"], ["experiment", "--preset", "smoke", "--print-runs"]):
        assert cli.main([*argv, "--out", str(out)]) == 2
        err = capsys.readouterr().err
        assert f"{out}: a file, where a folder is needed" in err and "Traceback" not in err
        assert len(err.strip().splitlines()) == 1 and out.read_text() == "keep me"


def test_every_case_is_tried():
    tested = [n for n in globals() if n.startswith("test_") and n != "test_every_case_is_tried"]
    assert len(tested) == len(CASES) == 18
