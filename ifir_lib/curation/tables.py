"""The explorer's pure parts, unit-tested without a browser.

- ``build_examples(seeds, rows=None)`` joins seeds with synthesis rows into one DataFrame, one
  example per row (or, with seeds alone, one per seed showing its ``reference_reversal``);
- ``readable_table(df, columns, n)`` a notebook table with whole, wrapped texts and plain numbers;
- ``filter_examples(df, ...)`` by instruction type, backend, status, verification, decision, text;
- ``word_diff_html(a, b)`` marks the words the reversal removed (``<del>``) and added (``<ins>``);
- ``view_scores(model, ...)`` cosine scores of P+ and N* under both instructions, and the flip;
- ``render_example`` the HTML card of one example.

Not handled here: the widgets (``widgets``), the curation file (``decisions``).
"""

from __future__ import annotations

import difflib
import html

import pandas as pd

from ..core.models import encode, format_query
from ..seeds.schema import seed_fingerprint
from .decisions import decision_for

ALL = "(all)"
VERIFY_CHOICES = (ALL, "passed", "failed", "unverified")
DECISION_CHOICES = (ALL, "undecided", "accept", "reject")
COLUMNS = (
    "key",
    "seed_id",
    "query",
    "instruction",
    "reversal",
    "instruction_type",
    "domain",
    "backend",
    "model",
    "status",
    "reason",
    "reasoning",
    "negative_index",
    "positive_id",
    "positive",
    "negative_id",
    "negative",
    "reference_reversal",
    "narrative",
    "reversal_narrative",
    "verify_flip",
    "verify_judge",
)


# ---------------------------------------------------------------------------------------------
# The example table


def reference_row(seed: dict) -> dict:
    """A seed's bundled reference reversal as a synthesis row (backend ``reference``, accepted,
    with the ``seed_sha`` a synthesis row of this seed and negative carries)."""
    k = int(seed.get("reference_negative_index") or 0)
    return {
        "key": seed["id"],
        "seed_id": seed["id"],
        "negative_index": k,
        "seed_sha": seed_fingerprint(seed, k),
        "backend": "reference",
        "model": None,
        "status": "accepted",
        "reason": None,
        "reversal": seed["reference_reversal"],
        "reasoning": None,
    }


def build_examples(seeds: list[dict], rows: list[dict] | None = None) -> pd.DataFrame:
    """One row per example with the texts a curator needs (columns ``COLUMNS``).

    With ``rows`` (synthesis output) every row becomes an example joined to its seed; N* is the
    seed's ``instruction_negatives[negative_index]``. Without rows, each seed with a
    ``reference_reversal`` is an example (key = seed id, backend ``reference``, status
    ``accepted``, N* = the negative the seed's ``reference_negative_index`` names, as
    ``trainsets.reversals_from_reference`` uses).
    A row naming an unknown seed or negative raises ``ValueError``.
    """
    by_id = {s["id"]: s for s in seeds}
    out = []
    if rows is None:
        rows = [reference_row(s) for s in seeds if s.get("reference_reversal")]
    for r in rows:
        seed = by_id.get(r.get("seed_id"))
        if seed is None:
            raise ValueError(
                f"synthesis row {r.get('key')!r} names seed {r.get('seed_id')!r}, not among the {len(seeds)} seeds given"
            )
        j = int(r.get("negative_index") or 0)
        negs = seed["instruction_negatives"]
        if not 0 <= j < len(negs):
            raise ValueError(
                f"synthesis row {r.get('key')!r} names instruction negative {j}; seed {seed['id']} has {len(negs)}"
            )
        out.append(
            {
                "key": str(r.get("key") or (seed["id"] if j == 0 else f"{seed['id']}#{j}")),
                "seed_id": seed["id"],
                "query": seed["query"],
                "instruction": seed["instruction"],
                "reversal": r.get("reversal"),
                "instruction_type": r.get("instruction_type") or seed.get("instruction_type"),
                "domain": seed.get("domain"),
                "backend": r.get("backend") or "unknown",
                "model": r.get("model"),
                "status": r.get("status") or "unknown",
                "reason": r.get("reason"),
                "reasoning": r.get("reasoning"),
                "negative_index": j,
                "positive_id": seed["positive"]["id"],
                "positive": seed["positive"]["text"],
                "negative_id": negs[j]["id"],
                "negative": negs[j]["text"],
                "reference_reversal": seed.get("reference_reversal"),
                "narrative": seed.get("narrative"),
                "reversal_narrative": seed.get("reversal_narrative"),
                "verify_flip": r.get("verify_flip"),
                "verify_judge": r.get("verify_judge"),
            }
        )
    # object dtype: verify columns hold True/False/None, and pandas would turn None into NaN
    return pd.DataFrame(out, columns=list(COLUMNS), dtype=object)


