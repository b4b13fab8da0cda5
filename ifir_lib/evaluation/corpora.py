"""Evaluation corpora on disk: FollowIR-format folders (read, check, write) and BEIR folders.

FollowIR's original layout (docs/method.md §5)::
    corpus.jsonl              {"_id", "title", "text"}
    queries.jsonl             {"_id", "text", "instruction_og", "instruction_changed", ...}
    qrels_og/test.jsonl       {"query-id", "corpus-id", "score"}   graded 0/1/2
    qrels_changed/test.jsonl  {"query-id", "corpus-id", "score"}
    top_ranked.jsonl          {"qid", "pid"}                        one row per candidate

Problems that mteb tolerates (qrels naming unknown documents, a query without a changed
instruction or with the same one twice, an empty candidate list, a query without og or changed
qrels or with no relevant og document) are collected in ``FollowIRData.problems`` with counts,
logged as warnings, and the affected queries are dropped, never scored as zero; candidates
missing from the corpus are reported and ignored. Changed documents outside a query's
candidates (0 in p-MRR, as in mteb) and og-relevant documents with no changed judgment (counted
as changed) are reported and kept (``changed_doc_gaps``), and so are queries whose text already
ends with one of their instructions (read twice; training refuses such a seed). A malformed
line raises ``DataError`` naming file, line and field, and so do data that no choice of ours
could score rightly: an ``_id`` given twice in corpus.jsonl or queries.jsonl, a document with
neither text nor title, a (query, document) pair judged twice with different scores, a score
that is not a whole finite number (``"1"`` and ``1.0`` read as 1; 0.5 is refused, not cut to 0).
BEIR folders (``load_beir``) go through the same row checks (``_checked_rows``, ``judgments``).
``check_followir`` (``ifir data validate``) names, by file, line and field, every row the loader
would drop or ignore, instead of counting them.
``content_digest`` names a loaded set's content in 16 hex characters (the results' ``data_sha``).
``SCORE_METRIC`` says which metric is each FollowIR dataset's Score (the paper's Table 1).
Not handled here: encoding or scoring (``evaluator``), synthetic sets for tests (``testing.inputs``).
"""

from __future__ import annotations

import collections
import hashlib
import json
import logging
import math
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from ..core.config import FOLLOWIR_DIR
from ..core.errors import DataError
from ..core.jsonl import read_jsonl
from ..core.models import format_query
from ..seeds.schema import query_holds_instruction

log = logging.getLogger(__name__)

Qrels = dict[str, dict[str, int]]

FOLLOWIR_TASKS = ("Robust04InstructionRetrieval", "News21InstructionRetrieval", "Core17InstructionRetrieval")
# the paper's Score per FollowIR dataset (arXiv 2604.18845, Table 1): MAP@1000, but nDCG@5 on News21
SCORE_METRIC = {
    "Robust04InstructionRetrieval": "map_at_1000",
    "News21InstructionRetrieval": "ndcg_at_5",
    "Core17InstructionRetrieval": "map_at_1000",
}


def score_metric_for(name: str) -> str:
    """``'News21InstructionRetrieval' -> 'ndcg_at_5'``; any other name (Robust04, Core17, a local set) -> MAP@1000."""
    return SCORE_METRIC.get(name, "ndcg_at_5" if "news21" in name.lower() else "map_at_1000")


@dataclass
class FollowIRData:
    name: str
    corpus: dict[str, dict]  # doc id -> {"title", "text"}
    queries: dict[str, dict]  # qid -> {"text", "instruction_og", "instruction_changed"}
    qrels_og: Qrels
    qrels_changed: Qrels
    top_ranked: dict[str, list[str]]  # qid -> candidate doc ids (the reranking pool)
    problems: list[str] = field(default_factory=list)

    @property
    def qrel_diff(self) -> dict[str, list[str]]:
        """Docs relevant under the original instruction but not under the changed one."""
        out = {}
        for qid, og in self.qrels_og.items():
            ch = self.qrels_changed.get(qid, {})
            diff = sorted(d for d, s in og.items() if s > 0 and ch.get(d, 0) <= 0)
            if diff:
                out[qid] = diff
        return out


def preview_ids(ids, n: int = 5) -> str:
    """The first ``n`` of ``ids`` in order, and ``...`` when there are more."""
    ids = sorted(ids)
    return ", ".join(ids[:n]) + (" ..." if len(ids) > n else "")


