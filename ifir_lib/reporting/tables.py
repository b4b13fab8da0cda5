"""Paper-style results tables (arXiv 2604.18845, Tables 1 and 2) as LaTeX, Markdown or CSV.

One row per training mode within each backbone, one column per benchmark, in the paper's order:
FollowIR p-MRR and Score, InfoSearch Length and Keyword p-MRR, MAIR IFEval and InstructIR
nDCG@10; then this project's bundled evaluation sets (v1, v2: p-MRR and MAP@1000). ``COLUMNS``
is the one place that maps a results row (``dataset``, ``metric``) to a column; names match
ignoring case and punctuation, so ``MAIR-IFEval``/``mair_ifeval`` and ``p-MRR``/``p_mrr`` agree.

Rules, each visible in the output:
- the rows are read as every reading path reads them (``results.runs_to_read``): one evaluation
  per run and set, the latest; a warning when they mix evaluation conditions (``prompts``,
  ``plan``, ``backend``); a ``DataError`` for a run id shared by two runs (or holding two values
  for one set and metric) or a set name shared by two sets;
- a cell is the mean over the runs of that backbone and mode (a run is one trained model and
  ``rng_seed``); a ``runs`` column appears when any row averages more than one run; a cell that
  averages fewer runs than its row counts (the others have no value there) is marked ``†`` with
  a note under the table ("mean of 1 of 3 runs"; in CSV a ``<column>_runs`` column);
- an empty (NaN) value is left out of its cell, named in one warning; a table without any value
  is a ``DataError``;
- a column that no row has is left out; a missing cell is ``--``;
- ``published=True`` adds the paper's numbers (``data/published_results.csv``) as their own
  blocks, one per backbone, below ours;
- the best value of each column within each block (all metrics are higher-is-better) is bold
  in LaTeX and Markdown (ties all bold; a block needs two values in the column); CSV is plain.
Numbers are rounded to ``decimals`` (2, as the paper prints them).

``markdown_table`` (a DataFrame -> GitHub Markdown) is the package's one Markdown table writer:
``to_markdown`` and the experiment's ``summary.md`` both go through it.

Not handled here: computing metrics (``evaluate``), reading and validating the results file
(``results``), significance marks (``stats``).
"""

from __future__ import annotations

import logging
import re
from collections.abc import Collection
from dataclasses import dataclass, field

import pandas as pd

from ..core.errors import DataError
from ..evaluation.corpora import FOLLOWIR_TASKS
from .results import frame_path, load_published, mode_order, runs_to_read, warn_if_fractions
from .style import mode_label
from .summaries import labelled_backbones

# column key (= the metric names of data/published_results.csv) -> (group, label, datasets, metric)
COLUMNS: dict[str, tuple[str, str, tuple[str, ...], str]] = {
    "followir_p_mrr": ("FollowIR", "p-MRR", ("followir",), "p_mrr"),
    "followir_score": ("FollowIR", "Score", ("followir",), "score"),
    "infosearch_length_p_mrr": ("InfoSearch", "Length p-MRR", ("InfoSearchLength",), "p_mrr"),
    "infosearch_keyword_p_mrr": ("InfoSearch", "Keyword p-MRR", ("InfoSearchKeyword",), "p_mrr"),
    "mair_ifeval_ndcg_at_10": ("MAIR", "IFEval nDCG@10", ("MAIR-IFEval",), "ndcg_at_10"),
    "mair_instructir_ndcg_at_10": ("MAIR", "InstructIR nDCG@10", ("MAIR-InstructIR",), "ndcg_at_10"),
    "v1_p_mrr": ("Bundled v1", "p-MRR", ("followir_mini",), "p_mrr"),
    "v1_map_at_1000": ("Bundled v1", "MAP@1000", ("followir_mini",), "map_at_1000"),
    "v2_p_mrr": ("Bundled v2", "p-MRR", ("followir_v2",), "p_mrr"),
    "v2_map_at_1000": ("Bundled v2", "MAP@1000", ("followir_v2",), "map_at_1000"),
}
FORMATS = ("latex", "markdown", "csv")
PARTIAL = "†"  # marks a cell that averages fewer runs than its row's ``runs``
log = logging.getLogger(__name__)


