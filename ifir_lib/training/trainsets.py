"""Training sets for the four matched-budget configs (arXiv 2604.18845, Tables 1-2; docs/method.md §3).

Given seeds and reversals, build one list of *examples*::

    {"id", "group", "view": "orig" | "dv" | "query",
     "query", "instruction", "positive": {id, text}, "negatives": [{id, text}, ...]}

- ``orig``: (q + I, P+), negatives = instruction negatives first (N*, the one the seed's reversal
  targets, moved first of them where a cut to ``num_negatives`` would drop it), then hard negatives.
- ``dv``:   (q + I', N*), negatives = P+ and the remaining instruction negatives, then hard ones.
- ``query``: the non-instruction counterpart (q alone), negatives never the seed's instruction
  negatives: the source's own row when the seed carries one (``counterpart_positive`` and
  ``counterpart_hard_negatives``, kept from Promptriever by ``seeds.promptriever``), else built
  from the seed (``seeds.schema.counterpart``: P+ and the hard negatives). ``counts["counterparts"]``
  says how many came from the source and how many were built.

Budgets as in the paper, at one Ins-* budget B (DV samples *replace*, they do not add; All-*
hold 440k instruction samples, each with a second view, against Ins-*'s 480k):

===========  ========================================  ================
mode         content at budget B                       examples
===========  ========================================  ================
ins-orig     B seeds, original view                    B
ins-dv       B/2 seeds, original + reversed view       B
all-orig     r seeds, original + counterpart           2r (~1.83 B)
all-dv       r seeds, original + reversed view         2r (~1.83 B)
===========  ========================================  ================

with r = round(B * 440/480) (``core.config.ALL_SEED_RATIO``; ``seeds_for_budget``). Every mode
takes the first seeds of one seeded order, so Ins-DV's B/2 seeds are a prefix of All-*'s r seeds
and All-DV holds seeds Ins-DV never sees: All-DV and Ins-DV differ at any one budget B >= 2.
``budget=None`` takes as many seeds as the data allows for that mode (every usable seed; every
seed for ins-orig) and records the budget that matches it; at None All-DV and Ins-DV both hold
every usable seed in both views, so name a budget to compare them.

Instruction forms: a ``narrative_share`` of the seeds that carry narratives are drawn into
narrative form, the same seed in the same form in every mode (``instruction_forms``).

Seeds whose reversal was declined, rejected, or rejected by a curator are excluded from every mode
but ins-orig (which tops up with them) and counted. So are seeds whose reversals in a synthesis file
were all written for an earlier version of the seed (``match_reversals``: ``seed_sha`` or
``negative_id`` differ; counted as ``reversals_stale``, with reversals naming no seed as
``reversals_unmatched``, and warned about). A mode left with no usable seed is a ``ConfigError``
saying why, never a set of 0 examples. Not handled here: tokenisation, batching (``train``).
"""

from __future__ import annotations

import functools
import hashlib
import json
import logging
import random
from dataclasses import dataclass, field
from pathlib import Path

from ..core.config import ABLATIONS, ALL_SEED_RATIO, MODES, NEGATIVE_AUDIT_PATH, data_mode
from ..core.errors import ConfigError, DataError
from ..core.jsonl import read_jsonl, write_jsonl
from ..core.models import format_query
from ..curation.decisions import CurationCheck
from ..seeds.forms import NARRATIVE_SHARE, drawn_narrative, in_form
from ..seeds.mining import same_query_passages
from ..seeds.negative_audit import dropped_texts, text_sha256
from ..seeds.schema import (
    VERSION_FIELDS,
    check_unique_ids,
    counterpart,
    load_seeds,
    normalized_text,
    passage_text_clashes,
    written_for,
)
from ..synthesis.checks import unusable
from ..synthesis.template import template_reversal

log = logging.getLogger(__name__)


@dataclass
class TrainSet:
    """One mode's examples: ``examples`` (a list) for seed lists; for ``ArrowSeeds``, ``examples`` is
    None and the examples live in the memory-mapped ``path``. ``dataset`` is what the trainer takes."""

    mode: str
    examples: list[dict] | None
    counts: dict = field(default_factory=dict)
    num_negatives: int = 30
    path: Path | None = None
    sha256: str | None = None
    _dataset: object = field(default=None, repr=False)

    def __len__(self) -> int:
        return len(self.examples) if self.examples is not None else len(self.dataset)

    @property
    def dataset(self):
        """A ``datasets.Dataset`` in the trainer's columns (``query, positive, negative_1..k, label``)."""
        if self._dataset is None:
            self._dataset = to_dataset(self.examples, self.num_negatives)
        return self._dataset

    def manifest(self) -> dict:
        """Counts plus a content hash, written next to every run."""
        sha = self.sha256
        if self.examples is not None:
            h = hashlib.sha256()
            for ex in self.examples:
                h.update(json.dumps(ex, sort_keys=True).encode())
            sha = h.hexdigest()
        return {"mode": self.mode, "examples": len(self), "sha256": sha, **self.counts}


def reversals_from_reference(seeds: list[dict]) -> dict[str, dict]:
    """``{seed_id: {"reversal", "negative_index"}}`` from the seeds' reference reversals; N* is the
    negative each seed names in ``reference_negative_index`` (0 when absent)."""
    return {
        s["id"]: {
            "reversal": s["reference_reversal"],
            "negative_index": int(s.get("reference_negative_index") or 0),
        }
        for s in seeds
        if s.get("reference_reversal")
    }


def load_reversals(path: str | Path, counts: dict | None = None) -> dict[str, dict]:
    """Accepted reversals from a synthesis output file; declined/rejected/failed are counted.

    ``{seed_id: {"reversal", "negative_index", "seed_sha", "negative_id", "file", "line"}}``:
    ``seed_sha`` (``seeds.schema.seed_fingerprint``) and ``negative_id`` say which version of the
    seed and which N* the reversal was written for (None in rows written before they existed).
    With several accepted rows per seed (``--negative all``, or a row redone after its seed was
    edited) the first is the entry and the later ones are in its ``"later"`` list;
    ``build_trainset`` takes the one with the lowest N* index written for the current seed
    (``match_reversals``). A ``reversal`` that is not a string is a ``DataError``.
    ``seed_id`` must be a string and ``negative_index`` a whole number >= 0, else a ``DataError``.
    """
    out, counts = _Reversals(), counts if counts is not None else {}
    out.source = str(path)
    for n, row in read_jsonl(path):  # line by line: a million rows need not fit in memory
        for f in ("seed_id", "status"):
            if f not in row:
                raise DataError(path, n, "missing", f)
        if not isinstance(row["seed_id"], str):
            raise DataError(path, n, f"must be a string (a seed's id), got {row['seed_id']!r}", "seed_id")
        status = row["status"]
        if status != "accepted":
            counts[f"reversals_{status}"] = counts.get(f"reversals_{status}", 0) + 1
            continue
        if not row.get("reversal"):
            raise DataError(path, n, "accepted row without a reversal", "reversal")
        if not isinstance(row["reversal"], str):
            raise DataError(
                path, n, f"must be a string (an instruction), got {row['reversal']!r:.80}", "reversal"
            )
        rev = _reversal_entry(path, n, row)
        first = out.setdefault(row["seed_id"], rev)
        if first is not rev:
            first.setdefault("later", []).append(rev)
    return out