def _need(row, keys, path, n):
    for k in keys:
        if k not in row or row[k] is None:
            raise DataError(path, n, "missing", k)


def _score(value, path: Path, n: int) -> int:
    """A qrels score as the graded level it is (0, 1, 2, ...); ``"1"`` and ``1.0`` read as 1. A score
    that is not a number, not finite, or not a whole number is a ``DataError``: rounding 0.5 to 0
    would turn a relevant document into a non-relevant one without a word."""
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    try:
        x = float(value)
    except (TypeError, ValueError):
        raise DataError(path, n, f"not a number: {value!r}", "score") from None
    if not math.isfinite(x):
        raise DataError(path, n, f"not a finite number: {value!r}", "score")
    if not x.is_integer():
        raise DataError(
            path, n, f"not a whole number: {value!r} (qrels scores are graded levels 0, 1, 2, ...)", "score"
        )
    return int(x)


def judgments(rows: Iterable[tuple[int, str, str, object]], path: Path) -> Qrels:
    """Qrels from ``(line, query-id, corpus-id, score)`` rows of ``path`` (FollowIR and BEIR alike):
    each score checked by ``_score``; a pair judged twice with different scores is a ``DataError``
    naming both lines (the same score twice is one judgment)."""
    qrels: Qrels = collections.defaultdict(dict)
    first: dict[tuple[str, str], int] = {}
    for n, q, d, raw in rows:
        score = _score(raw, path, n)
        if d in qrels[q] and qrels[q][d] != score:
            raise DataError(
                path,
                n,
                f"{score} conflicts with {qrels[q][d]} on line {first[q, d]} for query {q!r}, document {d!r}",
                "score",
            )
        first.setdefault((q, d), n)
        qrels[q][d] = score
    return dict(qrels)


def _load_qrels(path: Path) -> Qrels:
    """A qrels JSONL file (``query-id``, ``corpus-id``, ``score`` per row), checked by ``judgments``."""

    def rows():
        for n, row in read_jsonl(path):
            _need(row, ("query-id", "corpus-id", "score"), path, n)
            yield n, str(row["query-id"]), str(row["corpus-id"]), row["score"]

    return judgments(rows(), path)


def _checked_rows(path: Path, strings: tuple[str, ...], optional: tuple[str, ...] = ()):
    """``(line, id, row)`` for each row of a corpus or queries file (FollowIR and BEIR alike): the
    fields ``strings`` present and strings, those in ``optional`` strings or absent, and an ``_id``
    not given before with other content (``1`` and ``"1"`` are one id); else a ``DataError`` naming
    line and field. A row that repeats an earlier one exactly (some exported corpora have them) is
    read once, and one warning counts them, as a judgment given twice is."""
    seen: dict[str, tuple[int, dict]] = {}
    repeats = []
    for n, row in read_jsonl(path):
        _need(row, ("_id", *strings), path, n)
        for k in strings:
            if not isinstance(row[k], str):
                raise DataError(path, n, "must be a string", k)
        for k in optional:
            if not isinstance(row.get(k) or "", str):
                raise DataError(path, n, "must be a string or absent", k)
        key, content = str(row["_id"]), {k: v for k, v in row.items() if k != "_id"}
        if key in seen:
            first, earlier = seen[key]
            if earlier != content:
                raise DataError(
                    path, n, f"duplicate id {key!r} (first on line {first}) with other content", "_id"
                )
            repeats.append(key)
            continue
        seen[key] = (n, content)
        yield n, key, row
    if repeats:
        log.warning(
            "%s: %d row(s) repeat an earlier row of the same id exactly (e.g. %s): read once",
            path,
            len(repeats),
            ", ".join(map(repr, repeats[:5])),
        )


def _read_corpus(path: Path) -> dict[str, dict]:
    corpus = {}
    for n, did, row in _checked_rows(path, ("text",), ("title",)):
        title = row.get("title") or ""
        if not row["text"].strip() and not title.strip():
            raise DataError(path, n, f"document {did!r} is empty (no text, no title)", "text")
        corpus[did] = {"title": title, "text": row["text"]}
    return corpus


def _read_queries(path: Path) -> dict[str, dict]:
    return {
        qid: {
            "text": row["text"],
            "instruction_og": row["instruction_og"],
            "instruction_changed": row.get("instruction_changed") or "",
        }
        for _, qid, row in _query_rows(path, ("text", "instruction_og"), ("instruction_changed",))
    }


