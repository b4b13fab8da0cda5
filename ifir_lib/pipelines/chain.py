"""The notebook chain: one output folder that notebooks 01 -> 05 write to and read from in turn.

Every notebook takes the folder from one parameter, ``OUT = chain_folder()``: ``$IFIR_OUT`` when
set, else a fresh temporary folder in smoke mode, else ``out/demo``, the folder ``make demo``
fills. The demo is the chain run headless, so after ``make demo`` the notebooks open on its
results, notebook 03 finds its runs finished (same seeds, reversals, preset and budget) and
notebook 04 only adds what the demo did not evaluate.

Each stage reads what the previous one wrote when it exists and says what it fell back to when
it does not (``Chain.reversals_for_training`` and the other ``*_for_*`` methods return the path
and that sentence). Layout under the folder::

    reversals.jsonl             01: a real LLM's reversals (never the stand-in server's)
    reversals_shown.jsonl       03: the reversal 02 showed per seed (``best_reversal_rows``), trained
    standin/reversals.jsonl     01 without an endpoint: the stand-in's rows, not read by 02-03
    reversals_reference.jsonl   01 and the demo: the bundled reference reversals as rows
    reversals_template.jsonl    01: the deterministic negation baseline
    curation.jsonl              02: accept / reject decisions
    models/<mode>/              03 and the demo: one run folder per data config
    results.csv (+ _per_query)  04 and the demo: the results table
    figures/                    05: every figure (PDF, SVG, PNG) and its caption

Not handled here: any stage's logic (``synthesis``, ``curation``, ``training``, ``evaluation``,
``reporting``); this module only names the files and picks what exists.
"""

from __future__ import annotations

import os
import tempfile
from dataclasses import dataclass
from pathlib import Path

from ..core import config as C
from ..core.errors import ConfigError
from ..core.jsonl import write_jsonl
from ..core.run_folder import RunFolder
from ..curation.tables import reference_row
from ..curation.widgets import load_for_inspection
from .evaluate import evaluate_models, run_label

OUT_ENV = "IFIR_OUT"


def chain_folder() -> Path:
    """The chain's folder: ``$IFIR_OUT``, else a new temporary folder in smoke mode, else ``out/demo``."""
    if os.environ.get(OUT_ENV):
        return Path(os.environ[OUT_ENV]).expanduser().resolve()
    if C.smoke_mode():
        return Path(tempfile.mkdtemp(prefix="ifir-chain-"))
    return C.REPO_DIR / "out" / "demo"


@dataclass(frozen=True)
class Choice:
    """A file a stage reads (None: the bundled default) and the sentence that says why."""

    path: Path | None
    note: str

    def __str__(self) -> str:
        return self.note


@dataclass(frozen=True)
class Chain:
    """Where each notebook writes under ``root`` and what the next one reads."""

    root: Path

    @classmethod
    def here(cls) -> Chain:
        return cls(chain_folder())

    @property
    def reversals(self) -> Path:
        return self.root / "reversals.jsonl"

    @property
    def standin(self) -> Path:
        return self.root / "standin" / "reversals.jsonl"

    def baseline(self, backend: str) -> Path:
        """``reversals_reference.jsonl`` / ``reversals_template.jsonl``: 01's baselines."""
        return self.root / f"reversals_{backend}.jsonl"

    @property
    def shown(self) -> Path:
        """``reversals_shown.jsonl``: the reversals notebook 02 showed, which notebook 03 trains."""
        return self.root / "reversals_shown.jsonl"

    @property
    def curation(self) -> Path:
        return self.root / "curation.jsonl"

    @property
    def models(self) -> Path:
        return self.root / "models"

    @property
    def results(self) -> Path:
        return self.root / "results.csv"

    @property
    def figures(self) -> Path:
        return self.root / "figures"

    def synthesis_target(self, standin: bool) -> Path:
        """Where 01 writes: the chain's file for a real LLM, ``standin/`` for the stand-in server."""
        return self.standin if standin else self.reversals

    def reversals_for_inspection(self) -> Choice:
        if self.reversals.exists():
            return Choice(self.reversals, f"the LLM's reversals from notebook 01 ({self.reversals})")
        return Choice(
            None, f"no LLM reversals at {self.reversals}: every seed shows its bundled reference reversal"
        )

    def reversals_for_training(self, seeds_path=C.SEEDS_PATH) -> Choice:
        """Exactly the reversals notebook 02 showed, so the curator's decisions are about the
        texts trained: per seed, 01's LLM reversal when accepted and verified, else the bundled
        reference one (``best_reversal_rows`` over the same rows as ``reversals_for_inspection``),
        written to ``shown``. None when 02 showed no LLM reversal: the seeds' bundled reference
        reversals (the same rows as ``reversals_reference.jsonl``, so the demo's runs are reused).
        ``seeds_path``: the seeds 02 opened (notebook 02's ``SEEDS``)."""
        if not self.reversals.exists():
            return Choice(
                None, f"no LLM reversals at {self.reversals}: the seeds' bundled reference reversals"
            )
        shown, counts = best_reversal_rows(*load_for_inspection(seeds_path, self.reversals))
        if not counts["llm_verified"]:
            return Choice(
                None,
                f"no verified LLM reversal in {self.reversals}: notebook 02 showed, and 03 trains, "
                "the seeds' bundled reference reversals",
            )
        write_jsonl(self.shown, shown)
        return Choice(
            self.shown,
            f"notebook 01's LLM reversals ({self.reversals}) as notebook 02 showed them: "
            f"{counts['llm_verified']} seeds with a verified LLM reversal, {counts['reference']} with "
            f"the bundled reference reversal ({self.shown})",
        )

    def curation_for_training(self) -> Choice:
        if self.curation.exists():
            return Choice(
                self.curation, f"notebook 02's decisions ({self.curation}): rejected reversals are left out"
            )
        return Choice(None, f"no curation file at {self.curation}: every reversal is used")

    def results_for_figures(self) -> Choice:
        if self.results.exists():
            return Choice(self.results, f"notebook 04's results table ({self.results})")
        return Choice(None, f"no results table at {self.results}: run notebook 04 (or make demo) first")