def norm_name(name) -> str:
    """``'MAIR-IFEval' -> 'mairifeval'``, ``'p-MRR' -> 'pmrr'``: case and punctuation blind."""
    return re.sub(r"[^a-z0-9]", "", str(name).lower())


_LOOKUP = {(norm_name(d), norm_name(m)): key for key, (_, _, ds, m) in COLUMNS.items() for d in ds}


def column_of(dataset: str, metric: str) -> str | None:
    """``column_of('MAIR-IFEval', 'ndcg_at_10') -> 'mair_ifeval_ndcg_at_10'``; None if not a column."""
    return _LOOKUP.get((norm_name(dataset), norm_name(metric)))


@dataclass
class Row:
    block: str  # e.g. "ours: all-MiniLM-L6-v2" or "paper (Table 1): gte-multilingual-mlm-base"
    mode: str
    values: dict[str, float]  # column key -> value (x100)
    runs: int | None = 1  # None: published numbers (the paper reports no runs or seeds)
    cell_runs: dict[str, int] = field(default_factory=dict)  # column key -> runs its value averages


@dataclass
class Table:
    columns: list[str]  # keys of COLUMNS, in order, only those some row has
    rows: list[Row]
    decimals: int = 2
    best: set = field(default_factory=set)  # (row index, column key) of each block's best values

    @property
    def show_runs(self) -> bool:
        return any((r.runs or 0) > 1 for r in self.rows)

    def cell(self, i: int, key: str) -> str | None:
        v = self.rows[i].values.get(key)
        if v is None:
            return None
        return fixed(v, self.decimals)

    def partial(self, i: int, key: str) -> bool:
        """Whether cell ``(i, key)`` averages fewer runs than row ``i`` counts."""
        r = self.rows[i]
        return r.runs is not None and key in r.values and r.cell_runs.get(key, r.runs) < r.runs

    def notes(self) -> list[str]:
        """One line per partial cell: ``'Ins-DV (ours: m), Bundled v2 p-MRR: mean of 1 of 3 runs'``."""
        return [
            f"{mode_label(r.mode)} ({r.block}), {COLUMNS[k][0]} {COLUMNS[k][1]}: mean of "
            f"{r.cell_runs[k]} of {r.runs} runs (no value from the others)"
            for i, r in enumerate(self.rows)
            for k in self.columns
            if self.partial(i, k)
        ]


def _check_one_set_per_column(df: pd.DataFrame, source: str) -> None:
    """A ``DataError`` when one column would average sets of two names (``column_of`` is blind to
    case and punctuation: a changed copy of bundled set v1 in ``FollowIR-Mini/`` was averaged
    with ``followir_mini`` into one "Bundled v1" cell). Two names are one set only when every row
    records the same content digest (``data_sha``)."""
    sha = df["data_sha"].fillna("").astype(str) if "data_sha" in df.columns else pd.Series("", index=df.index)
    for column, g in df.assign(_sha=sha).groupby("column", sort=False):
        names = list(dict.fromkeys(g["dataset"].astype(str)))
        shas = set(g["_sha"])
        if len(names) > 1 and (len(shas) > 1 or "" in shas):
            title, metric = COLUMNS[column][:2]
            raise DataError(
                source,
                None,
                f"the table's {title} {metric} column would average sets named {', '.join(map(repr, names))}, "
                "which are not known to be one set (their data_sha differ or are unknown); evaluate each "
                "set under one folder name, or leave the rows of the others out",
            )