def _query_rows(path: Path, strings: tuple[str, ...], optional: tuple[str, ...] = ()):
    """``_checked_rows`` of a queries file, whose ids may not hold ``/``: the per-query tables
    spell a combined set's queries ``<dataset>/<qid>`` and resample them by dataset, so a set of
    one's own with ``/`` in its ids would be read as several (a ``DataError`` naming the line)."""
    for n, qid, row in _checked_rows(path, strings, optional):
        if "/" in qid:
            raise DataError(
                path,
                n,
                f"query id {qid!r} holds '/', which marks a combined set's '<dataset>/<qid>' ids in the "
                "per-query tables; rename the query (in the qrels and top_ranked too)",
                "_id",
            )
        yield n, qid, row


def _read_top_ranked(path: Path) -> collections.defaultdict[str, list[str]]:
    """qid -> candidate ids in file order; ``pid`` may be one id or a list."""
    top = collections.defaultdict(list)
    for n, row in read_jsonl(path):
        _need(row, ("qid", "pid"), path, n)
        pids = row["pid"] if isinstance(row["pid"], list) else [row["pid"]]
        top[str(row["qid"])].extend(str(p) for p in pids)
    return top


def _drop_unscorable(corpus, queries, qrels_og, qrels_changed, top, unknown_qrels: str) -> list[str]:
    """Remove from ``queries`` (in place) every query that cannot be scored; return the problems found."""
    problems = []

    def drop(qids, why):
        qids = [q for q in qids if q in queries]
        if qids:
            problems.append(f"{len(qids)} queries {why}: {preview_ids(qids)}")
            for q in qids:
                queries.pop(q, None)

    for kind, qrels in (("qrels_og", qrels_og), ("qrels_changed", qrels_changed)):
        strays = sorted(q for q in qrels if q not in queries)
        if strays:
            problems.append(
                f"{kind}/test.jsonl judges {len(strays)} queries not in queries.jsonl: {preview_ids(strays)}; ignored"
            )
    unknown = collections.Counter()
    for qrels in (qrels_og, qrels_changed):
        for qid, docs in qrels.items():
            if qid in queries:
                unknown[qid] += sum(1 for d in docs if d not in corpus)
    unknown = +unknown  # drop zero counts
    if unknown:
        what = f"{sum(unknown.values())} qrels name documents not in the corpus (in {len(unknown)} queries)"
        if unknown_qrels == "exclude":
            drop(list(unknown), f"have qrels naming unknown documents ({what}); excluded")
        else:
            problems.append(f"{what}; kept as relevant but unretrievable")
    not_in_corpus = collections.Counter(
        q for q, ps in top.items() if q in queries for p in ps if p not in corpus
    )
    if not_in_corpus:
        problems.append(
            f"{sum(not_in_corpus.values())} candidates in top_ranked are not in the corpus "
            f"(in {len(not_in_corpus)} queries: {preview_ids(not_in_corpus)}); those candidates are ignored"
        )
    drop(
        [q for q, v in queries.items() if not v["instruction_changed"].strip()],
        "have no changed instruction; excluded",
    )
    drop(
        [q for q in queries if not [p for p in top.get(q, []) if p in corpus]],
        "have an empty candidate list; excluded",
    )
    drop([q for q in queries if not qrels_og.get(q)], "have no og qrels; excluded")
    # mteb drops a query without judgments, so its changed run would vanish and p-MRR skip it
    drop([q for q in queries if not qrels_changed.get(q)], "have no changed qrels; excluded")
    drop(
        [q for q in queries if not any(s > 0 for s in qrels_og[q].values())],
        "have no relevant og document (every judgment 0: MAP and nDCG 0 by construction); excluded",
    )
    drop(
        [q for q, v in queries.items() if same_instructions(v)],
        "have the same original and changed instruction (p-MRR 0 by construction); excluded",
    )
    problems += _changed_doc_problems(queries, qrels_og, qrels_changed, top)
    holds = [q for q, v in queries.items() if _holds_an_instruction(v)]
    if holds:  # training refuses such a seed (``seeds.schema.validate_seed``); kept here, as mteb would
        problems.append(
            f"{len(holds)} queries hold their instruction in their text already (the text ends with it): "
            "the model reads query + instruction + ' ' + instruction, the og one in both runs; give the "
            f"bare query in 'text': {preview_ids(holds)}"
        )
    return problems