def _reversal_entry(path, n: int, row: dict) -> dict:
    """One accepted row as a reversal entry; its ``negative_index`` and identity fields checked."""
    k = row.get("negative_index", 0)  # rows of early versions had none: N* was the first negative
    if not isinstance(k, int) or isinstance(k, bool) or k < 0:
        raise DataError(
            path,
            n,
            f"must be a whole number >= 0 (an index into the seed's instruction_negatives), got {k!r}",
            "negative_index",
        )
    for f in ("seed_sha", "negative_id"):
        if row.get(f) is not None and not isinstance(row[f], str):
            raise DataError(path, n, f"must be a string or absent, got {row[f]!r}", f)
    return {
        "reversal": row["reversal"],
        "negative_index": k,
        "seed_sha": row.get("seed_sha"),
        "negative_id": row.get("negative_id"),
        "file": str(path),
        "line": n,
    }


class _Reversals(dict):
    """``load_reversals``' result: ``{seed_id: reversal}`` and ``source``, the file it was read from."""

    source: str


class MatchedReversals(_Reversals):
    """``{seed_id: reversal}`` checked against the seeds by ``match_reversals``: each seed's entry is
    one written for the seed as it is now. ``counts`` holds ``reversals_stale`` and
    ``reversals_unmatched`` (when not 0), ``source`` names the reversals (a file)."""

    counts: dict


def match_reversals(seeds, reversals: dict[str, dict], seeds_name: str = "the seeds") -> MatchedReversals:
    """The reversals usable with ``seeds`` now: for each seed the accepted entry with the lowest
    ``negative_index`` (the first in file order on a tie; rows arrive in the order the LLM answers,
    so file order would change between two identical runs) whose ``seed_sha`` equals
    ``seed_fingerprint(seed, negative_index)``, whose ``negative_id`` is the id of that instruction
    negative, and whose text is not the seed's instruction (``normalized_text``: counted as
    ``reversals_copy_of_instruction`` and named in a warning). A missing ``seed_sha`` or
    ``negative_id`` (rows of earlier versions, reversals built in Python) is not checked: only
    that the index is one of the seed's negatives. Seeds whose every entry fails are *stale* (the
    seed was edited, its negatives reordered, or the rows belong to another seed file with the
    same ids): not trained, counted, and named in one warning, as are reversals naming no seed.

    An index past the seed's negatives in an entry without ``seed_sha``/``negative_id`` is a
    ``DataError`` (file and line; a ``ConfigError`` for entries built in Python); with them it is
    stale (the seed has fewer negatives than when the reversal was written).
    """
    arrow = hasattr(seeds, "arrow_column")
    ids = seeds.column("id") if arrow else [s["id"] for s in seeds]
    known = set(ids)
    out = MatchedReversals()
    out.source = getattr(reversals, "source", None) or "the reversals given"
    stale, copies, unfit = [], [], []
    for seed in _seeds_named(seeds, ids, arrow, reversals):
        rev, why = _pick(seed, _entries(reversals[seed["id"]]))
        if rev is not None:
            out[seed["id"]] = {k: v for k, v in rev.items() if k != "later"}
        else:
            {"stale": stale, "copy": copies, "unfit": unfit}[why[0]].append(why[1])
    _warn_unusable(out.source, unfit, copies)
    unmatched = [sid for sid in reversals if sid not in known]

    def rows(sids) -> int:  # accepted rows, several per seed with --negative all
        return sum(len(_entries(reversals[sid])) for sid in sids)

    named = (("reversals_stale", len(stale)), ("reversals_unmatched", rows(unmatched)))
    named += (("reversals_copy_of_instruction", len(copies)), ("reversals_failing_checks", len(unfit)))
    out.counts = {k: v for k, v in named if v}
    if stale:
        log.warning(
            "the reversals in %s of %d seeds in %s were written for an earlier version of the seed (its "
            "query, instruction, positive or N* changed since: seed_sha or negative_id differs), e.g. %s: "
            "stale, not trained; redo them with `ifir synthesize` on these seeds",
            out.source,
            len(stale),
            seeds_name,
            ", ".join(stale[:5]),
        )
    if unmatched:
        log.warning(
            "%d of the %d reversals in %s name no seed in %s (e.g. %s): not used; are they from another seed file?",
            out.counts["reversals_unmatched"],
            rows(reversals),
            out.source,
            seeds_name,
            ", ".join(unmatched[:5]),
        )
    return out


def _pick(seed: dict, entries: list[dict]) -> tuple[dict | None, tuple[str, str] | None]:
    """``(entry, None)``: the entry ``match_reversals`` trains for ``seed`` (the lowest N* index
    among those written for it now that pass ``checks.unusable`` and are not its instruction; the
    first on a tie: rows arrive in the order the LLM answers); else ``(None, (kind, said))`` with
    kind ``stale``, ``unfit`` or ``copy``."""
    current = [r for r in entries if _written_for(seed, r)]
    if not current:
        return None, ("stale", seed["id"])
    fit = [r for r in current if not unusable(str(r["reversal"]))]
    if not fit:
        r = current[0]
        text = str(r["reversal"])
        return None, ("unfit", f"{seed['id']} ({_where(r)}: {unusable(text)}, {text[:30]!r})")
    instruction = normalized_text(seed["instruction"])
    usable = [r for r in fit if normalized_text(str(r["reversal"])) != instruction]
    if not usable:
        return None, ("copy", f"{seed['id']} ({_where(current[0])})")
    return min(usable, key=lambda r: r.get("negative_index", 0)), None


def _warn_unusable(source: str, unfit: list[str], copies: list[str]) -> None:
    """``match_reversals``' warnings for entries that fail today's checks or are the instruction."""
    if unfit:
        log.warning(
            "%d accepted reversal(s) in %s fail today's checks (written before them, or by hand): not "
            "trained, e.g. %s",
            len(unfit),
            source,
            "; ".join(unfit[:3]),
        )
    if copies:
        log.warning(
            "%d reversal(s) in %s are the seed's own instruction (case, spacing and quotes aside), so both "
            "views would hold one query with swapped labels: not trained, e.g. %s",
            len(copies),
            source,
            "; ".join(copies[:3]),
        )


def _where(rev: dict) -> str:
    """``file:line`` of an entry read from a file, else ``'given in Python'``."""
    return f"{rev['file']}:{rev['line']}" if rev.get("file") else "given in Python"


