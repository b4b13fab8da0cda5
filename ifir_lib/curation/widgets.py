"""The inspection notebook's explorer: browse reversals, see the dual view, curate.

``Explorer`` wires the pure parts of ``inspect_tables`` (the example table, filters, word diff,
scores, HTML) into ipywidgets, and records decisions in a ``curation.CurationStore``, each with
the text it judged (``decisions.decision_for`` shows a row only the decisions about its text);
tests drive it by setting ``.value`` and calling ``.click()``. Not handled here: producing or verifying reversals (``synthesize``, ``verify``),
applying decisions to a training set (``trainsets``), the curation file itself (``curation``).
"""

from __future__ import annotations

import logging
from pathlib import Path

from ..core.models import load_model
from ..seeds.schema import load_seeds, written_for
from ..synthesis.run import STATUSES, iter_synthesis
from .decisions import CurationStore, decision_for
from .tables import (
    ALL,
    DECISION_CHOICES,
    VERIFY_CHOICES,
    build_examples,
    choices,
    filter_examples,
    render_example,
    view_scores,
)

log = logging.getLogger(__name__)

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
        # the row travels too: the decision is about this text (backend, model, reversal hash)
        self.store.record(ex["key"], decision, self.comment_box.value or None, row=ex)
        self.comment_box.value = ""
        self.status_line.value = f"{decision}ed {ex['key']} -> {self.store.path}"
        if self.store.overturned:  # a log line from a click handler shows nowhere in the notebook
            self.status_line.value += f" (warning: {self.store.overturned})"
        if self.auto_advance and self.position < len(self.filtered) - 1:
            self.position += 1
        self.show()

    def comment(self) -> None:
        ex = self.current
        if ex is None or not self.comment_box.value.strip():
            self.status_line.value = "type a comment first"
            return
        self.store.record(ex["key"], None, self.comment_box.value, row=ex)
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
        decision = decision_for(self.store.decisions, ex["key"], ex.get("reversal"))
        self.detail.value = render_example(ex, scores, decision, self.store.comments.get(ex["key"]), note)


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
    return seeds, [r for p in paths for r in current_rows(p, seeds)]


def current_rows(path: str | Path, seeds: list[dict]) -> list[dict]:
    """The rows of one synthesis output that belong to ``seeds`` as they are now: per key the
    first row written for the seed's current version (``seeds.schema.written_for``), so a row
    redone after an edit (``ifir synthesize --redo-changed``) is shown, not its stale first row,
    and what is shown is what training uses. Rows of a seed no longer in ``seeds``, and keys with
    only stale rows, are left out with one warning each (the file keeps them)."""
    by_id = {s["id"]: s for s in seeds}
    rows = list(iter_synthesis(path, by_version=True))
    out, shown = [], set()
    for r in rows:
        seed = by_id.get(r.get("seed_id"))
        if seed is not None and r["key"] not in shown and written_for(r, seed):
            shown.add(r["key"])
            out.append(r)
    orphans = sorted({r["key"] for r in rows if r.get("seed_id") not in by_id})
    stale = sorted({r["key"] for r in rows} - shown - set(orphans))
    why = {
        "name a seed that is not in the seeds given": orphans,
        "were written for an earlier version of their seed (ifir synthesize --redo-changed)": stale,
    }
    for reason, keys in why.items():
        if keys:
            log.warning("%s: %d row(s) %s, e.g. %s: not shown", path, len(keys), reason, ", ".join(keys[:5]))
    return out