def _holds_an_instruction(query: dict) -> bool:
    """Whether a query's ``text`` ends with its og or changed instruction (``query_holds_instruction``)."""
    return any(
        query_holds_instruction(query["text"], query[f]) for f in ("instruction_og", "instruction_changed")
    )


def same_instructions(query: dict) -> bool:
    """Whether a query's two instructions read the same to the model (``format_query`` strips them)."""
    return query["instruction_og"].strip() == query["instruction_changed"].strip()


def changed_doc_gaps(qrels_og: dict, qrels_changed: dict, candidates: list[str]) -> tuple[list, list]:
    """For one query: ``(changed documents not among its candidates, og-relevant documents with no
    judgment under the changed instruction)``. A changed document outside the pool ranks last in
    both runs and adds 0 to p-MRR (as in mteb); an unjudged one counts as changed, which is right
    for qrels that leave out zeros and wrong for a file that lists only the judgments that differ."""
    pool = set(candidates)
    diff = [d for d, s in qrels_og.items() if s > 0 and qrels_changed.get(d, 0) <= 0]
    return sorted(d for d in diff if d not in pool), sorted(d for d in diff if d not in qrels_changed)


def _changed_doc_problems(queries, qrels_og, qrels_changed, top) -> list[str]:
    """Problems kept, not excluded: the changed documents ``changed_doc_gaps`` finds, counted."""
    outside, unjudged = collections.Counter(), collections.Counter()
    for q in queries:
        out, unj = changed_doc_gaps(qrels_og[q], qrels_changed[q], top.get(q, []))
        outside[q], unjudged[q] = len(out), len(unj)
    outside, unjudged = +outside, +unjudged
    problems = []
    if outside:
        problems.append(
            f"{sum(outside.values())} changed documents are not among their query's candidates in "
            f"top_ranked.jsonl (in {len(outside)} queries: {preview_ids(outside)}); each ranks last under "
            "both instructions and adds 0 to p-MRR (as in mteb)"
        )
    if unjudged:
        problems.append(
            f"{sum(unjudged.values())} documents relevant under the original instruction have no "
            f"judgment in qrels_changed (in {len(unjudged)} queries: {preview_ids(unjudged)}); they count "
            "as changed (not relevant), which is wrong if qrels_changed lists only the judgments that differ"
        )
    return problems


def load_followir(folder: str | Path = FOLLOWIR_DIR, *, unknown_qrels: str = "exclude") -> FollowIRData:
    """Load and check a FollowIR-format folder; see the module docstring for what is dropped.

    ``unknown_qrels`` says what to do with a query whose qrels name documents missing from the
    corpus: ``"exclude"`` (default) drops the query with a warning; ``"keep"`` keeps the
    judgments, which then count as relevant-but-unretrievable (trec_eval's convention, and what
    mteb does with such qrels).
    """
    if unknown_qrels not in ("exclude", "keep"):
        raise ValueError(f"unknown_qrels must be 'exclude' or 'keep', not {unknown_qrels!r}")
    folder = _followir_folder(folder)
    corpus = _read_corpus(folder / "corpus.jsonl")
    queries = _read_queries(folder / "queries.jsonl")
    qrels_og = _load_qrels(folder / "qrels_og" / "test.jsonl")
    qrels_changed = _load_qrels(folder / "qrels_changed" / "test.jsonl")
    top = _read_top_ranked(folder / "top_ranked.jsonl")
    problems = _drop_unscorable(corpus, queries, qrels_og, qrels_changed, top, unknown_qrels)
    top_ranked = {q: list(dict.fromkeys(p for p in top[q] if p in corpus)) for q in queries}
    for p in problems:
        log.warning("%s: %s", folder, p)
    return FollowIRData(
        folder.name,
        corpus,
        queries,
        {q: qrels_og[q] for q in queries},
        {q: qrels_changed.get(q, {}) for q in queries},
        top_ranked,
        problems,
    )