def best_reversal_rows(seeds: list[dict], rows: list[dict] | None) -> tuple[list[dict], dict[str, int]]:
    """One row per seed with its best available reversal: the LLM's when it was accepted and
    verified (``verify_flip``: the base model's ranking of P+ and N* flips between I and I'),
    else the bundled reference reversal (seeds without one are left out).

    Returns the rows (synthesis-row format, for ``curation.tables.build_examples``) and counts:
    ``{"seeds", "llm_verified", "reference", "none"}``. Example: 1,123 seeds and 12 LLM rows of
    which 5 verified -> counts 1123 / 5 / 1118 / 0.
    """
    best: dict[str, dict] = {}
    for r in rows or []:
        if r.get("status") == "accepted" and r.get("verify_flip") and r.get("seed_id") not in best:
            best[r["seed_id"]] = r
    out, counts = [], {"seeds": len(seeds), "llm_verified": 0, "reference": 0, "none": 0}
    for s in seeds:
        if s["id"] in best:
            out.append(best[s["id"]])
            counts["llm_verified"] += 1
        elif s.get("reference_reversal"):
            out.append(reference_row(s))
            counts["reference"] += 1
        else:
            counts["none"] += 1
    return out, counts


def base_model_of(out: str | Path) -> str | None:
    """The backbone the chain's trained runs (``OUT/models``) started from, read from their
    records; None without runs (notebook 04 then takes the preset's, as notebook 03 would train).
    Runs of several backbones are a ``ConfigError``: notebook 04 tests every run against one base
    model, and ``evaluate_chain`` refuses a base model that is not theirs."""
    from ..reporting.style import backbone_identity

    models = Chain(Path(out)).models
    runs = RunFolder.find(models, with_model=True) if models.exists() else []
    bases = {str(b) for r in runs if (b := (r.info().get("config") or {}).get("base_model"))}
    if len({backbone_identity(b) for b in bases}) > 1:
        raise ConfigError(f"{models}: runs trained from {len(bases)} backbones ({', '.join(sorted(bases))})")
    return next(iter(bases), None)


def evaluate_chain(chain: Chain, base_model: str, sets, bootstrap: int = 1000) -> dict[str, list]:
    """Notebook 04's step: the base model and every trained run under ``chain.models`` on each of
    ``sets`` (FollowIR-format folders). Appends to ``chain.results`` only what it lacks (after
    ``make demo``, nothing for v1), labelling runs by ``run_label``, then returns every model's
    results in memory, ``{label: [one EvalResult per set]}`` (the embedding cache makes the
    second pass cheap; its numbers equal the table's: same bootstrap seeds). Runs trained from
    another backbone than ``base_model`` are a ``ConfigError`` (``base_model_of``)."""
    from ..reporting.style import backbone_identity

    started = base_model_of(chain.root)
    if started and backbone_identity(started) != backbone_identity(base_model):
        # each run is tested against the base model: a backbone's difference would pass for training's
        raise ConfigError(
            f"{chain.models}: the runs were trained from {started}, not from the base model {base_model!r}; "
            "set BASE_MODEL to their backbone (base_model_of(OUT))"
        )
    runs = RunFolder.find(chain.models, with_model=True) if chain.models.exists() else []
    models = {run_label(r.path): str(r.path) for r in runs}
    sets = [str(s) for s in sets]
    out = {}
    for csv in (chain.results, None):  # record what the table lacks, then load everything
        kw = dict(followir=sets, results_csv=csv, bootstrap=bootstrap, skip_done=csv is not None, style=None)
        base = evaluate_models({base_model: base_model}, mode=C.BASE_MODE, rng_seed=0, **kw)
        trained = evaluate_models(models, **kw) if models else {}
        out = {**base, **trained}
    return out
