"""Checks of synthesized polarity reversals (arXiv 2604.18845; docs/method.md §2), stored as columns in the rows.

(a) Retriever flip check: with an embedder (default ``minilm``), is P+ above N* under
    query + original instruction, and N* above P+ under query + reversal? Columns
    ``verify_margin_og = s(q+I, P+) - s(q+I, N*)``, ``verify_margin_rev = s(q+I', N*) - s(q+I', P+)``
    and ``verify_flip = both > 0``. An off-the-shelf embedder often fails the *original* side
    (that is the paper's point), so read the margins, not only the flag.
(b) LLM judge (optional, through the ``llm`` backends and cache): under I', is N*
    relevant and P+ not? Columns ``verify_judge`` (bool) and ``verify_judge_reason``. The two
    documents are shown as A/B in an order drawn from the row key, against position bias. A
    judge answer cut at ``max_tokens`` or by a content filter gives no verdict (None, the reason
    says so), as synthesis rejects such an answer. ``VerifySummary`` counts the rows the judge
    gave no verdict (``judge_no_verdict``), and of them those whose request failed
    (``judge_failed``: not cached, a rerun asks again; ``ifir verify`` then exits 1).

Rows that are not ``accepted`` get None in every column; accepted rows written for an earlier
version of their seed (``seed_sha``) are not checked (counted in a warning), and a row naming a
seed not in the seed set is an error naming its file and line. ``verify_file`` holds the output's
lock (``core.locks``) while it reads and rewrites the file, so it never runs beside ``synthesize``. Not handled here: producing reversals
(``synthesize``), and filtering the training set by these columns (``training.trainsets``; the paper
applied no filter).
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import re
from dataclasses import dataclass
from pathlib import Path

from ..core.errors import ConfigError, DataError, RequestFailed
from ..core.jsonl import atomic_write_text, dumps
from ..core.locks import exclusive
from ..core.models import encode, format_query, load_model
from ..core.progress import progress
from ..seeds.schema import load_seeds, written_for
from .llm import run_sync
from .prompts import load_template
from .run import build_llm, iter_synthesis_lines

log = logging.getLogger(__name__)

VERIFY_COLUMNS = (
    "verify_flip",
    "verify_margin_og",
    "verify_margin_rev",
    "verify_embedder",  # which embedder gave the flip verdict (a rerun may use another)
    "verify_judge",
    "verify_judge_reason",
    "verify_judge_model",  # which LLM gave the judge's verdict
)


def _pairs(rows: list[dict], seeds: list[dict], where) -> list[tuple[int, dict, str, str]]:
    """``[(row index, seed, P+ text, N* text)]`` for the accepted rows written for the seeds as
    they are. ``where(i)`` is ``(file, line)`` of row ``i``, for errors. A row naming no seed, or
    an instruction negative the seed lacks, is a ``DataError``; a row whose ``seed_sha`` differs
    from the seed's (``seed_fingerprint``: written for an earlier version of it) is not checked,
    and such rows are counted in one warning. A row without ``seed_sha`` (earlier versions) is
    checked against the seed as it is."""
    by_id = {s["id"]: s for s in seeds}
    out, stale = [], []
    for i, r in enumerate(rows):
        if r.get("status") != "accepted" or not r.get("reversal"):
            continue
        s = by_id.get(r["seed_id"])
        if s is None:
            raise DataError(
                *where(i),
                f"row {r['key']!r} names seed {r['seed_id']!r}, which is not in the seed set (removed "
                "from it?); pass the seeds the rows were written from",
                "seed_id",
            )
        j = int(r.get("negative_index", 0))
        if not 0 <= j < len(s["instruction_negatives"]):
            raise DataError(
                *where(i), f"row {r['key']!r}: seed has no instruction negative {j}", "negative_index"
            )
        if not written_for(r, s):
            stale.append(r["key"])
            continue
        out.append((i, s, s["positive"]["text"], s["instruction_negatives"][j]["text"]))
    if stale:
        log.warning(
            "%s: %d accepted row%s written for another version of their seed (seed_sha differs), "
            "e.g. %s: not checked, their verify columns left as they were",
            where(0)[0],
            len(stale),
            "s were" if len(stale) > 1 else " was",
            ", ".join(stale[:5]),
        )
    return out


def flip_margins(
    model,
    queries: list[str],
    instructions: list[str],
    reversals: list[str],
    positives: list[str],
    negatives: list[str],
    batch_size: int = 64,
) -> list[tuple[float, float]]:
    """``[(margin_og, margin_rev)]`` per example; both > 0 means the embedder sees the flip.

    Example: cosine scores s(q+I,P+)=.8, s(q+I,N*)=.5, s(q+I',N*)=.7, s(q+I',P+)=.6 -> (.3, .1).
    """
    m = len(queries)
    if not m:
        return []
    q = [format_query(a, b) for a, b in zip(queries, instructions)] + [
        format_query(a, b) for a, b in zip(queries, reversals)
    ]
    Q = encode(model, q, "query", batch_size=batch_size)  # (2m, dim): q+I then q+I'
    D = encode(
        model, list(positives) + list(negatives), "document", batch_size=batch_size
    )  # (2m, dim): P+ then N*
    og_pos, og_neg = (Q[:m] * D[:m]).sum(1), (Q[:m] * D[m:]).sum(1)  # (m,) cosine (normalised)
    rev_pos, rev_neg = (Q[m:] * D[:m]).sum(1), (Q[m:] * D[m:]).sum(1)
    return [(float(a), float(b)) for a, b in zip(og_pos - og_neg, rev_neg - rev_pos)]


def _model_name(model) -> str:
    """A model object's weights (its transformer's ``name_or_path``: a folder or hub name), else its class."""
    try:
        return str(model[0].auto_model.config._name_or_path) or type(model).__name__
    except (AttributeError, IndexError, KeyError, TypeError):
        return type(model).__name__


# ---- LLM judge --------------------------------------------------------------------------------------
_YN = re.compile(r"<answer>\s*<a>\s*(yes|no)\s*</a>\s*<b>\s*(yes|no)\s*</b>\s*</answer>", re.I | re.S)


JUDGE_FAILED = "judge request failed"  # how verify_judge_reason starts for a request that failed


def judge_order(key: str) -> bool:
    """True when N* is shown as document A for this row (a stable coin flip on the key)."""
    return hashlib.sha256(key.encode()).digest()[0] % 2 == 0


def parse_judge(raw: str, nstar_is_a: bool) -> tuple[bool | None, str]:
    """``'<answer><a>yes</a><b>no</b></answer>', N* = A -> (True, 'N* relevant: yes, P+ relevant: no')``."""
    m = list(_YN.finditer(raw or ""))
    if not m:
        return None, "unparseable judge answer"
    a, b = (x.lower() == "yes" for x in m[-1].groups())
    nstar, pos = (a, b) if nstar_is_a else (b, a)
    return (
        nstar and not pos
    ), f"N* relevant: {'yes' if nstar else 'no'}, P+ relevant: {'yes' if pos else 'no'}"


async def _judge_all(llm, rows, pairs, template) -> list[tuple[bool | None, str]]:
    async def one(i, s, pos, neg):
        a_is_n = judge_order(rows[i]["key"])
        prompt = template.render(
            query=s["query"],
            instruction=rows[i]["reversal"],
            doc_a=neg if a_is_n else pos,
            doc_b=pos if a_is_n else neg,
        )
        try:
            c = await llm.complete([{"role": "user", "content": prompt}])
        except RequestFailed as e:
            return None, f"{JUDGE_FAILED}: {e.reason}"
        if c.truncated:  # its last <answer> may be a verdict it was revising (as run._parsed)
            return None, f"judge answer truncated: {c.cut_note(llm.params.get('max_tokens'))}"
        return parse_judge(c.text, a_is_n)

    async def counted(p):
        verdict = await one(*p)
        bar.update(1)
        return verdict

    bar = progress(total=len(pairs), desc="judge", unit="row")
    try:
        return await asyncio.gather(*(counted(p) for p in pairs))
    finally:
        bar.close()
        await llm.aclose()


# ---- entry points ---------------------------------------------------------------------------------------
def verify(
    rows: list[dict],
    seeds: list[dict] | str | Path,
    *,
    embedder="minilm",
    judge=None,
    judge_template: str = "judge_prompt.j2",
    batch_size: int = 64,
    source: str | Path | None = None,
    lines: list[int] | None = None,
    judged: list[int] | None = None,
) -> list[dict]:
    """Return copies of ``rows`` with the ``verify_*`` columns filled in; ``judged``, when given,
    gets the positions of the rows the judge ran on (rows of edited seeds keep earlier verdicts).

    Args:
        rows: synthesis rows (``run.load_synthesis``).
        seeds: the seeds they came from (rows or a path).
        embedder: a SentenceTransformer, or a name for ``core.models.load_model`` (None skips (a)).
        judge: a ``SynthesisConfig`` with an LLM backend (openai / transformers) for check (b),
            or None to skip it. Its cache and retries apply.
        source, lines: the file the rows came from and each row's line in it, named in errors
            (``verify_file`` passes them); without them an error names ``<rows>`` and the row number.
    """

    seeds = load_seeds(seeds, stage="synthesis") if isinstance(seeds, (str, Path)) else seeds
    out = [{**r, **{c: r.get(c) for c in VERIFY_COLUMNS}} for r in rows]

    def where(i: int) -> tuple[str, int | None]:
        return (str(source), lines[i]) if source is not None and lines else ("<rows>", i + 1)

    pairs = _pairs(out, seeds, where)
    if embedder is not None and pairs:
        model = load_model(embedder) if isinstance(embedder, str) else embedder
        margins = flip_margins(
            model,
            [s["query"] for _, s, _, _ in pairs],
            [s["instruction"] for _, s, _, _ in pairs],
            [out[i]["reversal"] for i, _, _, _ in pairs],
            [p for _, _, p, _ in pairs],
            [n for _, _, _, n in pairs],
            batch_size,
        )
        name = embedder if isinstance(embedder, str) else _model_name(model)
        for (i, _, _, _), (og, rev) in zip(pairs, margins):
            out[i].update(
                verify_margin_og=round(og, 6),
                verify_margin_rev=round(rev, 6),
                verify_flip=og > 0 and rev > 0,
                verify_embedder=str(name),
            )
    if judge is not None and pairs:
        if judge.backend not in ("openai", "transformers"):
            raise ValueError(
                f"the judge needs an LLM backend (openai or transformers), not {judge.backend!r}"
            )
        llm = build_llm(judge)
        verdicts = run_sync(_judge_all(llm, out, pairs, load_template(judge_template)))
        for (i, _, _, _), (ok, why) in zip(pairs, verdicts):
            out[i].update(verify_judge=ok, verify_judge_reason=why, verify_judge_model=judge.model)
        if judged is not None:
            judged += [i for i, _, _, _ in pairs]
    return out


@dataclass
class VerifySummary:
    out: str
    rows: int
    checked: int
    flips: int
    judged: int
    judge_yes: int
    flip_checked: int | None = None  # rows with a flip verdict; None: the flip check did not run
    # rows the judge ran on without a verdict (request failed, answer unparseable or cut), and of
    # them those whose request failed (not cached: a rerun asks again)
    judge_no_verdict: int = 0
    judge_failed: int = 0

    def format(self) -> str:
        s = f"verify -> {self.out}: {self.checked} of {self.rows} rows accepted and checked"
        if self.flip_checked is None:
            s += "; retriever flip not run (--no-embedder)"
        elif self.flip_checked:
            s += f"; retriever flip {self.flips}/{self.flip_checked}"
        if self.judged:
            s += f"; judge yes {self.judge_yes}/{self.judged}"
        if self.judge_no_verdict:
            s += f"; judge gave no verdict for {self.judge_no_verdict}"
            if self.judge_failed:
                s += f" ({self.judge_failed} request(s) failed: rerun to retry)"
        return s


def verify_file(
    path: str | Path, seeds: list[dict] | str | Path, out: str | Path | None = None, **kwargs
) -> VerifySummary:
    """``verify`` a synthesis JSONL; write to ``out`` or rewrite ``path`` atomically (temp + rename).

    Holds the lock ``synthesize`` takes (``core.locks.exclusive``) on ``path``, and on ``out``
    when it is another file, from the read to the write: a run still appending to ``path`` would
    lose every row written after the read (the rename cuts them off), so while one holds the lock
    this fails at once with ``OutputLocked``. Writing to another ``out``, a ``path`` whose lock
    file cannot be made (a read-only folder, which no run can be appending to) is read unlocked,
    with a warning; rewriting ``path`` in place, that is a ``ConfigError``. Every row is kept, one per key and seed version
    (``iter_synthesis(by_version=True)``), as ``synthesize`` keeps them.
    """
    path = Path(path)
    if not path.exists():  # before the lock, which would create its folder
        raise DataError(path, None, "file not found")
    target = Path(out or path)
    elsewhere = target.resolve() != path.resolve()
    with contextlib.ExitStack() as held:
        try:
            held.enter_context(exclusive(path, "synthesis output"))
        except OSError as e:  # not OutputLocked (a RuntimeError): the lock file cannot be made
            if not elsewhere:
                raise ConfigError(
                    f"{path}: cannot make its lock file ({e.strerror or e}); pass --out to write the checked rows elsewhere"
                ) from None
            # The input's folder is not writable to us: no writer of ours can be appending to it.
            log.warning("%s: not locked (%s); reading it as it is", path, e.strerror or e)
        if elsewhere:
            held.enter_context(exclusive(target, "verify output"))
        numbered = list(iter_synthesis_lines(path, by_version=True))
        judged: list[int] = []  # the rows judged now: an old failed verdict kept is no failure of this run
        rows = verify(
            [r for _, r in numbered],
            seeds,
            source=path,
            lines=[n for n, _ in numbered],
            judged=judged,
            **kwargs,
        )
        atomic_write_text(target, "".join(dumps(r) for r in rows))
    checked = [
        r for r in rows if r.get("verify_flip") is not None or r.get("verify_judge_reason") is not None
    ]
    # verdicts kept from an earlier run are not this run's: counted only for the checks that ran
    ran_flip, ran_judge = kwargs.get("embedder", "minilm") is not None, kwargs.get("judge") is not None
    silent = [
        rows[i] for i in judged if rows[i].get("verify_judge") is None and rows[i].get("verify_judge_reason")
    ]
    return VerifySummary(
        str(target),
        len(rows),
        len(checked),
        sum(1 for r in rows if r.get("verify_flip")) if ran_flip else 0,
        sum(1 for r in rows if r.get("verify_judge") is not None) if ran_judge else 0,
        sum(1 for r in rows if r.get("verify_judge")) if ran_judge else 0,
        sum(1 for r in rows if r.get("verify_flip") is not None) if ran_flip else None,
        len(silent),
        sum(1 for r in silent if r["verify_judge_reason"].startswith(JUDGE_FAILED)),
    )


__all__ = ["verify", "verify_file", "flip_margins", "parse_judge", "judge_order", "VerifySummary"]