def content_digest(data: FollowIRData | tuple[dict, dict, dict]) -> str:
    """16 hex characters of sha256 over a loaded set's content in a canonical order (every part,
    then every id, sorted): a ``FollowIRData``'s corpus, queries, og and changed qrels and
    candidates, or the ``(corpus, queries, qrels)`` of ``load_beir``. The folder's name, its line
    order and its JSON spelling do not count; a changed text, id, judgment or candidate does.
    The results table records it (``data_sha``), so two sets under one name can be told apart."""
    if isinstance(data, FollowIRData):
        kind = "followir"
        parts = {
            "corpus": data.corpus,
            "queries": data.queries,
            "qrels_og": data.qrels_og,
            "qrels_changed": data.qrels_changed,
            "top_ranked": {q: sorted(ps) for q, ps in data.top_ranked.items()},  # a pool, not a ranking
        }
    else:
        kind, parts = "beir", dict(zip(("corpus", "queries", "qrels"), data))
    h = hashlib.sha256(kind.encode())
    for part in sorted(parts):
        for key in sorted(parts[part]):
            h.update(b"\n" + json.dumps([part, key, parts[part][key]], sort_keys=True).encode())
    return h.hexdigest()[:16]


FOLLOWIR_FILES = (
    "corpus.jsonl",
    "queries.jsonl",
    "qrels_og/test.jsonl",
    "qrels_changed/test.jsonl",
    "top_ranked.jsonl",
)


def _followir_folder(folder: str | Path) -> Path:
    """``folder`` as a Path once it holds every file of the layout; else a ``DataError`` naming the
    first missing file (and how many others are missing)."""
    folder = Path(folder)
    if not folder.is_dir():
        raise DataError(folder, None, "not a directory (expected a FollowIR-format folder)")
    missing = [f for f in FOLLOWIR_FILES if not (folder / f).is_file()]
    if missing:
        more = f" ({len(missing) - 1} other files missing too)" if len(missing) > 1 else ""
        raise DataError(
            folder / missing[0],
            None,
            f"file not found{more}; a FollowIR-format folder holds {', '.join(FOLLOWIR_FILES)}",
        )
    return folder


class Kept(str):
    """A line of ``check_followir`` about rows that are scored as they stand, as mteb scores them
    (``changed_doc_gaps``): worth knowing, not a problem of the folder (``ifir data validate``
    prints it as a note and does not fail on it)."""


def check_followir(folder: str | Path, cap: int = 5) -> list[str]:
    """Every row of a FollowIR-format folder that ``load_followir`` would drop, ignore or report,
    as ``file:line: field 'f': what``; at most ``cap`` per file and field, then a count. Empty means
    every query is scored as it stands. A malformed row or a missing file raises ``DataError`` as
    in loading.

    Named: qrels or top_ranked rows whose ``query-id``/``qid`` is not in queries.jsonl or whose
    ``corpus-id``/``pid`` is not in corpus.jsonl; queries without ``instruction_changed`` or with
    the original one again, without a candidate in the corpus, without og or changed judgments
    (mteb drops those) or judged only 0 (dropped); and, kept but reported (``changed_doc_gaps``),
    changed documents outside the query's candidates and relevant documents unjudged under the
    changed instruction: these lines are ``Kept``.
    """
    folder = _followir_folder(folder)
    corpus = _read_corpus(folder / "corpus.jsonl")
    queries = _read_queries(folder / "queries.jsonl")
    found: dict[tuple, list[str]] = {}  # (file, field, str or Kept) -> lines
    covered, qrels = {}, {}  # file -> the queries it has a usable row for; file -> its judgments
    for name in ("qrels_og/test.jsonl", "qrels_changed/test.jsonl"):
        qrels[name] = _load_qrels(folder / name)  # malformed rows and conflicting scores raise
        covered[name] = _unknown_refs(folder / name, "query-id", "corpus-id", queries, corpus, found)
    covered["top_ranked.jsonl"] = _unknown_refs(
        folder / "top_ranked.jsonl", "qid", "pid", queries, corpus, found
    )
    path = folder / "queries.jsonl"
    for n, row in read_jsonl(path):
        qid = str(row["_id"])
        if not (row.get("instruction_changed") or "").strip():
            _note(found, path, n, "instruction_changed", f"missing or empty: query {qid!r} cannot be scored")
        elif same_instructions(queries[qid]):
            _note(
                found,
                path,
                n,
                "instruction_changed",
                f"the same as instruction_og: query {qid!r} is excluded",
            )
        for name, qids in covered.items():
            if qid not in qids:
                _note(found, path, n, "_id", f"query {qid!r} has no row in {name} naming a corpus document")
    _note_changed_docs(folder, qrels["qrels_og/test.jsonl"], qrels["qrels_changed/test.jsonl"], found)
    return _capped(found, cap)