def _read(results: pd.DataFrame, runs_dir, source: str) -> pd.DataFrame:
    """The rows of ``results`` that map to a column, with ``backbone`` (in words) and ``column``,
    read as every reading path reads them (``results.runs_to_read``). Sets with no column and
    empty values are named in one warning each; no row mapping to a column, or none with a value,
    is a ``DataError``."""
    df = labelled_backbones(results, runs_dir)  # 'minilm' and the packaged folder: one block
    df = df.assign(column=[column_of(d, m) for d, m in zip(df["dataset"], df["metric"])])
    if not df["column"].notna().any():
        have = sorted({f"{d}/{m}" for d, m in zip(results["dataset"], results["metric"])})
        raise DataError(
            source, None, f"no row maps to a table column (tables.COLUMNS); it has {', '.join(have[:12])}"
        )
    mapped = set(df.loc[df["column"].notna(), "dataset"].astype(str))
    if "followir" in mapped:  # the aggregate's column stands for its three collections
        mapped |= set(FOLLOWIR_TASKS)
    if other := sorted(set(df["dataset"].astype(str)) - mapped):
        log.warning(
            "%d set(s) of %s have no column in the paper's table and are left out of it: %s (ifir compare "
            "and ifir figures read every set)",
            len(other),
            source,
            ", ".join(other[:6]) + (", ..." if len(other) > 6 else ""),
        )
    df = runs_to_read(df[df["column"].notna()], source, whole=df)
    _check_one_set_per_column(df, source)
    warn_if_fractions(df, source)
    empty = df[df["value"].isna()]
    if len(empty):
        log.warning(
            "%d empty (NaN) value(s) left out of their table cells: %s",
            len(empty),
            "; ".join(f"{r.model} ({r.mode}) {r.dataset}/{r.metric}" for r in empty.head(8).itertuples())
            + ("; ..." if len(empty) > 8 else ""),
        )
    if len(empty) == len(df):
        raise DataError(
            source, None, "every value that maps to a table column is empty (NaN): nothing to show"
        )
    return df


def _our_rows(df: pd.DataFrame) -> list[Row]:
    """One row per backbone and mode: each cell the mean over runs of each run's value there."""
    rows = []
    for backbone in sorted(df["backbone"].astype(str).unique()):
        part = df[df["backbone"].astype(str) == backbone]
        for mode in mode_order(part["mode"].unique()):
            m = part[(part["mode"] == mode) & part["value"].notna()]
            # a run is one trained model (and rng_seed); its datasets may carry separate run_ids
            run = [m["model"].astype(str), m["rng_seed"].astype(str)]
            by_run = m.groupby([m["column"], *run], sort=False)["value"].mean()
            cells = by_run.groupby(level=0, sort=False)
            runs = len(set(zip(*run)))
            rows.append(Row(f"ours: {backbone}", mode, cells.mean().to_dict(), runs, cells.size().to_dict()))
    return rows


def _published_rows() -> list[Row]:
    rows = []
    pub = load_published()
    for backbone in pub["backbone"].unique():
        part = pub[pub["backbone"] == backbone]
        where = ", ".join(sorted({str(s).split(", ")[-1] for s in part["source"]}))
        block = f"paper ({where}): {backbone}"
        for mode in mode_order(part["mode"].unique()):
            m = part[part["mode"] == mode]
            rows.append(Row(block, mode, dict(zip(m["metric"], m["value"].astype(float))), None))
    return rows


def build_table(
    results: pd.DataFrame,
    *,
    published: bool = False,
    runs_dir=None,
    decimals: int = 2,
    source: str = "<results>",
) -> Table:
    """The table's rows and columns from a tidy results DataFrame (``results.load_results``).

    Example: rows ``(minilm, ins-dv, followir, p_mrr, 7.5)`` and ``(..., 8.5)`` of two runs ->
    one row ``Ins-DV`` with ``followir_p_mrr = 8.0`` and ``runs = 2``, in block ``'ours:
    all-MiniLM-L6-v2'`` (``style.backbone_label``); were the second value empty, the cell would
    be 7.5 with ``cell_runs`` 1 (marked when rendered). Raises ``DataError`` (naming ``source``,
    else the frame's ``attrs['path']``) when no row of ``results`` maps to a column, or none has
    a value, or ``results.runs_to_read`` refuses the rows.
    """
    source = frame_path(results) if source == "<results>" else source
    rows = _our_rows(_read(results, runs_dir, source))
    if published:
        rows += _published_rows()
    columns = [k for k in COLUMNS if any(k in r.values for r in rows)]
    table = Table(columns, rows, decimals)
    for block in dict.fromkeys(r.block for r in rows):
        idx = [i for i, r in enumerate(rows) if r.block == block]
        for k in columns:
            shown = {i: round(rows[i].values[k], decimals) for i in idx if k in rows[i].values}
            if len(shown) >= 2:
                top = max(shown.values())
                table.best |= {(i, k) for i, v in shown.items() if v == top}
    return table


