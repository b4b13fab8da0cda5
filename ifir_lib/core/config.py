"""Paths, names and provenance shared by every stage.

Only constants and environment look-ups live here: where the bundled data is, the modes, the
query/document format that training and evaluation agree on, the smoke switch, and the git
commit recorded next to every artifact. Stage settings live in each stage's own frozen dataclass
(``synthesize.SynthesisConfig``, ``train.TrainConfig``, ``demo.DemoConfig``), each with
``.preset(name)``. Not handled here: reading or writing files (``jsonl``).
"""

from __future__ import annotations

import functools
import importlib.metadata
import os
import subprocess
import sys
from pathlib import Path

from .digests import files_digest
from .errors import ConfigError

PACKAGE_DIR = Path(__file__).resolve().parents[1]  # ifir_lib/ (this file is ifir_lib/core/config.py)
DATA_DIR = PACKAGE_DIR / "data"
SEEDS_PATH = DATA_DIR / "seeds.jsonl"
FOLLOWIR_DIR = DATA_DIR / "followir_mini"  # evaluation set v1 (32 queries)
FOLLOWIR_V2_DIR = DATA_DIR / "followir_v2"  # evaluation set v2 (64 queries, four constraint styles)
EVAL_SETS = {"v1": FOLLOWIR_DIR, "v2": FOLLOWIR_V2_DIR}
AUDIT_PATH = DATA_DIR / "reversal_audit.jsonl"  # per-seed verdicts of the independent audit
NARRATIVE_AUDIT_PATH = DATA_DIR / "narrative_audit.jsonl"  # the same for the narrative forms
NEGATIVE_AUDIT_PATH = DATA_DIR / "hard_negative_audit.jsonl"  # borrowed hard negatives: screen + review
ABSTRACT_AUDIT_PATH = DATA_DIR / "abstract_audit.jsonl"  # the abstract reversals' review verdicts
TEMPLATES_DIR = PACKAGE_DIR / "synthesis" / "templates"  # the reversal and judge prompts
PUBLISHED_RESULTS_PATH = DATA_DIR / "published_results.csv"

# Repository root when running from a checkout (figures/ lives there); falls back to the CWD.
IN_CHECKOUT = (PACKAGE_DIR.parent / "pyproject.toml").exists()  # else an installed copy
REPO_DIR = PACKAGE_DIR.parent if IN_CHECKOUT else Path.cwd()
FIGURES_DIR = REPO_DIR / "figures"

# mteb joins query and instruction with one space (docs/method.md §3); we do the same everywhere.
QUERY_INSTRUCTION_SEP = " "

# Prompt names stored in every trained SentenceTransformer folder (``model.prompts``). mteb 2.x
# looks these names up too, so a model formats queries the same way in our code and in mteb.
QUERY_PROMPT_NAME = "query"
DOCUMENT_PROMPT_NAME = "document"

# A *mode* is a data configuration (docs/method.md §3). "base" labels an
# untrained model in the results table.
PAPER_MODES = ("ins-orig", "ins-dv", "all-orig", "all-dv")
# ins-aug is this project's wording control: Ins-DV's budget and seeds, but the second view is the
# original instruction reworded in the reversal's style, labels unchanged (docs/method.md §3).
# Ablations of Ins-DV: its data and budget, one thing changed (docs/method.md §3). Values are
# TrainConfig fields, except "reversals", which names the reversal source.
ABLATIONS = {
    "ins-dv-template": {"reversals": "template"},  # the template backend's trivial negation as I'
    "ins-dv-nocobatch": {"co_batch_views": False},  # a seed's two views in independent batches
    "ins-dv-cobatch": {
        "co_batch_views": True
    },  # both views in one batch (every preset's already: then it is ins-dv)
    "ins-dv-inbatch": {"in_batch_negatives": True},  # in-batch negatives on (the seed's own masked)
    # I' in the abstract style: N* selected by kind, property, time or stance, not its words (§2)
    "ins-dv-abstract": {"reversals": "abstract"},
}
MODES = (*PAPER_MODES, "ins-aug", *ABLATIONS)
# All-* seeds per Ins-* example (arXiv 2604.18845, Tables 1-2: 440k instruction samples, each with a
# second view, against Ins-*'s 480k): at budget B, All-* take round(B * 440/480) seeds, 2 views each.
ALL_SEED_RATIO = 440 / 480
# The names of ``train.TRAIN_PRESETS``, here so that the command line parses without torch.
# One preset set for every config (synthesis, training, demo, experiment): ``paper`` is the
# paper-scale run (the dataclass defaults), ``cpu`` fits two cores in under an hour, ``smoke``
# finishes in seconds (CI, notebooks in smoke mode). ``default_preset()`` picks among them.
PRESET_NAMES = ("paper", "cpu", "smoke")
PRESET_ALIASES = {"cpu-smoke": "smoke", "default": "cpu"}  # the names before presets were unified