def _readable(v) -> str:
    """``2246.0 -> '2,246'``, ``0.3371 -> '0.34'``, ``None -> '—'``, text unchanged."""
    if v is None or (isinstance(v, float) and v != v):
        return "—"
    if isinstance(v, (int, float)) and not isinstance(v, bool):
        return f"{v:,.0f}" if float(v).is_integer() else f"{v:,.2f}"
    return str(v)


def readable_table(
    df: pd.DataFrame, columns: list[str] | None = None, n: int | None = None, width_em: int = 28
):
    """A table for a notebook reader: long texts whole and wrapped in columns ``width_em`` wide
    (pandas would cut each cell to 50 characters), numbers as ``2,246`` or ``0.34`` (not
    ``2.246000e+03``), missing values as a dash.

    Keeps ``columns`` (default: all) and the first ``n`` rows; returns a pandas ``Styler`` (HTML).
    Example: ``readable_table(examples, ["key", "instruction", "reversal"], n=5)``.
    """
    view = df[list(columns)] if columns is not None else df
    view = view.head(n) if n is not None else view
    styler = (
        view.style.format(_readable)
        .set_properties(**{"white-space": "normal", "text-align": "left", "vertical-align": "top"})
        .set_table_styles([{"selector": "td, th", "props": f"max-width: {width_em}em; text-align: left;"}])
    )
    # a row number says nothing; a named index (modes, quantities) stays
    return styler.hide(axis="index") if isinstance(view.index, pd.RangeIndex) else styler


def filter_examples(
    df: pd.DataFrame,
    instruction_type: str | None = None,
    backend: str | None = None,
    status: str | None = None,
    verify: str | None = None,
    search: str | None = None,
    decision: str | None = None,
    decisions=None,
) -> pd.DataFrame:
    """The examples matching every given filter (``None`` or ``"(all)"`` = no filter).

    ``verify``: ``passed`` (verify_flip true), ``failed`` (false), ``unverified`` (missing).
    ``search``: case-insensitive substring of the key, query, instructions or passages.
    ``decision``: ``undecided``, ``accept`` or ``reject``: what ``decisions`` (``curation.Decisions``
    or a plain ``{key: decision}``) holds about each row's key and reversal text (``decision_for``).
    """
    m = pd.Series(True, index=df.index)
    if instruction_type not in (None, ALL):
        m &= df["instruction_type"] == instruction_type
    if backend not in (None, ALL):
        m &= df["backend"] == backend
    if status not in (None, ALL):
        m &= df["status"] == status
    if verify not in (None, ALL):
        if verify not in VERIFY_CHOICES:
            raise ValueError(f"verify must be one of {VERIFY_CHOICES}")
        m &= df["verify_flip"].map(verify_state) == verify
    if decision not in (None, ALL):
        decisions = decisions or {}
        got = pd.Series(
            [decision_for(decisions, k, r) or "undecided" for k, r in zip(df["key"], df["reversal"])],
            index=df.index,
            dtype=object,
        )
        m &= got == decision
    if search and search.strip():
        needle = search.strip().lower()
        text = (
            df[["key", "query", "instruction", "reversal", "positive", "negative"]]
            .fillna("")
            .astype(str)
            .agg(" ".join, axis=1)
        )
        m &= text.str.lower().str.contains(needle, regex=False)
    return df[m]


def _isnan(v) -> bool:
    return isinstance(v, float) and v != v


def verify_state(flip) -> str:
    """``True -> 'passed'``, ``False -> 'failed'``, ``None``/NaN -> ``'unverified'``."""
    if flip is None or _isnan(flip):
        return "unverified"
    return "passed" if bool(flip) else "failed"