def _entries(rev: dict) -> list[dict]:
    """A seed's accepted entries in file order: the first, then its ``"later"`` ones."""
    return [rev, *rev.get("later", ())]


def _seeds_named(seeds, ids, arrow, reversals):
    """The seed dicts whose ids ``reversals`` names, in seed order (from Arrow: only those rows, and
    only the columns a seed's version depends on)."""
    if not arrow:
        return (s for s in seeds if s["id"] in reversals)
    named = seeds.take([n for n, sid in enumerate(ids) if sid in reversals])
    return (s for batch in named.iter_batches(columns=VERSION_FIELDS) for s in batch)


def _written_for(seed: dict, rev: dict) -> bool:
    """Whether ``rev`` was written for ``seed`` as it is now (``match_reversals``)."""
    idx, negs = rev.get("negative_index", 0), seed["instruction_negatives"]
    checked = rev.get("seed_sha") is not None or rev.get("negative_id") is not None
    if not isinstance(idx, int) or not 0 <= idx < len(negs):
        if checked:
            return False  # the seed lost negatives since the reversal was written: stale
        what = f"names instruction negative {idx!r} of seed {seed['id']!r}, which has {len(negs)}"
        if rev.get("file"):
            raise DataError(rev["file"], rev.get("line"), what, "negative_index")
        raise ConfigError(f"a reversal {what}")
    return written_for(rev, seed)


def _check_arrow_passages(seeds) -> None:
    """A ``DataError`` when the Arrow seeds' source gave a passage id two texts (``meta.json``'s
    ``passage_text_clashes``): the first text was kept, so a later seed holds another seed's
    passage, which the list path refuses too."""
    meta = Path(seeds.folder or "") / "meta.json"
    n = json.loads(meta.read_text()).get("passage_text_clashes", 0) if meta.is_file() else 0
    if n:
        raise DataError(
            meta,
            None,
            f"{n} passage id(s) came with two texts in the source and keep their first, so some seeds "
            "hold another seed's passage; give each text its own id in the source and convert again",
            "passage_text_clashes",
        )


def _fill(
    negatives: list[dict], k: int, pool: list[dict], exclude: list[dict], rng: random.Random
) -> list[dict]:
    """Cut or pad ``negatives`` to exactly ``k``: listed ones first, then random corpus passages.

    Instruction negatives come first in ``negatives`` so cutting keeps them (the paper keeps 1-3
    instruction negatives among its 30). A passage of ``exclude`` (the positive, or what answers
    the query) is never a negative: not by its id, and not by its text under another id, however
    spelled (``normalized_text``: one passage exported per seed under new ids, re-spaced or
    re-cased). ``pool`` may be one seed's ``_Avoiding`` view, which reads as None what that seed
    must not be padded with.
    """
    seen, texts = {p["id"] for p in exclude}, {_normalized(p["text"]) for p in exclude}
    out = [p for p in negatives if p["id"] not in seen and _normalized(p["text"]) not in texts][:k]
    seen |= {p["id"] for p in out}
    tries = 0
    while len(out) < k and tries < 50 * k:
        p = pool[rng.randrange(len(pool))]  # None: a passage this seed must not be padded with
        tries += 1
        if p is not None and p["id"] not in seen and _normalized(p["text"]) not in texts:
            out.append(p)
            seen.add(p["id"])
    if len(out) < k:
        raise _ShortPool(
            f"cannot find {k} distinct negatives: only {len(out)} found among the {len(pool)} passages the "
            "seeds hold to pad from; use fewer negatives (--num-negatives) or more seeds"
        )
    return out


# ``normalized_text`` of passages, which recur across seeds, views and pool draws (~20x a strip)
_normalized = functools.lru_cache(maxsize=1 << 16)(normalized_text)


class _Avoiding:
    """One seed's view of the padding pool: a passage of a seed with the same query (it answers the
    bare query: ``seeds.mining.same_query_passages``, the rule mining uses) or one the hard-negative
    audit dropped for this seed (relevant under I or I') reads as None, and ``_fill`` draws again,
    as for its positive. Without it, 25 random draws of 30 bring back what reviewers removed."""

    def __init__(self, pool, texts: set[str], shas: set[str]):
        self.pool, self.texts, self.shas = pool, texts, shas

    def __len__(self) -> int:
        return len(self.pool)

    def __getitem__(self, j: int) -> dict | None:
        p = self.pool[j]
        if _normalized(p["text"]) in self.texts or (self.shas and text_sha256(p["text"]) in self.shas):
            return None
        return p


def _padding_avoid(seeds, ids: list[str], arrow: bool, negative_audit) -> dict[str, tuple[set, set]]:
    """``{seed id: (normalised texts, text sha256s)}`` that random padding must not give the seed
    (``_Avoiding``), for the seeds that have any: the positives and instruction negatives of seeds
    with its normalised query (only those seeds are read, one ``take`` from Arrow), and the hard
    negatives ``negative_audit`` (a ``hard_negative_audit.jsonl``; None: no audit) dropped for it."""
    queries = seeds.column("query") if arrow else [s["query"] for s in seeds]
    norms = [normalized_text(q) for q in queries]
    sizes: dict[str, int] = {}
    for q in norms:
        sizes[q] = sizes.get(q, 0) + 1
    shared = [n for n, q in enumerate(norms) if sizes[q] > 1]
    group = same_query_passages(
        seeds.take(shared) if arrow else (seeds[n] for n in shared), lambda p: _normalized(p["text"])
    )
    out = {ids[n]: (set(group[norms[n]]), set()) for n in shared}
    if negative_audit is not None:
        if not Path(negative_audit).is_file():
            raise ConfigError(f"hard-negative audit {negative_audit} not found (negative_audit)")
        known = set(ids)
        for sid, shas in _dropped(str(negative_audit), Path(negative_audit).stat().st_mtime_ns).items():
            if sid in known:
                out.setdefault(sid, (set(), set()))[1].update(shas)
    return out


@functools.lru_cache(maxsize=4)
def _dropped(path: str, mtime_ns: int) -> dict[str, set[str]]:
    """``negative_audit.dropped_texts``, read once per file version (every build reads the audit)."""
    return dropped_texts(path)


class _ShortPool(ValueError):
    """``_fill`` ran out of passages; ``build_trainset`` names the seeds and the seed."""

    seed_id: str | None = None


def _example(seed, view, instruction, positive, negatives, k, pool, rng) -> dict:
    """One training example of ``seed``; ``negatives`` cut or padded to ``k`` (never the positive)."""
    return {
        "id": f"{seed['id']}::{view}",
        "group": seed["id"],
        "view": view,
        "query": seed["query"],
        "instruction": instruction,
        "positive": positive,
        "negatives": _fill(negatives, k, pool, [positive], rng),
    }