def data_mode(mode: str) -> str:
    """The data configuration ``mode`` trains on: ``ins-dv`` for its ablations, else itself."""
    return "ins-dv" if mode in ABLATIONS else mode


BASE_MODE = "base"


def cache_dir() -> Path:
    """Where embedding and LLM caches go (``IFIR_CACHE`` overrides ``~/.cache/ifir``; an empty
    value is unset: it put the caches in whatever folder a command ran in)."""
    return Path(os.environ.get("IFIR_CACHE") or Path.home() / ".cache" / "ifir").expanduser()


def env_flag(name: str) -> bool:
    """Whether environment variable ``name`` is on: unset, ``''``, ``0``, ``false``, ``no`` and
    ``off`` (any case) are off (``IFIR_SMOKE=false`` and ``CI=False`` turned smoke mode on)."""
    return os.environ.get(name, "").strip().lower() not in ("", "0", "false", "no", "off")


def smoke_mode() -> bool:
    """True when ``IFIR_SMOKE`` (or CI) asks every notebook and demo to finish in seconds."""
    return env_flag("IFIR_SMOKE") or env_flag("CI")


def default_preset() -> str:
    """The preset every entry point uses when none is named: ``smoke`` in smoke mode (``IFIR_SMOKE``
    or CI), else ``paper`` when a CUDA GPU is visible, else ``cpu``. Entry points print which they
    took (``resolve_preset``)."""
    if smoke_mode():
        return "smoke"
    import torch  # deferred: the command line parses without torch

    return "paper" if torch.cuda.is_available() else "cpu"


def check_preset(name: str, kind: str) -> str:
    """``name`` if it is one of ``PRESET_NAMES`` (an old name in ``PRESET_ALIASES`` gives its
    new one: ``'cpu-smoke' -> 'smoke'``, printed: ``'default'`` is ``cpu``'s old name, not the
    machine's default), else a ``ConfigError`` naming the choices."""
    if name in PRESET_ALIASES:
        old, name = name, PRESET_ALIASES[name]
        print(
            f"{kind} preset: {name} ({old!r} is its old name; no --preset: the machine's default)",
            file=sys.stderr,
        )
    if name not in PRESET_NAMES:
        raise ConfigError(f"unknown {kind} preset {name!r}; choose from {', '.join(PRESET_NAMES)}")
    return name


def resolve_preset(name: str | None, kind: str) -> str:
    """``check_preset(name)``, or ``default_preset()`` when ``name`` is None, printed so a user
    sees which preset a command took: ``'training preset: cpu (default: no GPU)'`` (on stderr, so
    ``--json`` output stays one object)."""
    if name is not None:
        return check_preset(name, kind)
    name = default_preset()
    why = {"smoke": "smoke mode", "paper": "a GPU is visible", "cpu": "no GPU"}[name]
    print(f"{kind} preset: {name} (default: {why}; choose with --preset)", file=sys.stderr)
    return name


@functools.cache
def _code_digest() -> str:
    """8 hex characters of the package's ``.py`` files (an installed copy has no commit)."""
    return files_digest(
        ((str(f.relative_to(PACKAGE_DIR)), f) for f in sorted(PACKAGE_DIR.rglob("*.py"))), n=8
    )


def git_commit() -> str:
    """Short HEAD commit of the checkout, ``+dirty`` when tracked files changed; ``'unknown'`` outside
    git. An installed copy (no checkout around the package) records ``'ifir-lib <version>
    (installed, code <digest of its .py files>)'``: the folder a command runs in is another
    repository, whose HEAD it recorded."""
    if not IN_CHECKOUT:
        try:
            version = importlib.metadata.version("ifir-lib")
        except importlib.metadata.PackageNotFoundError:
            version = "?"
        return f"ifir-lib {version} (installed, code {_code_digest()})"  # two builds of one version differ
    try:
        head = subprocess.run(
            ["git", "-C", str(REPO_DIR), "rev-parse", "--short", "HEAD"],
            capture_output=True,
            text=True,
            timeout=5,
        )
        if head.returncode != 0:
            return "unknown"
        dirty = subprocess.run(
            ["git", "-C", str(REPO_DIR), "status", "--porcelain", "--untracked-files=no"],
            capture_output=True,
            text=True,
            timeout=5,
        ).stdout.strip()
        return head.stdout.strip() + ("+dirty" if dirty else "")
    except (OSError, subprocess.SubprocessError):
        return "unknown"