def choices(df: pd.DataFrame, column: str) -> list[str]:
    """``["(all)", ...sorted distinct values]`` for a filter dropdown."""
    return [ALL] + sorted({str(v) for v in df[column].dropna()})


# ---------------------------------------------------------------------------------------------
# Rendering helpers

_DEL = '<del style="background:#fbd5d5;color:#8a1c1c">'
_INS = '<ins style="background:#d4f0dc;color:#14532d;text-decoration:none">'


def word_diff_html(a: str, b: str) -> tuple[str, str]:
    """HTML for ``a`` with removed words in ``<del>`` and ``b`` with added words in ``<ins>``.

    ``word_diff_html("Only UK sources.", "Only US sources.")`` ->
    ``('Only <del ...>UK</del> sources.', 'Only <ins ...>US</ins> sources.')``. Text is escaped.
    """
    wa, wb = (a or "").split(), (b or "").split()
    out_a, out_b = [], []
    for op, i1, i2, j1, j2 in difflib.SequenceMatcher(a=wa, b=wb, autojunk=False).get_opcodes():
        ta, tb = html.escape(" ".join(wa[i1:i2])), html.escape(" ".join(wb[j1:j2]))
        if op == "equal":
            out_a.append(ta)
            out_b.append(tb)
            continue
        if ta:
            out_a.append(f"{_DEL}{ta}</del>")
        if tb:
            out_b.append(f"{_INS}{tb}</ins>")
    return " ".join(out_a), " ".join(out_b)


def view_scores(model, query: str, instruction: str, reversal: str, positive: str, negative: str) -> dict:
    """Cosine scores of P+ and N* under both instructions, and whether the model already flips.

    Returns ``{"orig": {"pos", "neg"}, "rev": {"pos", "neg"}, "flips": bool}``; ``flips`` means
    P+ > N* under ``query + instruction`` and N* > P+ under ``query + reversal`` (the same test
    as ``verify.flip_margins``). Example: orig (.8, .5), rev (.6, .7) -> flips True.
    """
    q = encode(model, [format_query(query, instruction), format_query(query, reversal)], "query")  # (2, dim)
    d = encode(model, [positive, negative], "document")  # (2, dim)
    s = q @ d.T  # (2 views, 2 docs), cosine: both sides are L2-normalised
    out = {
        "orig": {"pos": float(s[0, 0]), "neg": float(s[0, 1])},
        "rev": {"pos": float(s[1, 0]), "neg": float(s[1, 1])},
    }
    out["flips"] = out["orig"]["pos"] > out["orig"]["neg"] and out["rev"]["neg"] > out["rev"]["pos"]
    return out


def _esc(text) -> str:
    return html.escape("" if text is None or _isnan(text) else str(text))


def _has_text(v) -> bool:
    """A string with more than whitespace (``None``, NaN and ``"  "`` are not)."""
    return isinstance(v, str) and bool(v.strip())


_OK = '<span style="color:#14532d;font-weight:bold">relevant</span>'
_NO = '<span style="color:#8a1c1c">not relevant</span>'
_TD = "<td style='vertical-align:top;padding:4px;border:1px solid #ddd'>"


def _meta_html(ex: dict) -> str:
    """The card's grey first line: ``key: <b>s0</b> · instruction_type: ...`` for the fields set."""
    meta = " · ".join(
        f"{k}: <b>{_esc(ex.get(k))}</b>"
        for k in ("key", "instruction_type", "backend", "model", "status")
        if ex.get(k) is not None
    )
    for k in ("verify_flip", "verify_judge"):
        if ex.get(k) is not None and not _isnan(ex.get(k)):
            meta += f" · {k}: <b>{_esc(ex.get(k))}</b>"
    return meta


def _instructions_html(ex: dict) -> tuple[str, str]:
    """I and I' as HTML: the word diff when there is a reversal, else I and why there is none."""
    rev = ex.get("reversal")
    if _has_text(rev):
        return word_diff_html(ex["instruction"], rev)
    why = f"{_esc(ex.get('status'))}: {_esc(ex.get('reason')) or 'no reason given'}"
    return _esc(ex["instruction"]), f'<i style="color:#666">no reversal ({why})</i>'


