"""The inspection notebook's explorer: browse reversals, see the dual view, curate.

Pure parts (unit-tested without a browser):

- ``build_examples(seeds, rows=None)`` joins seeds with synthesis rows into one DataFrame, one
  example per row (or, with seeds alone, one per seed showing its ``reference_reversal``);
- ``filter_examples(df, ...)`` by instruction type, backend, status, verification, decision, text;
- ``word_diff_html(a, b)`` marks the words the reversal removed (``<del>``) and added (``<ins>``);
- ``view_scores(model, ...)`` cosine scores of P+ and N* under both instructions, and the flip;
- decisions go to a ``curation.CurationStore`` (the one module that reads and writes them).

``Explorer`` wires them into ipywidgets; tests drive it by setting ``.value`` and calling
``.click()``. Not handled here: producing or verifying reversals (``synthesize``, ``verify``),
applying decisions to a training set (``trainsets``), the curation file itself (``curation``).
"""

from __future__ import annotations

import difflib
import html
from pathlib import Path

import pandas as pd

from .curation import CurationStore
from .seeds import load_seeds
from .synthesis_io import load_synthesis

ALL = "(all)"
STATUSES = ("accepted", "declined", "rejected", "failed")
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
    "verify_flip",
    "verify_judge",
)


# ---------------------------------------------------------------------------------------------
# The example table


def build_examples(seeds: list[dict], rows: list[dict] | None = None) -> pd.DataFrame:
    """One row per example with the texts a curator needs (columns ``COLUMNS``).

    With ``rows`` (synthesis output) every row becomes an example joined to its seed; N* is the
    seed's ``instruction_negatives[negative_index]``. Without rows, each seed with a
    ``reference_reversal`` is an example (key = seed id, backend ``reference``, status
    ``accepted``, N* = the first negative, as ``trainsets.reversals_from_reference`` uses).
    A row naming an unknown seed or negative raises ``ValueError``.
    """
    by_id = {s["id"]: s for s in seeds}
    out = []
    if rows is None:
        rows = [
            {
                "key": s["id"],
                "seed_id": s["id"],
                "negative_index": 0,
                "backend": "reference",
                "model": None,
                "status": "accepted",
                "reason": None,
                "reversal": s["reference_reversal"],
                "reasoning": None,
            }
            for s in seeds
            if s.get("reference_reversal")
        ]
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
                "verify_flip": r.get("verify_flip"),
                "verify_judge": r.get("verify_judge"),
            }
        )
    # object dtype: verify columns hold True/False/None, and pandas would turn None into NaN
    return pd.DataFrame(out, columns=list(COLUMNS), dtype=object)