def _cut_drops(j: int | None, k: int, n: int) -> bool:
    """Whether a cut to ``k`` of ``n`` negatives drops the one at index ``j`` (N*)."""
    return j is not None and k <= j < n


def n_star_first(negatives, j: int | None, k: int) -> list:
    """``negatives`` with N* (index ``j``) moved first where a cut to ``k`` would drop it; otherwise
    in their order, so a set whose cut keeps N* keeps its examples and data sha."""
    negs = list(negatives)
    if _cut_drops(j, k, len(negs)):
        negs.insert(0, negs.pop(j))
    return negs


def _orig(seed, k, pool, rng, n_star: int | None = None):
    """The original view; ``n_star`` (the reversal's ``negative_index``) puts N* first among the
    instruction negatives when a cut to ``k`` would drop it, so the view keeps the pair the reversed
    view swaps (in seed order, k=1 trained P+ against in1 while the dv view made in2 relevant).
    Where the cut keeps it, the order stays the seed's: the same examples, and the same data sha,
    as runs made before (the loss does not read the order)."""
    negs = n_star_first(seed["instruction_negatives"], n_star, k) + list(seed["hard_negatives"])
    return _example(seed, "orig", seed["instruction"], seed["positive"], negs, k, pool, rng)


def _aug(seed, k, pool, rng, n_star: int | None = None):
    """The wording control: the original view under ``aug_instruction`` (same labels, same negatives)."""
    ex = _orig(seed, k, pool, rng, n_star)
    return {**ex, "id": seed["id"] + "::aug", "view": "aug", "instruction": seed["aug_instruction"]}


def _dv(seed, rev, k, pool, rng):
    idx = rev.get("negative_index", 0)
    if not 0 <= idx < len(seed["instruction_negatives"]):
        raise ValueError(
            f"seed {seed['id']}: reversal names instruction negative {idx}, seed has {len(seed['instruction_negatives'])}"
        )
    n_star = seed["instruction_negatives"][idx]
    others = [p for i, p in enumerate(seed["instruction_negatives"]) if i != idx]
    negs = [seed["positive"]] + others + list(seed["hard_negatives"])
    return _example(seed, "dv", rev["reversal"], n_star, negs, k, pool, rng)


def _query(seed, k, pool, rng):
    """The bare-query view: the source's non-instruction row when the seed carries it
    (``counterpart_positive``, ``counterpart_hard_negatives``), else ``schema.counterpart(seed)``."""
    if seed.get("counterpart_positive"):
        c = {
            "id": seed["id"] + "::q",
            "query": seed["query"],
            "positive": seed["counterpart_positive"],
            "negatives": list(seed.get("counterpart_hard_negatives") or []),
        }
    else:
        c = counterpart(seed)
    # P+ and the instruction negatives answer the bare query too: never sample them as negatives
    exclude = [seed["positive"], c["positive"], *seed["instruction_negatives"]]
    return {
        "id": c["id"],
        "group": seed["id"],
        "view": "query",
        "query": c["query"],
        "instruction": "",
        "positive": c["positive"],
        "negatives": _fill(c["negatives"], k, pool, exclude, rng),
    }


def _pool(seeds, arrow: bool):
    """The passages that pad negatives: every seed's positive and hard negatives, in seed order
    (duplicates kept, so a passage is drawn as often as the seeds name it)."""
    if not arrow:
        return [p for s in seeds for p in (s["positive"], *s["hard_negatives"])]
    import numpy as np

    pos = seeds.arrow_column("positive").to_numpy()
    hard = seeds.arrow_column("hard_negatives").combine_chunks()
    lens = np.diff(hard.offsets.to_numpy()) + 1
    rows = np.empty(int(lens.sum()), dtype=np.int64)
    starts = np.concatenate([[0], np.cumsum(lens)[:-1]]).astype(np.int64)
    mask = np.ones(len(rows), dtype=bool)
    mask[starts] = False
    rows[starts], rows[mask] = pos, hard.flatten().to_numpy()
    return _ArrowPool(seeds, rows)


class _ArrowPool:
    """``pool[j]`` -> ``{"id", "text"}``, read from the passages table on demand."""

    def __init__(self, seeds, rows):
        self.seeds, self.rows = seeds, rows

    def __len__(self) -> int:
        return len(self.rows)

    def __getitem__(self, j: int) -> dict:
        return self.seeds.passage(int(self.rows[j]))


def _abstract_reversals(seeds, ids: list[str], arrow: bool) -> dict[str, dict]:
    """The seeds' abstract reversals (docs/method.md §2, reversal styles), same N* as the reference
    one; seeds without one are not usable in this mode."""
    if arrow:
        if "abstract_reversal" not in seeds.seeds.column_names:
            raise ConfigError("mode ins-dv-abstract: these Arrow seeds have no abstract_reversal column")
        rows = zip(ids, seeds.column("abstract_reversal"), seeds.column("reference_negative_index"))
    else:
        rows = ((s["id"], s.get("abstract_reversal"), s.get("reference_negative_index")) for s in seeds)
    return {i: {"reversal": r, "negative_index": int(k or 0)} for i, r, k in rows if r}


def _reversals_for(mode: str, seeds, ids: list[str], arrow: bool, reversals, seeds_name: str):
    """The template baseline's reversals, the seeds' abstract or reference ones, or ``reversals``
    (those written for the seeds as they are now: ``match_reversals``). The two ablations with a
    reversal source of their own warn when ``reversals`` are given: they are not used."""
    own = ABLATIONS.get(mode, {}).get("reversals")
    if own is not None and reversals is not None:
        log.warning(
            "%s trains %s: the reversals given (%s) are not used for it (an abstract synthesis "
            "file trains as --mode ins-dv)",
            mode,
            "the template's negation of each instruction"
            if own == "template"
            else "the seeds' own abstract_reversal field",
            getattr(reversals, "source", None) or "given in Python",
        )
    if own == "template":
        instructions = seeds.column("instruction") if arrow else (s["instruction"] for s in seeds)
        return {i: {"reversal": template_reversal(x), "negative_index": 0} for i, x in zip(ids, instructions)}
    if own == "abstract":
        return _abstract_reversals(seeds, ids, arrow)
    if reversals is not None:
        if isinstance(reversals, MatchedReversals):
            return reversals
        return match_reversals(seeds, reversals, seeds_name)
    if not arrow:
        return reversals_from_reference(seeds)
    cols = zip(ids, seeds.column("reference_reversal"), seeds.column("reference_negative_index"))
    return reversals_from_reference(
        {"id": i, "reference_reversal": r, "reference_negative_index": k} for i, r, k in cols
    )


