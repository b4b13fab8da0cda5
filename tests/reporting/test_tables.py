"""Paper-style tables: column order, one row per mode, booktabs rules, best marks, and every number
traced to the results file (or to the published numbers when asked)."""

import io
import re

import pandas as pd
import pytest

from ifir_lib.cli import main
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
    ("ins-dv", 1, "MAIR-IFEval", "ndcg_at_10", 36.1349),
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
    lines = [ln.strip() for ln in md.strip().splitlines()]
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
        assert [c.strip("*") for c in cells] == EXPECTED[r[1]]
        bold = {(r[1], h) for h, c in zip(HEADERS, cells) if c.startswith("**")}
        assert bold == {b for b in BEST if b[0] == r[1]}


def test_every_number_comes_from_the_results(results_csv):
    table = build_table(load_results(results_csv))
    wanted = sorted(float(v) for vals in EXPECTED.values() for v in vals if v != "--")
    md_cells = [c.strip("*") for r in _md_rows(to_markdown(table))[1] for c in r[3:]]
    assert sorted(float(c) for c in md_cells if c != "--") == wanted
    csv = pd.read_csv(io.StringIO(to_csv(table)))
    keys = ["followir_p_mrr", "followir_score", "infosearch_length_p_mrr", "mair_ifeval_ndcg_at_10"]
    assert list(csv.columns) == ["block", "mode", "runs", *keys, "v1_p_mrr", "v1_map_at_1000"]
    assert sorted(csv.iloc[:, 3:].stack().dropna().tolist()) == pytest.approx(wanted)
    assert "55.56" not in to_markdown(table) + to_latex(table) + to_csv(table)


def _latex_body(tex: str) -> list[list[str]]:
    """Data rows (between the header's \\midrule and \\bottomrule, block headings excluded) as cells."""
    lines = tex.splitlines()
    body = lines[lines.index(r"\midrule") : lines.index(r"\bottomrule")]
    rows = [ln for ln in body if ln.endswith(r"\\") and not ln.startswith(r"\multicolumn")]
    return [[c.strip() for c in ln[: -len(r"\\")].split("&")] for ln in rows]


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
        cells = [re.sub(r"\\textbf\{(.*)\}", r"\1", c).replace("$-$", "-") for c in r[2:]]
        assert cells == EXPECTED[r[0]]
        bold = {(r[0], h) for h, c in zip(HEADERS, r[2:]) if c.startswith(r"\textbf")}
        assert bold == {b for b in BEST if b[0] == r[0]}
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
    numbers = [
        float(c)
        for r in body
        for c in (re.sub(r"\\textbf\{(.*)\}", r"\1", x).replace("$-$", "-") for x in r[2:])
        if c != "--"
    ]
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