def _note_changed_docs(folder: Path, og, changed, found: dict) -> None:
    """``check_followir``'s lines for queries judged only 0, and for ``changed_doc_gaps``."""
    top = _read_top_ranked(folder / "top_ranked.jsonl")
    path = folder / "qrels_og" / "test.jsonl"
    first_line = {}
    for n, row in read_jsonl(path):
        first_line.setdefault(str(row["query-id"]), n)
    for qid, docs in og.items():
        n = first_line[qid]
        if not any(s > 0 for s in docs.values()):
            _note(
                found,
                path,
                n,
                "score",
                f"query {qid!r} has no relevant document (every judgment 0): excluded",
            )
            continue
        outside, unjudged = changed_doc_gaps(docs, changed.get(qid, {}), top.get(qid, []))
        if outside:
            what = f"query {qid!r}: changed documents not among its candidates in top_ranked.jsonl"
            _note(found, path, n, "corpus-id", Kept(f"{what} (0 in p-MRR): {preview_ids(outside)}"))
        if unjudged and qid in changed:
            what = f"query {qid!r}: relevant documents with no judgment in qrels_changed (count as changed)"
            _note(found, path, n, "corpus-id", Kept(f"{what}: {preview_ids(unjudged)}"))


def _capped(found: dict[tuple, list[str]], cap: int) -> list[str]:
    """The first ``cap`` lines per (file, field, kind), then one line counting the rest."""
    out = []
    for (where, fld, kind), lines in found.items():
        out += lines[:cap]
        if len(lines) > cap:
            out.append(kind(f"{where}: field '{fld}': {len(lines) - cap} more like these"))
    return out


def _note(found: dict, path: Path, n: int, fld: str, what: str) -> None:
    """Add a line for ``path``'s line ``n``; a ``Kept`` ``what`` makes a ``Kept`` line."""
    kind = type(what) if isinstance(what, Kept) else str
    found.setdefault((str(path), fld, kind), []).append(kind(f"{path}:{n}: field '{fld}': {what}"))


def _unknown_refs(path: Path, q_key: str, d_key: str, queries, corpus, found: dict) -> set[str]:
    """Note the rows of ``path`` naming a query or document the folder lacks; return the queries
    that have a row naming a corpus document. ``d_key`` may hold one id or a list."""
    covered = set()
    for n, row in read_jsonl(path):
        _need(row, (q_key, d_key), path, n)
        qid = str(row[q_key])
        if qid not in queries:
            _note(found, path, n, q_key, f"query {qid!r} is not in queries.jsonl")
        for did in map(str, row[d_key] if isinstance(row[d_key], list) else [row[d_key]]):
            if did in corpus:
                covered.add(qid)
            else:
                _note(found, path, n, d_key, f"document {did!r} is not in corpus.jsonl")
    return covered


def write_followir(data: FollowIRData, folder: str | Path) -> Path:
    """Write ``data`` in the original layout (used to build the bundled set and benchmarks)."""
    folder = Path(folder)
    (folder / "qrels_og").mkdir(parents=True, exist_ok=True)
    (folder / "qrels_changed").mkdir(parents=True, exist_ok=True)

    def dump(path, rows):
        with open(path, "w", encoding="utf-8") as fh:
            for r in rows:
                fh.write(json.dumps(r, ensure_ascii=False) + "\n")

    dump(folder / "corpus.jsonl", ({"_id": d, **v} for d, v in data.corpus.items()))
    dump(folder / "queries.jsonl", ({"_id": q, **v} for q, v in data.queries.items()))
    for sub, qrels in (("qrels_og", data.qrels_og), ("qrels_changed", data.qrels_changed)):
        dump(
            folder / sub / "test.jsonl",
            (
                {"query-id": q, "corpus-id": d, "score": s}
                for q, docs in qrels.items()
                for d, s in docs.items()
            ),
        )
    dump(folder / "top_ranked.jsonl", ({"qid": q, "pid": p} for q, ps in data.top_ranked.items() for p in ps))
    return folder


# --------------------------------------------------------------------------------------------
# BEIR-style folders