def build_trainset(
    mode: str,
    seeds,
    reversals: dict[str, dict] | None = None,
    *,
    budget: int | None = None,
    num_negatives: int = 30,
    curation: dict[str, str] | None = None,
    rng_seed: int = 0,
    out_dir: str | Path | None = None,
    narrative_share: float = NARRATIVE_SHARE,
    seeds_name: str | None = None,
    negative_audit: str | Path | None = NEGATIVE_AUDIT_PATH,
) -> TrainSet:
    """Build the examples for one ``mode`` at a matched ``budget`` (default: as many as the data allows).

    Example: 200 seeds, all with reversals, ``budget=96`` -> ins-orig: 96 seeds x 1 view;
    ins-dv: 48 seeds x 2 views; all-orig and all-dv: the same 88 seeds (96 x 440/480, the first
    48 being ins-dv's) x 2 views = 176 examples. The seed order is drawn with ``rng_seed``.
    ``narrative_share``: the share of seeds with narratives put in narrative form (see the module
    docstring). ``counts`` (and the manifest) record ``budget``, ``seeds_used`` and the views.

    ``seeds``: a list of seed dicts, a seed JSONL path, or ``arrow_seeds.ArrowSeeds``. From
    ``ArrowSeeds`` the examples stream into ``out_dir/trainset-<mode>.arrow`` (memory-mapped,
    ``TrainSet.examples`` is None); the same seeds give the same examples as from a list.
    ``seeds_name`` names the seeds in errors and warnings (default: the path, or "the seeds").
    ``reversals`` (``load_reversals``) are checked against the seeds (``match_reversals``; pass
    its result to check once for several modes); stale ones and ones naming no seed are counted.
    Random padding never gives a seed a passage of a seed with its query, nor a hard negative
    ``negative_audit`` (default: the bundled audit; None: none) dropped for it (``_padding_avoid``).
    No usable seed, too few passages to pad, or a seed id given twice is a ``ConfigError``.
    """
    if mode not in MODES:
        raise ConfigError(f"unknown mode {mode!r}; choose from {', '.join(MODES)}")
    if not 0 <= narrative_share <= 1:
        raise ConfigError(f"narrative_share must be between 0 and 1, got {narrative_share}")
    arrow = hasattr(seeds, "arrow_column")  # ArrowSeeds: read column by column, never every row
    if seeds_name is None:
        seeds_name = str(seeds.folder) if arrow else "the seeds" if isinstance(seeds, list) else str(seeds)
    if isinstance(seeds, list):  # a file's seeds are checked by load_seeds; a list from Python here
        for err in passage_text_clashes(enumerate(seeds, 1), seeds_name):
            raise err
    elif arrow:
        _check_arrow_passages(seeds)
    else:
        seeds = load_seeds(seeds, stage="train")
    if arrow and out_dir is None:
        raise ConfigError("build_trainset from ArrowSeeds needs out_dir for the examples file")
    ids = seeds.column("id") if arrow else [s["id"] for s in seeds]
    check_unique_ids(ids, seeds_name)  # a file's seeds were checked by load_seeds
    reversals = _reversals_for(mode, seeds, ids, arrow, reversals, seeds_name)
    name, mode = mode, data_mode(mode)
    counts = {"seeds": len(seeds), **getattr(reversals, "counts", {})}
    usable = _usable(mode, seeds, ids, arrow, reversals, curation or {}, counts)
    if not usable and (mode != "ins-orig" or not ids):
        raise ConfigError(_none_usable(name, counts, seeds_name, reversals))
    chosen, budget = _choose(mode, ids, usable, budget, rng_seed, counts)
    if not chosen:
        raise ConfigError(f"budget {budget} takes no seeds for {name}; name a budget of at least 2")
    del usable
    pools = (_pool(seeds, arrow), _padding_avoid(seeds, ids, arrow, negative_audit))
    if arrow:
        from .examples_arrow import ExampleWriter

        writer = ExampleWriter(Path(out_dir) / f"trainset-{name}.arrow", num_negatives)
        add, chosen_seeds = writer.add, iter(seeds.take(chosen))
    else:
        examples = []
        add, chosen_seeds = examples.append, (seeds[n] for n in chosen)
    try:
        tally = _add_examples(
            name, chosen_seeds, reversals, pools, add, num_negatives, narrative_share, rng_seed
        )
    except _ShortPool as e:
        raise ConfigError(f"{seeds_name}: seed {e.seed_id!r}: {e}") from None
    counts.update({"budget": budget, "seeds_used": len(chosen), **tally})
    if not arrow:
        return TrainSet(name, examples, counts, num_negatives)
    ds, sha = writer.close()
    return TrainSet(name, None, counts, num_negatives, writer.path, sha, ds)


def _warn_narrative_unavailable(name: str, n: int, forms: dict, share: float, reversals) -> None:
    """Warn that ``n`` seeds of ``name`` drawn into narrative form train short, both views, because
    their reversals (abstract, template, synthesized) have no narrative. Only this mode is named:
    whether another mode differs depends on its reversals (``pipelines.train`` compares the modes
    it builds together, ``warn_forms_differ``)."""
    source = getattr(reversals, "source", None) or ABLATIONS.get(name, {}).get("reversals", "given")
    log.warning(
        "%s: %d of the %d seeds drawn into narrative form (narrative_share %s) train in short form, "
        "both views: their reversals (%s) have no narrative",
        name,
        n,
        n + forms["narrative"],
        share,
        source,
    )


def _orig_differs(seed: dict, k: int) -> bool:
    """Whether the template's original view (N* = instruction negative 0) differs from Ins-DV's
    (N* = the reference one, moved first where a cut to ``k`` would drop it)."""
    return _cut_drops(seed.get("reference_negative_index", 0), k, len(seed["instruction_negatives"]))


def _warn_template_orig(name: str, n: int, seeds: int, k: int) -> None:
    """Warn that ``n`` of ``seeds`` train another original view than Ins-DV's: the template's
    reversal targets instruction negative 0, Ins-DV's the reference N*, and a cut to ``k`` keeps one."""
    log.warning(
        "%s: %d of its %d seeds train another original view than ins-dv (num_negatives %d keeps "
        "instruction negative 0, the template's N*, where ins-dv keeps the reference N*): the ablation "
        "changes the original view too; give num_negatives above the seeds' reference_negative_index",
        name,
        n,
        seeds,
        k,
    )


def _warn_aug_style(name: str, n: int, seeds: int, reversals) -> None:
    """Warn that ``n`` of ins-aug's ``seeds`` take a reversal (a synthesis file's) other than their
    reference one: the aug view rewords I in the reference reversal's style (``aug_instruction``),
    so for them it is not the wording control of the reversal Ins-DV trains on the same file."""
    log.warning(
        "%s: %d of its %d seeds have a reversal in %s other than their reference reversal, whose style "
        "their aug view (aug_instruction) mirrors: for them %s is not the wording control of what "
        "ins-dv trains on that file",
        name,
        n,
        seeds,
        getattr(reversals, "source", None) or "the reversals given",
        name,
    )