# ---- rendering ---------------------------------------------------------------------------------
def fixed(value: float, decimals: int = 2, sign: str = "") -> str:
    """``value`` with ``decimals`` decimals, a rounded zero without its minus (``-0.004`` ->
    ``'0.00'``, never ``'-0.00'``); ``sign='+'`` prints ``'+1.50'``. The one number format of
    every table writer (Markdown, LaTeX, ``ifir compare``, ``summary.md``)."""
    text = f"{value:{sign}.{decimals}f}"
    return text.replace("-", "", 1) if float(text) == 0 else text


_TEX_SPECIAL = {c: "\\" + c for c in "&%$#_{}"}
_TEX_SPECIAL.update({"~": r"\textasciitilde{}", "^": r"\textasciicircum{}", "\\": r"\textbackslash{}"})
_TEX_SPECIAL.update({"|": r"\textbar{}", "\n": " "})  # '|' printed as an em dash in OT1


def tex_escape(text: str) -> str:
    r"""``tex_escape('followir_v2 & 50%') -> 'followir\_v2 \& 50\%'``."""
    return "".join(_TEX_SPECIAL.get(c, c) for c in str(text))


def _runs(row: Row) -> str:
    return "" if row.runs is None else str(row.runs)


def _blocks(table: Table) -> list[tuple[str, list[int]]]:
    order = list(dict.fromkeys(r.block for r in table.rows))
    return [(b, [i for i, r in enumerate(table.rows) if r.block == b]) for b in order]


def to_latex(table: Table, caption: str = "", label: str = "tab:results") -> str:
    """A booktabs ``table`` that compiles as is (needs ``\\usepackage{booktabs}``); a cell that
    averages fewer runs than its row is marked with a dagger, named in a note under the tabular."""
    cols = table.columns
    lead = ["Data"] + (["Runs"] if table.show_runs else [])
    ncol = len(lead) + len(cols)
    groups: list[tuple[str, int]] = []  # consecutive columns of one benchmark share a heading
    for k in cols:
        g = COLUMNS[k][0]
        groups = (
            groups[:-1] + [(g, groups[-1][1] + 1)] if groups and groups[-1][0] == g else [*groups, (g, 1)]
        )
    head1, rules, start = [""] * len(lead), [], len(lead) + 1
    for g, n in groups:
        head1.append(rf"\multicolumn{{{n}}}{{c}}{{{tex_escape(g)}}}")
        rules.append(rf"\cmidrule(lr){{{start}-{start + n - 1}}}")
        start += n
    head2 = lead + [tex_escape(COLUMNS[k][1]) for k in cols]
    out = [
        "% needs \\usepackage{booktabs} in the preamble",
        r"\begin{table}[t]",
        r"\centering",
        r"\small",
        r"\begin{tabular}{l" + "r" * (ncol - 1) + "}",
        r"\toprule",
        " & ".join(head1) + r" \\",
        " ".join(rules),
        " & ".join(head2) + r" \\",
    ]
    for block, idx in _blocks(table):
        out += [r"\midrule", rf"\multicolumn{{{ncol}}}{{l}}{{\textit{{{tex_escape(block)}}}}} \\"]
        for i in idx:
            r = table.rows[i]
            cells = [tex_escape(mode_label(r.mode))] + ([_runs(r)] if table.show_runs else [])
            for k in cols:
                s = table.cell(i, k)
                s = "--" if s is None else s.replace("-", "$-$", 1) if s.startswith("-") else s
                s = rf"\textbf{{{s}}}" if (i, k) in table.best else s
                cells.append(s + r"$^{\dagger}$" if table.partial(i, k) else s)
            out.append(" & ".join(cells) + r" \\")
    out += [r"\bottomrule", r"\end{tabular}"]
    out += [rf"{{\footnotesize $^{{\dagger}}${tex_escape(n)}.\par}}" for n in table.notes()]
    if caption:
        out.append(rf"\caption{{{tex_escape(caption)}}}")
    out += [rf"\label{{{label}}}", r"\end{table}"]
    return "\n".join(out) + "\n"


