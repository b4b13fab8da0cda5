"""The bundled data as a whole: statistics (``ifir data stats``) and validation (``ifir data validate``).

Checks what no single row can: unique passage ids across seeds, passage lengths, that every seed
carries what every mode needs, the reversal, abstract-reversal and hard-negative audits,
phrasing-style shares, and that no text is shared between training seeds and the evaluation sets.
Reports the surface cues of every view (``cues``, ``seeds.cues``). Not handled here: one seed's schema
(``seeds``), the evaluation layout (``corpora``).
"""

from __future__ import annotations

import collections
import hashlib
import json
import re
from collections.abc import Iterable
from pathlib import Path

from ..core.config import (
    ABSTRACT_AUDIT_PATH,
    AUDIT_PATH,
    EVAL_SETS,
    FOLLOWIR_DIR,
    NARRATIVE_AUDIT_PATH,
    NEGATIVE_AUDIT_PATH,
    SEEDS_PATH,
)
from ..core.jsonl import read_jsonl
from ..core.models import load_model
from ..evaluation.corpora import load_followir
from ..seeds.cues import followir_cues, model_cues, seed_cues
from ..seeds.negative_audit import audit_counts, check_negative_audit, text_sha256
from ..seeds.schema import INSTRUCTION_TYPES, NARRATIVE_FIELDS, load_seeds
from ..synthesis.checks import phrasing_style

_WORD = re.compile(r"\S+")


def passages_of(seed: dict) -> Iterable[dict]:
    yield seed["positive"]
    yield from seed["instruction_negatives"]
    yield from seed["hard_negatives"]


MAX_STYLE_SHARE = 0.40  # no single phrasing style may exceed this share of reversals


def style_shares(texts: Iterable[str]) -> dict[str, float]:
    """``{style: share}`` by ``reversal_checks.phrasing_style``, rounded to 3 decimals, largest first."""
    c = collections.Counter(phrasing_style(t) for t in texts)
    n = sum(c.values()) or 1
    return {k: round(v / n, 3) for k, v in c.most_common()}


def data_stats(
    seeds_path: str | Path = SEEDS_PATH,
    followir_dir: str | Path = FOLLOWIR_DIR,
    negative_audit_path: str | Path | None = NEGATIVE_AUDIT_PATH,
    cues_model: str | None = None,
) -> dict:
    """Counts for ``ifir data stats``: seeds, types, domains, passages, eval queries and docs, the
    hard-negative audit's counts, and ``cues``: each view's surface cues on the seeds and the same
    overlap share on every evaluation set (``seeds.cues``); with ``cues_model``, also how often
    that untrained embedder ranks each view's right document above the wrong one."""
    seeds = load_seeds(seeds_path)
    ev = load_followir(followir_dir)
    sets = {name: folder for name, folder in EVAL_SETS.items() if Path(folder).exists()}
    evs = {
        name: ev if Path(folder) == Path(followir_dir) else load_followir(folder)
        for name, folder in sets.items()
    }
    if Path(followir_dir) not in map(Path, sets.values()):
        evs[Path(followir_dir).name] = ev
    words = [len(_WORD.findall(p["text"])) for s in seeds for p in passages_of(s)]
    return {
        "seeds": len(seeds),
        "instruction_types": dict(sorted(collections.Counter(s["instruction_type"] for s in seeds).items())),
        "domains": dict(sorted(collections.Counter(s.get("domain", "unknown") for s in seeds).items())),
        "passages": len(words),
        "passage_words": {"min": min(words), "mean": round(sum(words) / len(words), 1), "max": max(words)},
        "instruction_negatives": sum(len(s["instruction_negatives"]) for s in seeds),
        "with_reference_reversal": sum(1 for s in seeds if s.get("reference_reversal")),
        "with_narratives": sum(1 for s in seeds if s.get("narrative")),
        "counterparts": len(seeds),
        "eval_queries": len(ev.queries),
        "eval_documents": len(ev.corpus),
        "eval_changed_documents": sum(len(v) for v in ev.qrel_diff.values()),
        "eval_min_pool": min(len(v) for v in ev.top_ranked.values()),
        "reversal_styles": style_shares(
            s["reference_reversal"] for s in seeds if s.get("reference_reversal")
        ),
        "instruction_styles": style_shares(s["instruction"] for s in seeds),
        "with_abstract_reversal": sum(1 for s in seeds if s.get("abstract_reversal")),
        "eval_sets": {name: len(evs[name].queries) for name in sets},
        "hard_negative_audit": (
            audit_counts(negative_audit_path)
            if negative_audit_path and Path(negative_audit_path).exists()
            else None
        ),
        "cues": {
            "seeds": seed_cues(seeds),
            "eval": {name: followir_cues(e) for name, e in evs.items()},
            **({"model": {"name": cues_model, **_model_cues(seeds, cues_model)}} if cues_model else {}),
        },
    }


def _model_cues(seeds: list[dict], name: str) -> dict:
    model = load_model(name)
    return model_cues(seeds, lambda texts: model.encode(texts, batch_size=64, normalize_embeddings=True))