def filter_examples(
    df: pd.DataFrame,
    instruction_type: str | None = None,
    backend: str | None = None,
    status: str | None = None,
    verify: str | None = None,
    search: str | None = None,
    decision: str | None = None,
    decisions: dict[str, str] | None = None,
) -> pd.DataFrame:
    """The examples matching every given filter (``None`` or ``"(all)"`` = no filter).

    ``verify``: ``passed`` (verify_flip true), ``failed`` (false), ``unverified`` (missing).
    ``search``: case-insensitive substring of the key, query, instructions or passages.
    ``decision``: ``undecided``, ``accept`` or ``reject``, looked up by key in ``decisions``.
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
        got = df["key"].map(lambda k: decisions.get(k) or "undecided")
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
    from .models import encode, format_query

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


_OK = '<span style="color:#14532d;font-weight:bold">relevant</span>'
_NO = '<span style="color:#8a1c1c">not relevant</span>'


def render_example(
    ex: dict,
    scores: dict | None = None,
    decision: str | None = None,
    comments: list[str] | None = None,
    score_note: str | None = None,
) -> str:
    """The HTML of one example: query, instruction diff, P+ and N* side by side with labels."""
    rev = ex.get("reversal")
    has_rev = isinstance(rev, str) and rev.strip()
    if has_rev:
        orig_html, rev_html = word_diff_html(ex["instruction"], rev)
    else:
        orig_html = _esc(ex["instruction"])
        rev_html = f'<i style="color:#666">no reversal ({_esc(ex.get("status"))}: {_esc(ex.get("reason")) or "no reason given"})</i>'
    meta = " · ".join(
        f"{k}: <b>{_esc(ex.get(k))}</b>"
        for k in ("key", "instruction_type", "backend", "model", "status")
        if ex.get(k) is not None
    )
    verify = ex.get("verify_flip")
    if verify is not None and not _isnan(verify):
        meta += f" · verify_flip: <b>{_esc(verify)}</b>"
    if ex.get("verify_judge") is not None and not _isnan(ex.get("verify_judge")):
        meta += f" · verify_judge: <b>{_esc(ex.get('verify_judge'))}</b>"
    parts = [
        f'<div style="font-size:12px;color:#444">{meta}</div>',
        f"<p><b>Query:</b> {_esc(ex['query'])}</p>",
        f"<p><b>Original instruction I:</b> {orig_html}</p>",
        f"<p><b>Reversal I':</b> {rev_html}</p>",
    ]
    if ex.get("reason") and has_rev:
        parts.append(f'<p style="color:#666"><b>Reason:</b> {_esc(ex["reason"])}</p>')
    ref = ex.get("reference_reversal")
    if isinstance(ref, str) and ref.strip() and ex.get("backend") != "reference":
        parts.append(f'<p style="color:#666"><b>Reference reversal (bundled):</b> {_esc(ref)}</p>')

    def cell(which):
        pos = which == "pos"
        label_o, label_r = (_OK, _NO) if pos else (_NO, _OK)
        lines = [
            f"<div style='white-space:pre-wrap'>{_esc(ex['positive' if pos else 'negative'])}</div>",
            "<hr style='margin:4px 0'>",
            f"under I: {label_o}" + (f" · score {scores['orig'][which]:.3f}" if scores else ""),
            "<br>"
            + (
                f"under I': {label_r}" + (f" · score {scores['rev'][which]:.3f}" if scores else "")
                if has_rev
                else "under I': -"
            ),
        ]
        return "".join(lines)

    head = "<th style='width:50%;text-align:left'>P+ ({}) </th><th style='text-align:left'>N* ({}, negative {})</th>".format(
        _esc(ex["positive_id"]), _esc(ex["negative_id"]), _esc(ex["negative_index"])
    )
    parts.append(
        "<table style='width:100%;border-collapse:collapse;table-layout:fixed'>"
        f"<tr>{head}</tr><tr><td style='vertical-align:top;padding:4px;border:1px solid #ddd'>{cell('pos')}</td>"
        f"<td style='vertical-align:top;padding:4px;border:1px solid #ddd'>{cell('neg')}</td></tr></table>"
    )
    if scores:
        flip = scores["flips"]
        parts.append(
            f"<p><b>Model flips:</b> {'yes' if flip else 'no'} "
            f"(I: P+ {'>' if scores['orig']['pos'] > scores['orig']['neg'] else '<='} N*; "
            f"I': N* {'>' if scores['rev']['neg'] > scores['rev']['pos'] else '<='} P+)</p>"
        )
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


# ---------------------------------------------------------------------------------------------
# The widget


class Explorer:
    """Browse examples with filters, see the dual view and (optionally) a model's scores, curate.

    ``Explorer(seeds, rows=None, curation_path="out/curation.jsonl", model=None)``; display
    ``explorer.widget``. ``model`` is a name for ``models.load_model`` (loaded on the first
    example scored) or a loaded SentenceTransformer; None shows no scores until a name is typed
    into the model box. Accept / reject append to the curation file and move to the next example
    (``auto_advance``); "comment" appends the text box's content without a decision.
    """

    def __init__(
        self,
        seeds: list[dict],
        rows: list[dict] | None = None,
        curation_path: str | Path = "out/curation.jsonl",
        model=None,
        auto_advance: bool = True,
    ):
        import ipywidgets as W

        self.examples = build_examples(seeds, rows)
        self.store = CurationStore(curation_path)
        self.auto_advance = auto_advance
        self._model_obj = None if model is None or isinstance(model, str) else model
        self._loaded_name: str | None = None
        self._score_cache: dict[tuple, dict] = {}
        self.position = 0
        self.filtered = self.examples

        df = self.examples
        self.type_filter = W.Dropdown(options=choices(df, "instruction_type"), value=ALL, description="type")
        self.backend_filter = W.Dropdown(options=choices(df, "backend"), value=ALL, description="backend")
        self.status_filter = W.Dropdown(options=[ALL, *STATUSES], value=ALL, description="status")
        self.verify_filter = W.Dropdown(options=list(VERIFY_CHOICES), value=ALL, description="verified")
        self.decision_filter = W.Dropdown(options=list(DECISION_CHOICES), value=ALL, description="decision")
        self.search_box = W.Text(value="", placeholder="search text or key", description="search")
        self.model_box = W.Text(
            value=model if isinstance(model, str) else ("(given)" if model is not None else ""),
            placeholder="e.g. minilm",
            description="model",
            disabled=self._model_obj is not None,
        )
        self.prev_button = W.Button(description="◀ previous")
        self.next_button = W.Button(description="next ▶")
        self.position_label = W.Label(value="")
        self.accept_button = W.Button(description="accept", button_style="success")
        self.reject_button = W.Button(description="reject", button_style="danger")
        self.comment_box = W.Text(value="", placeholder="comment", description="comment")
        self.comment_button = W.Button(description="add comment")
        self.detail = W.HTML(value="")
        self.status_line = W.Label(value="")

        for w in (
            self.type_filter,
            self.backend_filter,
            self.status_filter,
            self.verify_filter,
            self.decision_filter,
            self.search_box,
        ):
            w.observe(lambda _change: self.apply_filters(), names="value")
        self.model_box.observe(lambda _change: self.show(), names="value")
        self.prev_button.on_click(lambda _b: self.go(-1))
        self.next_button.on_click(lambda _b: self.go(+1))
        self.accept_button.on_click(lambda _b: self.decide("accept"))
        self.reject_button.on_click(lambda _b: self.decide("reject"))
        self.comment_button.on_click(lambda _b: self.comment())

        self.widget = W.VBox(
            [
                W.HBox([self.type_filter, self.backend_filter, self.status_filter]),
                W.HBox([self.verify_filter, self.decision_filter, self.search_box]),
                W.HBox([self.prev_button, self.position_label, self.next_button, self.model_box]),
                self.detail,
                W.HBox([self.accept_button, self.reject_button, self.comment_box, self.comment_button]),
                self.status_line,
            ]
        )
        self.apply_filters()

    # -- state ---------------------------------------------------------------------------------
    @property
    def current(self) -> dict | None:
        """The example on screen as a dict, or None when no example matches the filters."""
        if not len(self.filtered):
            return None
        return self.filtered.iloc[self.position].to_dict()

    def apply_filters(self) -> None:
        """Re-filter; keep the example on screen if it still matches, else go to the first."""
        keep = self.filtered.index[self.position] if len(self.filtered) else None
        self.filtered = filter_examples(
            self.examples,
            self.type_filter.value,
            self.backend_filter.value,
            self.status_filter.value,
            self.verify_filter.value,
            self.search_box.value,
            self.decision_filter.value,
            self.store.decisions,
        )
        self.position = (
            int(self.filtered.index.get_loc(keep)) if keep is not None and keep in self.filtered.index else 0
        )
        self.show()

    def go(self, step: int) -> None:
        if len(self.filtered):
            self.position = max(0, min(len(self.filtered) - 1, self.position + step))
        self.show()

    def decide(self, decision: str) -> None:
        ex = self.current
        if ex is None:
            return
        # a comment typed before clicking accept/reject travels with the decision
        self.store.record(ex["key"], decision, self.comment_box.value or None)
        self.comment_box.value = ""
        self.status_line.value = f"{decision}ed {ex['key']} -> {self.store.path}"
        if self.auto_advance and self.position < len(self.filtered) - 1:
            self.position += 1
        self.show()

    def comment(self) -> None:
        ex = self.current
        if ex is None or not self.comment_box.value.strip():
            self.status_line.value = "type a comment first"
            return
        self.store.record(ex["key"], None, self.comment_box.value)
        self.comment_box.value = ""
        self.status_line.value = f"comment on {ex['key']} -> {self.store.path}"
        self.show()

    # -- model ---------------------------------------------------------------------------------
    def _model(self):
        if self.model_box.disabled:  # a loaded model object was passed in
            return self._model_obj
        name = self.model_box.value.strip()
        if not name:
            return None
        if name != self._loaded_name:
            from .models import load_model

            self._model_obj, self._loaded_name = load_model(name), name
        return self._model_obj

    def scores(self, ex: dict) -> tuple[dict | None, str | None]:
        """Scores for ``ex`` (cached per model and example) or ``(None, why not)``."""
        rev = ex.get("reversal")
        if not (isinstance(rev, str) and rev.strip()):
            return None, None
        try:
            model = self._model()
        except Exception as e:  # an offline hub name, a bad path: say so on screen, keep browsing
            return None, f"model not loaded: {e}"
        if model is None:
            return None, "type a model name (e.g. minilm) to see its scores"
        key = (id(model), ex["key"], ex["backend"], rev)
        if key not in self._score_cache:
            self._score_cache[key] = view_scores(
                model, ex["query"], ex["instruction"], rev, ex["positive"], ex["negative"]
            )
        return self._score_cache[key], None

    # -- display -------------------------------------------------------------------------------
    def show(self) -> None:
        n = len(self.filtered)
        self.position_label.value = f"{self.position + 1 if n else 0} / {n}"
        for b in (self.accept_button, self.reject_button, self.comment_button):
            b.disabled = n == 0
        self.prev_button.disabled = n == 0 or self.position == 0
        self.next_button.disabled = n == 0 or self.position >= n - 1
        ex = self.current
        if ex is None:
            self.detail.value = "<p><i>No example matches the filters.</i></p>"
            return
        scores, note = self.scores(ex)
        self.detail.value = render_example(
            ex, scores, self.store.decisions.get(ex["key"]), self.store.comments.get(ex["key"]), note
        )


def load_for_inspection(seeds_path: str | Path, synthesis_path=None) -> tuple[list[dict], list[dict] | None]:
    """``(seeds, rows)`` for the explorer. ``synthesis_path`` is one synthesis output or a list
    (runs of several backends); ``rows`` is None when none exists, so the explorer falls back
    to the seeds' reference reversals."""
    seeds = load_seeds(seeds_path)
    paths = (
        []
        if synthesis_path is None
        else [synthesis_path]
        if isinstance(synthesis_path, (str, Path))
        else list(synthesis_path)
    )
    paths = [p for p in paths if Path(p).exists()]
    if not paths:
        return seeds, None
    return seeds, [r for p in paths for r in load_synthesis(p)]