def warn_forms_differ(counts: dict[str, dict]) -> None:
    """Given ``{mode: TrainSet.counts}`` of modes built together, warn when some train seeds drawn
    into narrative form short (``narrative_unavailable``) while others train theirs as narratives:
    comparing them also compares instruction forms. Modes that all agree are not warned about."""
    short = {m: c["narrative_unavailable"] for m, c in counts.items() if c.get("narrative_unavailable")}
    narr = [m for m, c in counts.items() if m not in short and c.get("forms", {}).get("narrative")]
    if short and narr:
        log.warning(
            "%s train%s seeds drawn into narrative form in short form (%s; their reversals have no "
            "narrative) where %s train%s them as narratives: comparing them also compares instruction "
            "forms; give every mode narrative_share 0 to compare the reversals alone",
            ", ".join(short),
            "s" if len(short) == 1 else "",
            ", ".join(f"{m}: {n} seeds" for m, n in short.items()),
            ", ".join(narr),
            "s" if len(narr) == 1 else "",
        )


def _none_usable(mode, counts, seeds_name, reversals) -> str:
    """Why ``mode`` has no usable seed, for the ``ConfigError``: reversals that name no seed, no
    reversals at all, or seeds without a (current) reversal or curated out."""
    head = f"0 usable seeds for {mode} among the {counts['seeds']} in {seeds_name}"
    if data_mode(mode) == "ins-aug":
        head += " (the wording control needs a reversal and an aug_instruction)"
    stale = ""
    if isinstance(reversals, MatchedReversals):
        if not reversals and not counts.get("reversals_stale") and not counts.get("reversals_unmatched"):
            return f"{head}: {reversals.source} holds no accepted reversal"
        if not reversals and not counts.get("reversals_stale"):
            return (
                f"{head}: none of the {counts.get('reversals_unmatched', 0)} accepted reversals in "
                f"{reversals.source} names a seed there (reversals from another seed file?)"
            )
        stale = counts.get("reversals_stale", 0)
        stale = f" ({stale} of them with only stale ones, written for an earlier version of the seed)"
    elif not reversals and ABLATIONS.get(mode, {}).get("reversals") == "abstract":
        return f"{head}: no seed has an abstract_reversal, the field this mode trains (never --reversals)"
    elif not reversals:
        return (
            f"{head}: no seed has a reversal for this mode; give reversals (--reversals: a synthesis output)"
        )
    return (
        f"{head}: {counts.get('no_reversal', 0)} without a current accepted reversal{stale}, "
        f"{counts.get('curated_out', 0)} curated out"
    )


def _usable(mode, seeds, ids, arrow, reversals, curation, counts) -> list[int]:
    """Positions of the seeds ``mode`` can use: a reversal (and, for the wording control, a
    reworded instruction) and no curation rejection; ``counts`` tallies the others."""
    aug = seeds.column("aug_instruction") if arrow else [s.get("aug_instruction") for s in seeds]
    usable, check = [], CurationCheck(curation)
    for n, sid in enumerate(ids):
        rev = reversals.get(sid)
        rejected = check.rejects(sid, rev)  # decisions about this text, or old hashless ones
        if mode == "ins-aug" and rev is not None and not aug[n]:
            rev = None  # the control needs the seed's reworded instruction as well
        if rejected:
            counts["curated_out"] = counts.get("curated_out", 0) + 1
        elif rev is None:
            counts["no_reversal"] = counts.get("no_reversal", 0) + 1
        else:
            usable.append(n)
    if stale := check.warn_stale(f"mode {mode}"):
        counts["curation_stale"] = stale
    _warn_decisions_naming_no_seed(curation, ids)
    return usable


def decisions_naming_no_seed(curation, ids) -> list[str]:
    """The curation keys that name none of ``ids``: a key names a seed as its id, or as
    ``<id>#<k>`` (one of its instruction negatives)."""
    known = set(ids)

    def names_a_seed(key: str) -> bool:
        seed, _, negative = key.rpartition("#")
        return key in known or (negative.isdigit() and seed in known)

    return [str(k) for k in curation or {} if not names_a_seed(str(k))]


def check_decisions_name_seeds(curation, ids) -> None:
    """A ``ConfigError`` when no curation decision names one of ``ids`` (pass every seed, held-out
    ones included: a curation file of another seed set, or keys respelled, would train every
    rejected reversal as if curated)."""
    foreign = decisions_naming_no_seed(curation, ids)
    if curation and len(foreign) == len(curation):
        raise ConfigError(
            f"none of the {len(curation)} curation decisions names a seed of this set (keys "
            f"{', '.join(map(repr, foreign[:3]))} ...): a curation file of another seed set or run? "
            "Pass the one made for these seeds"
        )


def _warn_decisions_naming_no_seed(curation, ids) -> None:
    """One warning counting the decisions that name no seed this set trains (held-out seeds, or
    another set's): they do not apply."""
    foreign = decisions_naming_no_seed(curation, ids)
    if foreign:
        log.warning(
            "%d of %d curation decisions name no seed trained here (held-out seeds, or another "
            "set's) and do not apply: %s",
            len(foreign),
            len(curation),
            ", ".join(map(repr, foreign[:5])),
        )


def seeds_for_budget(mode: str, budget: int) -> int:
    """How many seeds ``mode`` takes at the Ins-* budget ``budget`` (the module docstring's table).

    Example: ``seeds_for_budget("ins-dv", 480)`` -> 240; ``seeds_for_budget("all-dv", 480)`` -> 440.
    """
    mode = data_mode(mode)
    if budget < 1:  # a slice [:-2] took all but 2 seeds: -1 for "no limit" trained unmatched modes
        raise ConfigError(
            f"budget {budget}: a budget is a positive number of examples (leave it out for all the data)"
        )
    if mode in ("ins-dv", "ins-aug"):
        if budget % 2:  # B // 2 seeds in two views: B - 1 examples, under a budget recorded as B
            raise ConfigError(
                f"budget {budget} is odd: {mode} trains B/2 seeds in two views, {budget - 1} examples "
                f"against Ins-orig's {budget}; give an even budget ({budget - 1} or {budget + 1})"
            )
        return budget // 2
    if mode in ("all-orig", "all-dv"):
        # round half up; 1e-9 absorbs float error (B * 440/480 is a whole number of twelfths)
        return int(budget * ALL_SEED_RATIO + 0.5 + 1e-9)
    return budget


def _budget_for_seeds(mode: str, n: int) -> int:
    """The smallest Ins-* budget at which ``mode`` takes ``n`` seeds (the budget recorded at None)."""
    if mode in ("ins-dv", "ins-aug"):
        return 2 * n
    if mode in ("all-orig", "all-dv"):
        b = max(1, int((n - 0.5) / ALL_SEED_RATIO))
        while seeds_for_budget(mode, b) < n:
            b += 1
        return b
    return n


def _even(budget: int) -> int:
    """``budget`` or the one below it: an odd budget cannot be matched by a two-view mode."""
    return budget - budget % 2