def _tsv_rows(path: Path):
    """``(line, query-id, corpus-id, score)`` from a BEIR qrels TSV; a first line naming the
    columns and blank lines are skipped (so are empty trailing fields). A line with other than 3
    fields is a ``DataError``: TREC's 4-column qrels (``qid iter docid rel``) read as BEIR's
    would take ``iter`` for the document and the document for the score."""
    with path.open(encoding="utf-8") as fh:
        for n, line in enumerate(fh, 1):
            parts = line.rstrip("\r\n").split("\t")
            while len(parts) > 3 and not parts[-1].strip():
                parts.pop()
            if not line.strip() or (n == 1 and parts[0] in ("query-id", "query_id", "qid")):
                continue
            if len(parts) != 3:
                trec = " (TREC qrels, qid iter docid rel? drop the second column)" if len(parts) == 4 else ""
                raise DataError(
                    path,
                    n,
                    f"expected 3 tab-separated fields (query-id, corpus-id, score), got {len(parts)}{trec}",
                )
            yield n, parts[0], parts[1], parts[2]


def load_beir(folder: str | Path, split: str = "test") -> tuple[dict, dict, dict]:
    """``(corpus, queries, qrels)`` from ``corpus.jsonl``, ``queries.jsonl``, ``qrels/<split>.tsv|.jsonl``.

    Rows are checked as in a FollowIR folder (the same readers): a missing or non-string ``text``,
    a non-string ``title``, an ``_id`` given twice with other content (an exact repeat is read
    once), a score that is not a whole finite number, or a (query, document) pair judged twice
    with different scores is a ``DataError`` naming file, line and field. A document with neither text nor title is kept (BEIR corpora have some) and
    counted in a warning. A query's ``instruction`` (mteb 2.x's instruction-retrieval schema) is
    appended to its text as mteb does (``format_query``: ``text + " " + instruction``). Queries
    without qrels are not evaluated (BEIR convention), and neither are queries judged only 0
    (counted in a warning); qrels naming unknown documents or unknown queries exclude those
    queries with a warning giving counts.
    """
    folder = Path(folder)
    if not folder.is_dir():
        raise DataError(folder, None, "not a directory (expected a BEIR-style folder)")
    corpus = {
        did: {"title": row.get("title") or "", "text": row["text"]}
        for _, did, row in _checked_rows(folder / "corpus.jsonl", ("text",), ("title",))
    }
    queries = {
        qid: format_query(row["text"], row.get("instruction"))
        for _, qid, row in _query_rows(folder / "queries.jsonl", ("text",), ("instruction",))
    }
    empty = [d for d, v in corpus.items() if not v["text"].strip() and not v["title"].strip()]
    if empty:
        log.warning(
            "%s: %d documents in corpus.jsonl have no text and no title (kept, as empty documents): %s",
            folder,
            len(empty),
            preview_ids(empty),
        )
    tsv, jsl = folder / "qrels" / f"{split}.tsv", folder / "qrels" / f"{split}.jsonl"
    if tsv.exists():
        qrels = judgments(_tsv_rows(tsv), tsv)
    elif jsl.exists():
        qrels = _load_qrels(jsl)
    else:
        raise DataError(tsv, None, f"file not found (nor {jsl.name})")
    bad_doc = sorted(q for q, d in qrels.items() if any(x not in corpus for x in d))
    bad_q = sorted(q for q in qrels if q not in queries)
    for ids, why in (
        (bad_q, "qrels name queries missing from queries.jsonl"),
        (bad_doc, "have qrels naming documents missing from corpus.jsonl"),
    ):
        if ids:
            log.warning("%s: %d queries %s; excluded: %s", folder, len(ids), why, preview_ids(ids))
    unjudged = sorted(q for q, d in qrels.items() if q in queries and not any(s > 0 for s in d.values()))
    if unjudged:
        log.warning(
            "%s: %d queries have no relevant document (every judgment 0); not evaluated: %s",
            folder,
            len(unjudged),
            preview_ids(unjudged),
        )
    qrels = {
        q: d
        for q, d in qrels.items()
        if q not in set(bad_doc) | set(bad_q) and any(s > 0 for s in d.values())
    }
    if not qrels:
        raise DataError(folder, None, "no query has a relevant document in the qrels")
    return corpus, {q: queries[q] for q in qrels}, qrels