def validate_bundle(
    seeds_path: str | Path = SEEDS_PATH,
    followir_dir: str | Path | None = None,
    min_words: int = 40,
    max_words: int = 120,
    audit_path: str | Path | None = AUDIT_PATH,
    narrative_audit_path: str | Path | None = NARRATIVE_AUDIT_PATH,
    negative_audit_path: str | Path | None = NEGATIVE_AUDIT_PATH,
    abstract_audit_path: str | Path | None = ABSTRACT_AUDIT_PATH,
) -> list[str]:
    """Check the bundled data; return a list of problems (empty means valid).

    Checks: the seed schema; unique seed ids; one text per passage id (mined hard negatives reuse
    other seeds' passages by id); passage lengths; at least 3 hard negatives and a reference
    reversal per seed (what every mode needs); the audit file covers every seed with a passing
    verdict and the same target negative; every seed with narratives has a passing narrative
    verdict for exactly its text (``narratives_sha256``), and every abstract reversal one for its
    text; every borrowed hard negative has a ``keep`` row in the hard-negative audit for exactly its
    text (``seeds.negative_audit``); no phrasing style above ``MAX_STYLE_SHARE`` of the reversals; and no passage text shared between the training seeds and any evaluation set
    (``followir_dir``, default: every set in ``config.EVAL_SETS``).
    """
    problems = []
    seeds = load_seeds(seeds_path)  # schema + unique seed ids (raises on the first problem)
    owner: dict[str, str] = {}
    text_of: dict[str, str] = {}
    for s in seeds:
        if len(s["hard_negatives"]) < 3:
            problems.append(f"{s['id']}: {len(s['hard_negatives'])} hard negatives (< 3)")
        if not s.get("reference_reversal"):
            problems.append(f"{s['id']}: no reference_reversal")
        if s["instruction_type"] not in INSTRUCTION_TYPES:
            problems.append(f"{s['id']}: unknown instruction_type {s['instruction_type']!r}")
        for p in (s["positive"], *s["instruction_negatives"]):
            if p["id"] in owner:
                problems.append(f"{s['id']}: passage id {p['id']} also in {owner[p['id']]}")
            owner[p["id"]] = s["id"]
        for p in passages_of(s):
            if text_of.setdefault(p["id"], p["text"]) != p["text"]:
                problems.append(f"{s['id']}: passage id {p['id']} has two different texts")
    for pid, text in text_of.items():
        n = len(_WORD.findall(text))
        if not min_words <= n <= max_words:
            problems.append(f"passage {pid} has {n} words (want {min_words}-{max_words})")
    problems += _check_audit(seeds, audit_path)
    problems += _check_narrative_audit(seeds, narrative_audit_path)
    problems += _check_abstract_audit(seeds, abstract_audit_path)
    problems += check_negative_audit(seeds, negative_audit_path)
    shares = style_shares(s["reference_reversal"] for s in seeds if s.get("reference_reversal"))
    problems += [
        f"reversal style {k!r} is {v:.1%} of reversals (max {MAX_STYLE_SHARE:.0%})"
        for k, v in shares.items()
        if v > MAX_STYLE_SHARE
    ]
    texts = {t.strip() for t in text_of.values()}
    folders = (
        [followir_dir] if followir_dir is not None else [f for f in EVAL_SETS.values() if Path(f).exists()]
    )
    for folder in folders:
        ev = load_followir(folder)
        for did, doc in ev.corpus.items():
            if doc["text"].strip() in texts:
                problems.append(f"{Path(folder).name}: eval doc {did} repeats a training passage")
            if did in text_of:
                problems.append(f"{Path(folder).name}: eval doc id {did} collides with a training passage id")
        problems += ev.problems
    return problems


def _audited(seeds: list[dict], audit_path: str | Path, ok: tuple[str, ...], ships: str, check) -> list[str]:
    """Problems of ``seeds`` against the verdict file ``audit_path``: a seed without a row, a
    verdict outside ``ok`` while the seed ``ships`` its text, or ``check(seed, row)`` naming one."""
    if not Path(audit_path).exists():
        return [f"{audit_path}: audit file not found"]
    verdicts = {row["id"]: (n, row) for n, row in read_jsonl(audit_path)}
    problems = []
    for s in seeds:
        n, row = verdicts.get(s["id"], (None, None))
        if row is None:
            problems.append(f"{s['id']}: not in the audit file {Path(audit_path).name}")
        elif row.get("verdict") not in ok:
            problems.append(f"{audit_path}:{n}: {s['id']} has verdict {row.get('verdict')!r} but {ships}")
        elif problem := check(s, row):
            problems.append(f"{audit_path}:{n}: {s['id']}{problem}")
    return problems


def _check_audit(seeds: list[dict], audit_path: str | Path | None) -> list[str]:
    """Every seed has an audit verdict ``pass`` or ``fixed`` naming the same target negative."""
    if audit_path is None:
        return []

    def same_target(s, row):
        if row.get("reference_negative_index") != s.get("reference_negative_index", 0):
            return " audited with another target negative"

    return _audited(seeds, audit_path, ("pass", "fixed"), "is in the seeds", same_target)


def narratives_sha256(seed: dict) -> str:
    """The hash a narrative verdict carries: it covers exactly the three texts that were reviewed."""
    return hashlib.sha256(json.dumps([seed[f] for f in NARRATIVE_FIELDS]).encode()).hexdigest()


def _check_narrative_audit(seeds: list[dict], audit_path: str | Path | None) -> list[str]:
    """Every seed that carries narratives has a ``pass`` verdict for the same texts."""
    with_narratives = [s for s in seeds if s.get("narrative")]
    if audit_path is None or not with_narratives:
        return []

    def same_text(s, row):
        if row.get("narratives_sha256") != narratives_sha256(s):
            return ": the narratives changed after their review"

    return _audited(with_narratives, audit_path, ("pass",), "ships narratives", same_text)


def _check_abstract_audit(seeds: list[dict], audit_path: str | Path | None) -> list[str]:
    """Every seed that carries an abstract reversal has a ``pass`` verdict for exactly its text."""
    with_abstract = [s for s in seeds if s.get("abstract_reversal")]
    if audit_path is None or not with_abstract:
        return []

    def same_text(s, row):
        if row.get("text_sha256") != text_sha256(s["abstract_reversal"]):
            return ": the abstract reversal changed after its review"

    return _audited(with_abstract, audit_path, ("pass",), "ships an abstract reversal", same_text)