def _choose(mode, ids, usable, budget, rng_seed, counts) -> tuple[list[int], int]:
    """``(chosen positions, budget)``: the first seeds of one seeded order shared by every mode
    (so smaller budgets are prefixes of larger ones); Ins-orig tops up with seeds without reversal."""
    n_max = len(ids) if mode == "ins-orig" else len(usable)
    if budget is None:  # as much as the data allows; the Ins-* budget that matches is recorded
        budget = _budget_for_seeds(mode, n_max)
    n_seeds = seeds_for_budget(mode, budget)
    if n_seeds > n_max:
        raise ConfigError(
            f"budget {budget} needs {n_seeds} seeds for {mode}, only {n_max} usable "
            f"({counts.get('no_reversal', 0)} without an accepted reversal, {counts.get('curated_out', 0)} curated out); "
            f"budget {_even(_budget_for_seeds(mode, n_max))} fits them (even, as two-view modes need): "
            "give it to every mode"
        )

    def order(positions):
        return sorted(positions, key=lambda n: hashlib.sha256(f"{rng_seed}:{ids[n]}".encode()).digest())

    rest = []
    if mode == "ins-orig":
        taken = set(usable)
        rest = order(n for n in range(len(ids)) if n not in taken)
    return (order(usable) + rest)[:n_seeds], budget


# The views each mode's set holds (``_add_examples``): a built set read as it is is checked on them
MODE_VIEWS = {
    "ins-orig": {"orig"},
    "ins-dv": {"orig", "dv"},
    "all-orig": {"orig", "query"},
    "all-dv": {"orig", "dv"},
    "ins-aug": {"orig", "aug"},
}


def _add_examples(
    name, chosen_seeds, reversals, pools, add, num_negatives, narrative_share, rng_seed
) -> dict:
    """Each chosen seed's examples (its original view and the mode's second view) to ``add``;
    returns the tallies of views and instruction forms (``narrative_unavailable``: seeds drawn into
    narrative form that train short, warned about). ``name``: the mode or ablation. ``pools``:
    ``(pool, {seed id: (texts, shas)})``, the padding pool and what each seed must not be padded
    with (``_padding_avoid``)."""
    mode = data_mode(name)
    pool_all, avoid = pools
    rng = random.Random(rng_seed)
    views = {v: 0 for v in ("orig", "dv", "query", *(("aug",) if mode == "ins-aug" else ()))}
    forms, counterparts = {"short": 0, "narrative": 0}, {"source": 0, "built": 0}
    no_narrative = 0  # drawn into narrative form, kept short: the reversal has no narrative
    aug_other_style = 0  # ins-aug: the reversal trained is not the one aug_instruction mirrors
    other_orig = 0  # ins-dv-template: an original view other than Ins-DV's (N* is negative 0)
    for s in chosen_seeds:
        drawn = drawn_narrative(s, narrative_share, rng_seed)
        if mode == "ins-aug" and reversals.get(s["id"], {}).get("reversal") != s.get("reference_reversal"):
            aug_other_style += 1
        other_orig += name == "ins-dv-template" and _orig_differs(s, num_negatives)
        s, rev, form = in_form(s, reversals.get(s["id"]), narrative_share, rng_seed)
        forms[form] += 1
        no_narrative += drawn and form == "short"
        pool = _Avoiding(pool_all, *avoid[s["id"]]) if s["id"] in avoid else pool_all
        n_star = None if rev is None else rev.get("negative_index", 0)  # ins-orig too: one orig view
        try:
            pair = [_orig(s, num_negatives, pool, rng, n_star)]
            if mode in ("ins-dv", "all-dv"):
                pair.append(_dv(s, rev, num_negatives, pool, rng))
            elif mode == "all-orig":
                pair.append(_query(s, num_negatives, pool, rng))
                counterparts["source" if s.get("counterpart_positive") else "built"] += 1
            elif mode == "ins-aug":
                pair.append(_aug(s, num_negatives, pool, rng, n_star))
        except _ShortPool as e:
            e.seed_id = s["id"]
            raise
        for ex in pair:
            views[ex["view"]] += 1
            add(ex)
    tally = {"views": views, "forms": forms}
    if no_narrative:
        tally["narrative_unavailable"] = no_narrative
        _warn_narrative_unavailable(name, no_narrative, forms, narrative_share, reversals)
    if other_orig:
        tally["orig_not_ins_dv"] = other_orig
        _warn_template_orig(name, other_orig, views["orig"], num_negatives)
    if aug_other_style:
        tally["aug_reversal_not_reference"] = aug_other_style
        _warn_aug_style(name, aug_other_style, views["orig"], reversals)
    return {**tally, "counterparts": counterparts} if mode == "all-orig" else tally


def save_trainset(ts: TrainSet, path: str | Path) -> Path:
    """Write the examples as JSONL (atomically), one per line."""
    return write_jsonl(path, ts.examples, fsync=False)


def load_trainset(path: str | Path) -> list[dict]:
    """Read examples written by ``save_trainset``. A row lacking a positive or negatives, or a
    passage id with another text on an earlier line (two built sets concatenated, each numbering
    its passages from 0: a batch encodes each id once, so one example would train on the other's
    texts), fails with file, line and field. A row repeating an earlier one exactly (a file given
    twice) is read once, with a warning. A built example (one with a ``view``) whose id is on an
    earlier line with other content (one seed's example built twice, e.g. in two instruction forms)
    is a ``DataError``: both would train under one id. Rows of other toolkits (no ``view``) may
    share an id on purpose (one per query); rows without an id are numbered by line."""
    numbered, seen, repeats, lines, normalized = [], set(), [], {}, {}
    for n, row in read_jsonl(path):
        _check_example(path, n, row, normalized)
        content = hashlib.sha256(json.dumps(row, sort_keys=True).encode("utf-8")).digest()
        if content in seen:
            repeats.append(n)
            continue
        seen.add(content)
        if "id" in row and "view" in row and lines.setdefault(row["id"], n) != n:
            raise DataError(
                path,
                n,
                f"example id {row['id']!r} is on line {lines[row['id']]} too, with other content",
                "id",
            )
        row.setdefault("id", f"line{n}")
        row.setdefault("group", row["id"])
        row.setdefault("instruction", "")
        numbered.append((n, row))
    if not numbered:
        raise DataError(path, None, "no training examples")
    for err in passage_text_clashes(numbered, path, fields=_example_passages):
        raise err
    if repeats:
        log.warning(
            "%s: %d example(s) repeat an earlier line exactly and are read once (lines %s)",
            path,
            len(repeats),
            ", ".join(map(str, repeats[:5])) + (" ..." if len(repeats) > 5 else ""),
        )
    return [row for _, row in numbered]