def markdown_table(frame: pd.DataFrame, right: Collection[str] = ()) -> str:
    """A GitHub Markdown table of ``frame``, one line per row, without a trailing newline; the one
    Markdown writer (``to_markdown``, the experiment's ``summary.md``).

    Floats get 2 decimals (``fixed``), those of a p-value column (``p_...``, ``min_p``) 4; other
    values are ``str``; a ``|`` inside a cell is escaped and a line break becomes a space (it split
    the row; ``**bold**`` made by ``to_markdown`` is kept). Columns named in ``right`` are
    right-aligned (``---:``), the rest keep the default (``---``). Example: columns ``versus, diff, p_value`` and a row
    ``(all-dv, 2.0, 0.01)`` -> ``| all-dv | 2.00 | 0.0100 |`` under ``|---|---|---|``.
    """

    def cell(col: str, v) -> str:
        if isinstance(v, float):
            v = fixed(v, 4 if col.startswith(("p_", "min_p")) else 2)  # 1/21 printed "0.05"
        return re.sub(r"\s*[\r\n]+\s*", " ", str(v)).replace("|", r"\|")

    columns = [str(c) for c in frame.columns]
    head = "| " + " | ".join(cell(c, c) for c in columns) + " |"
    rule = "|" + "|".join("---:" if c in right else "---" for c in columns) + "|"
    body = [
        "| " + " | ".join(cell(c, v) for c, v in zip(columns, row)) + " |"
        for row in frame.itertuples(index=False)
    ]
    return "\n".join([head, rule, *body])


def to_markdown(table: Table) -> str:
    """A GitHub Markdown table; a block's name heads its first row, best values in bold, a cell
    that averages fewer runs than its row marked ``†`` and named in a note under the table."""
    cols = table.columns
    head = (
        ["block", "data"]
        + (["runs"] if table.show_runs else [])
        + [f"{COLUMNS[k][0]} {COLUMNS[k][1]}" for k in cols]
    )
    rows = []
    for block, idx in _blocks(table):
        for n, i in enumerate(idx):
            r = table.rows[i]
            cells = [block if n == 0 else "", mode_label(r.mode)] + ([_runs(r)] if table.show_runs else [])
            for k in cols:
                s = table.cell(i, k) or "--"
                s = f"**{s}**" if (i, k) in table.best else s
                cells.append(s + PARTIAL if table.partial(i, k) else s)
            rows.append(cells)
    notes = [f"{PARTIAL} {n}." for n in table.notes()]  # under the table, after a blank line
    text = markdown_table(pd.DataFrame(rows, columns=head, dtype=object), right=head[2:]) + "\n"
    return text + ("\n" + "\n".join(notes) + "\n" if notes else "")


def to_csv(table: Table) -> str:
    """``block, mode, runs, <column keys...>``: rounded values, empty when missing, nothing marked;
    a column with a cell that averages fewer runs than its row (``Table.partial``) is followed by
    ``<key>_runs``, the runs each of its cells averages."""
    partial = {k for k in table.columns for i in range(len(table.rows)) if table.partial(i, k)}
    columns = [c for k in table.columns for c in ([k, f"{k}_runs"] if k in partial else [k])]
    frame = pd.DataFrame(
        [
            {
                "block": r.block,
                "mode": r.mode,
                "runs": _runs(r),
                **{k: table.cell(i, k) or "" for k in table.columns},
                **{f"{k}_runs": r.cell_runs.get(k, "") for k in partial},
            }
            for i, r in enumerate(table.rows)
        ],
        columns=["block", "mode", "runs", *columns],
    )
    return frame.to_csv(index=False, lineterminator="\n")


def render(table: Table, fmt: str = "markdown", caption: str = "") -> str:
    """``fmt`` in ``FORMATS``."""
    if fmt == "latex":
        return to_latex(table, caption)
    if fmt == "markdown":
        return to_markdown(table)
    if fmt == "csv":
        return to_csv(table)
    raise ValueError(f"unknown format {fmt!r}; choose from {', '.join(FORMATS)}")