def _passage_cell(ex: dict, which: str, scores: dict | None) -> str:
    """P+ (``which='pos'``) or N* (``'neg'``): the text, then its label (and score) under I and I'."""
    pos = which == "pos"
    label_o, label_r = (_OK, _NO) if pos else (_NO, _OK)
    if not _has_text(ex.get("reversal")):
        under_rev = "under I': -"
    else:
        under_rev = f"under I': {label_r}" + (f" · score {scores['rev'][which]:.3f}" if scores else "")
    return "".join(
        [
            f"<div style='white-space:pre-wrap'>{_esc(ex['positive' if pos else 'negative'])}</div>",
            "<hr style='margin:4px 0'>",
            f"under I: {label_o}" + (f" · score {scores['orig'][which]:.3f}" if scores else ""),
            "<br>" + under_rev,
        ]
    )


def _passages_html(ex: dict, scores: dict | None) -> str:
    """P+ and N* side by side, in a two-column table headed by their ids."""
    head = "<th style='width:50%;text-align:left'>P+ ({}) </th><th style='text-align:left'>N* ({}, negative {})</th>".format(
        _esc(ex["positive_id"]), _esc(ex["negative_id"]), _esc(ex["negative_index"])
    )
    return (
        "<table style='width:100%;border-collapse:collapse;table-layout:fixed'>"
        f"<tr>{head}</tr><tr>{_TD}{_passage_cell(ex, 'pos', scores)}</td>"
        f"{_TD}{_passage_cell(ex, 'neg', scores)}</td></tr></table>"
    )


def _flip_html(scores: dict) -> str:
    """Whether the model flips: P+ over N* under I, and N* over P+ under I'."""
    o, r = scores["orig"], scores["rev"]
    return (
        f"<p><b>Model flips:</b> {'yes' if scores['flips'] else 'no'} "
        f"(I: P+ {'>' if o['pos'] > o['neg'] else '<='} N*; "
        f"I': N* {'>' if r['neg'] > r['pos'] else '<='} P+)</p>"
    )


def render_example(
    ex: dict,
    scores: dict | None = None,
    decision: str | None = None,
    comments: list[str] | None = None,
    score_note: str | None = None,
) -> str:
    """The HTML of one example: query, instruction diff, P+ and N* side by side with labels.

    ``scores`` (``view_scores``) adds each passage's score and whether the model flips;
    without them ``score_note`` says why. ``decision`` and ``comments`` come from the curation file.
    """
    orig_html, rev_html = _instructions_html(ex)
    parts = [
        f'<div style="font-size:12px;color:#444">{_meta_html(ex)}</div>',
        f"<p><b>Query:</b> {_esc(ex['query'])}</p>",
        f"<p><b>Original instruction I:</b> {orig_html}</p>",
        f"<p><b>Reversal I':</b> {rev_html}</p>",
    ]
    if ex.get("reason") and _has_text(ex.get("reversal")):
        parts.append(f'<p style="color:#666"><b>Reason:</b> {_esc(ex["reason"])}</p>')
    if _has_text(ex.get("reference_reversal")) and ex.get("backend") != "reference":
        parts.append(
            f'<p style="color:#666"><b>Reference reversal (bundled):</b> {_esc(ex["reference_reversal"])}</p>'
        )
    if _has_text(ex.get("narrative")):  # docs/method.md §4
        parts.append(
            "<details><summary>Narrative form (trained instead for a share of the seeds)</summary>"
            f"<p><b>I as a narrative:</b> {_esc(ex['narrative'])}</p>"
            f"<p><b>Reference I' as a narrative:</b> {_esc(ex.get('reversal_narrative'))}</p></details>"
        )
    parts.append(_passages_html(ex, scores))
    if scores:
        parts.append(_flip_html(scores))
    elif score_note:
        parts.append(f"<p style='color:#666'>{_esc(score_note)}</p>")
    if ex.get("reasoning"):
        parts.append(
            f"<details><summary>LLM reasoning</summary><div style='white-space:pre-wrap'>{_esc(ex['reasoning'])}</div></details>"
        )
    parts.append(f"<p><b>Decision:</b> {_esc(decision) if decision else 'none yet'}</p>")
    if comments:
        parts.append(
            "<p><b>Comments:</b></p><ul>" + "".join(f"<li>{_esc(c)}</li>" for c in comments) + "</ul>"
        )
    return "\n".join(parts)