def _check_example(path, n: int, row: dict, normalized: dict | None = None) -> None:
    """A ``DataError`` naming the field when a training example lacks its parts."""
    for f in ("query", "positive", "negatives"):
        if f not in row:
            raise DataError(path, n, "missing", f)
    if (
        not isinstance(row["positive"], dict)
        or not row["positive"].get("text")
        or not row["positive"].get("id")
    ):
        raise DataError(path, n, "must be an object with 'id' and 'text'", "positive")
    if not isinstance(row["negatives"], list) or not row["negatives"]:
        raise DataError(path, n, "must be a non-empty list of {id, text}", "negatives")
    pid, text = row["positive"]["id"], row["positive"]["text"]
    for i, p in enumerate(row["negatives"]):
        if not isinstance(p, dict) or not p.get("text") or not p.get("id"):
            raise DataError(path, n, "needs 'id' and 'text'", f"negatives[{i}]")
        if p["id"] == pid or _same_text(p["text"], text, {} if normalized is None else normalized):
            what = "id" if p["id"] == pid else "text"
            raise DataError(
                path,
                n,
                f"is the positive (its {what}): one passage on both sides of the loss",
                f"negatives[{i}]",
            )


def _same_text(a: str, b: str, normalized: dict) -> bool:
    """``normalized_text(a) == normalized_text(b)``, each text normalised once per file
    (``normalized``: a borrowed negative is in many rows): a million rows of 30 negatives each
    are checked in minutes, not hours."""
    if a == b:
        return True
    if len(normalized) > 1_000_000:  # bounded: a file of unique negatives gains nothing from it
        normalized.clear()
    for t in (a, b):  # a short digest per text (the rows hold the texts already)
        if t not in normalized:
            normalized[t] = hashlib.blake2b(normalized_text(t).encode(), digest_size=8).digest()
    return normalized[a] == normalized[b]


def _example_passages(row: dict):
    """A training example's passages with their fields: ``positive``, ``negatives[i]``."""
    yield "positive", row["positive"]
    for i, p in enumerate(row["negatives"]):
        yield f"negatives[{i}]", p


# ---------------------------------------------------------------------------------------------
# Examples -> a datasets.Dataset with integer id labels (what the trainer takes)


def encode_ids(examples: list[dict]) -> list[list[int]]:
    """Label rows ``[group, query, positive_doc, negative_doc_1, ...]`` as integers.

    The loss deduplicates documents by these ids; the sampler groups by the first two.
    Ids are assigned in sorted order, so the same examples always get the same integers.
    """
    groups = {g: i for i, g in enumerate(sorted({e["group"] for e in examples}))}
    queries = {
        q: i for i, q in enumerate(sorted({format_query(e["query"], e["instruction"]) for e in examples}))
    }
    docs = {
        d: i
        for i, d in enumerate(sorted({p["id"] for e in examples for p in (e["positive"], *e["negatives"])}))
    }
    return [
        [
            groups[e["group"]],
            queries[format_query(e["query"], e["instruction"])],
            docs[e["positive"]["id"]],
            *(docs[p["id"]] for p in e["negatives"]),
        ]
        for e in examples
    ]


def to_dataset(examples: list[dict], num_negatives: int, with_labels: bool = True):
    """Columns ``query, positive, negative_1..k`` (+ ``label``); every row must have k negatives."""
    from datasets import Dataset

    bad = [e["id"] for e in examples if len(e["negatives"]) < num_negatives]
    if bad:
        raise ValueError(
            f"{len(bad)} examples have fewer than {num_negatives} negatives (e.g. {bad[0]}); "
            "rebuild the training set with the same num_negatives"
        )
    cols = {
        "query": [format_query(e["query"], e["instruction"]) for e in examples],
        "positive": [e["positive"]["text"] for e in examples],
    }
    for j in range(num_negatives):
        cols[f"negative_{j + 1}"] = [e["negatives"][j]["text"] for e in examples]
    if with_labels:
        cols["label"] = encode_ids([{**e, "negatives": e["negatives"][:num_negatives]} for e in examples])
    return Dataset.from_dict(cols)


def as_train_dataset(data, num_negatives: int, with_labels: bool = True):
    """The trainer's dataset from a list of examples (``to_dataset``) or a ``datasets.Dataset`` in
    its columns (``TrainSet.dataset``): negatives past ``num_negatives`` are dropped, and the label
    column too unless ``with_labels``."""
    from datasets import Dataset

    if not isinstance(data, Dataset):
        return to_dataset(data, num_negatives, with_labels=with_labels)
    have = sum(1 for c in data.column_names if c.startswith("negative_"))
    if have < num_negatives:
        raise ValueError(
            f"the dataset has {have} negatives per row, fewer than {num_negatives}; "
            "rebuild the training set with the same num_negatives"
        )
    extra = [f"negative_{j + 1}" for j in range(num_negatives, have)]
    if not with_labels:
        extra.append("label")
    elif extra:
        data = data.map(lambda b: {"label": [lab[: 3 + num_negatives] for lab in b["label"]]}, batched=True)
    return data.remove_columns(extra) if extra else data


def keep_n_star(path, examples: list[dict], k: int) -> list[dict]:
    """The examples with N* (the positive of the seed's dv view) moved first among an original
    view's negatives where training's cut to ``k`` negatives would drop it, as ``_orig``
    does when building from seeds: a set built at 3 negatives and trained at 1 otherwise trained P+
    against another instruction negative while the dv view swapped P+ and N*. Where the cut keeps
    N*, the rows are unchanged (same data sha). An original view that lacks N* altogether (a set
    built before the original view kept N*, 2026-12-07; built sets carry no version field) is
    warned about with the count: it cannot be repaired from the rows."""
    n_star = {ex["group"]: ex["positive"]["id"] for ex in examples if ex.get("view") == "dv"}
    origs = [ex for ex in examples if ex.get("view") == "orig" and ex["group"] in n_star]
    ids = {ex["id"]: [p["id"] for p in ex["negatives"]] for ex in origs}
    old = [ex["id"] for ex in origs if n_star[ex["group"]] not in ids[ex["id"]]]
    if old:
        log.warning(
            "%s: %d of %d seeds' original view (e.g. %s) lacks N*, the positive of their dv view: built "
            "before the original view kept N* within num_negatives, so they do not train the pair the "
            "dv view swaps; rebuild the set from seeds",
            path,
            len(old),
            len(origs),
            old[0],
        )
    cut = {ex["id"]: ids[ex["id"]].index(n_star[ex["group"]]) for ex in origs if ex["id"] not in old}
    cut = {i: j for i, j in cut.items() if j >= k}
    if cut:
        log.info("%s: %d original views hold N* past num_negatives %d; moved it first", path, len(cut), k)
    return [
        {**ex, "negatives": n_star_first(ex["negatives"], cut[ex["id"]], k)}
        if ex.get("view") == "orig" and ex["id"] in cut
        else ex
        for ex in examples
    ]
