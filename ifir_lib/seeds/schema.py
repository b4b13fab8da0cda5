"""Seed instances: the schema, loading with precise errors, the bundled set, counterparts.

A seed is one instruction-following training instance (docs/method.md §4)::

    {"id", "query", "instruction", "instruction_type", "domain"?,
     "positive": {"id", "text"},
     "instruction_negatives": [{"id", "text"}, ...],   # 1-3: on topic, excluded by the instruction
     "hard_negatives": [{"id", "text"}, ...],          # 2+: topical, not relevant to the query
     "reference_reversal"?: str,                       # the authors' complementary instruction
     "reference_negative_index"?: int,                 # which instruction negative it targets (N*)
     "aug_instruction"?: str,                          # the wording control: I reworded like I', labels kept
     "abstract_reversal"?: str,                        # I' for N* without N*'s distinctive words
     "narrative"?, "reversal_narrative"?, "aug_narrative"?: str,  # I, I', aug as TREC-style narratives
     "counterpart_positive"?: {"id", "text"},          # the source's non-instruction row for q:
     "counterpart_hard_negatives"?: [{"id", "text"}, ...]}  # its own positive and hard negatives

The three narratives come together or not at all (docs/method.md §4: instruction forms); so do
the two counterpart fields (Promptriever's bare-query row with the seed's ``query_id``, kept by
``seeds.promptriever``; without them ``counterpart`` builds the bare-query view from the seed).

Not handled here: Promptriever rows (``seeds.promptriever``), synthesis output rows
(``synthesis.run``), training examples (``training.trainsets``), the evaluation layouts
(``evaluation.corpora``) and checks of the bundled data as a whole (``pipelines.bundle``).
"""

from __future__ import annotations

import functools
import hashlib
import html
import json
import logging
import sys
import unicodedata
from collections import Counter
from collections.abc import Iterable, Iterator
from pathlib import Path

from ..core.config import SEEDS_PATH
from ..core.errors import ConfigError, DataError
from ..core.jsonl import read_jsonl
from ..core.models import format_document

log = logging.getLogger(__name__)

REQUIRED_FIELDS = (
    "id",
    "query",
    "instruction",
    "positive",
    "instruction_negatives",
    "hard_negatives",
    "instruction_type",
)
# What each stage reads. Synthesis and training fill what they do not need: no hard negatives
# (training pads from the pool) and instruction type "unknown" (as Promptriever rows have none).
STAGE_FIELDS = {
    "bundle": REQUIRED_FIELDS,
    "synthesis": REQUIRED_FIELDS[:5],
    "train": REQUIRED_FIELDS[:5],
}
# What a seed's version depends on (``seed_fingerprint``): training reads only these from Arrow
# seeds to check a reversal's version, without the 30 hard negatives a Promptriever seed carries.
VERSION_FIELDS = REQUIRED_FIELDS[:5]
NARRATIVE_FIELDS = ("narrative", "reversal_narrative", "aug_narrative")
# What a reversal verdict judged (rubric R1-R7, ifir_lib/data/README.md): its row's ``texts_sha256``.
REVERSAL_AUDITED_FIELDS = (
    "query",
    "instruction",
    "positive",
    "instruction_negatives",
    "reference_reversal",
    "reference_negative_index",
    "aug_instruction",
)
COUNTERPART_FIELDS = ("counterpart_positive", "counterpart_hard_negatives")
INSTRUCTION_TYPES = (
    "exclusion",
    "required_attribute",
    "timeframe",
    "geography",
    "audience",
    "format",
    "methodology",
    "stance",
    "length",
    "source",
    "keyword",
)


OPTIONAL_FIELDS = (
    "domain",
    "reference_reversal",
    "reference_negative_index",
    "aug_instruction",
    "abstract_reversal",
    *NARRATIVE_FIELDS,
    *COUNTERPART_FIELDS,
)
SEED_FIELDS = (*REQUIRED_FIELDS, *OPTIONAL_FIELDS)
# Other toolkits' names for seed fields, too far from ours for a spelling match
OTHER_NAMES = {
    "negatives": "hard_negatives",
    "negative": "hard_negatives",
    "neg": "hard_negatives",
    "pos": "positive",
    "positives": "positive",
}


def _check_passage(path, n, field, p):
    """A passage is ``{"id", "text"}``; a ``title`` (BEIR's layout) is folded into the text as the
    evaluation reads a corpus entry (``format_document``: ``title + " " + text``), so a passage
    trains as it is scored."""
    if not isinstance(p, dict):
        raise DataError(path, n, "expected an object with 'id' and 'text'", field)
    for key in ("id", "text"):
        if not isinstance(p.get(key), str) or not p[key].strip():
            raise DataError(path, n, f"missing or empty '{key}'", field)
    if "title" in p:
        title = p.pop("title")
        if title is not None and not isinstance(title, str):
            raise DataError(path, n, "'title' must be a string or null", field)
        if title and title.strip():  # an empty title leaves the text as it is
            p["text"] = format_document({"title": title, "text": p["text"]})


def query_holds_instruction(query: str, instruction: str) -> bool:
    """True when ``query`` is its instruction or ends with it (``normalized_text``), as
    Promptriever's ``query`` column does (``only_query + " " + only_instruction``)."""
    q, i = normalized_text(query), normalized_text(instruction)
    return bool(i) and (q == i or q.endswith(" " + i))


def unknown_fields(row: dict) -> list[str]:
    """The top-level keys of a seed row that the seed schema does not read."""
    return [k for k in row if k not in SEED_FIELDS]


def _check_field_names(row: dict, path, n) -> None:
    """A key that is a misspelling or another toolkit's name of a seed field (``negatives``,
    ``reference_negative_idx``, ``intruction``) is a ``DataError`` naming both: the field it
    stands for would be left out without a word (hard negatives padded at random, N* taken as
    the first instruction negative). Other unknown keys are counted by ``read_seeds``."""
    for key in unknown_fields(row):
        near = _meant(key)
        if near:
            both = f" (the row has {near!r} too: merge them)" if near in row else ""
            raise DataError(path, n, f"is not a seed field; did you mean {near!r}?{both}", key)


@functools.cache
def _meant(key: str) -> str | None:
    """The seed field ``key`` stands for: another toolkit's name, or ours with one letter changed
    (two in names of 10 letters or more: ``intruction``, ``reference_negative_idx``); None for a
    field of its own (``query_id``, ``source``, ``position``)."""
    if key in OTHER_NAMES:
        return OTHER_NAMES[key]
    return next((f for f in SEED_FIELDS if _edits(key.lower(), f) <= (2 if len(f) >= 10 else 1)), None)


def _edits(a: str, b: str) -> int:
    """Levenshtein distance (insertions, deletions, substitutions)."""
    row = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        prev, row[0] = row[0], i
        for j, cb in enumerate(b, 1):
            prev, row[j] = row[j], min(row[j] + 1, row[j - 1] + 1, prev + (ca != cb))
    return row[-1]


def validate_seed(
    row: dict,
    path: str | Path = "<seeds>",
    n: int | None = None,
    min_hard_negatives: int = 2,
    stage: str = "bundle",
) -> dict:
    """Check one seed row for ``stage`` (``STAGE_FIELDS``); raise ``DataError`` naming file, line
    and field. Outside ``bundle``, absent optional fields are filled (no hard negatives, type
    ``unknown``)."""
    if not isinstance(row, dict):
        raise DataError(path, n, f"expected a JSON object, got {type(row).__name__}")
    _check_field_names(row, path, n)
    for f in STAGE_FIELDS[stage]:
        if f not in row:
            raise DataError(path, n, "missing", f)
    if stage != "bundle":
        row.setdefault("hard_negatives", [])
        row.setdefault("instruction_type", "unknown")
        min_hard_negatives = 0
    for f in ("id", "query", "instruction", "instruction_type"):
        if not isinstance(row[f], str) or not row[f].strip():
            raise DataError(path, n, "must be a non-empty string", f)
    if query_holds_instruction(row["query"], row["instruction"]):
        raise DataError(
            path,
            n,
            "ends with the seed's instruction: the model reads query + ' ' + instruction, so it would "
            "read the instruction twice (and a reversed view both instructions); give the bare query",
            "query",
        )
    _check_passage(path, n, "positive", row["positive"])
    for f, lo, hi in (("instruction_negatives", 1, 3), ("hard_negatives", min_hard_negatives, None)):
        lst = row[f]
        if not isinstance(lst, list):
            raise DataError(path, n, "must be a list", f)
        if len(lst) < lo or (hi is not None and len(lst) > hi):
            raise DataError(
                path, n, f"has {len(lst)} passages, expected {lo}{'-' + str(hi) if hi else '+'}", f
            )
        for i, p in enumerate(lst):
            _check_passage(path, n, f"{f}[{i}]", p)
    if (
        "reference_reversal" in row
        and row["reference_reversal"] is not None
        and not isinstance(row["reference_reversal"], str)
    ):
        raise DataError(path, n, "must be a string or null", "reference_reversal")
    k = row.get("reference_negative_index", 0)
    if not isinstance(k, int) or isinstance(k, bool) or not 0 <= k < len(row["instruction_negatives"]):
        raise DataError(
            path,
            n,
            f"must be an index into instruction_negatives (0-{len(row['instruction_negatives']) - 1}), "
            f"got {k!r}",
            "reference_negative_index",
        )
    for f in ("aug_instruction", "abstract_reversal", *NARRATIVE_FIELDS):
        if row.get(f) is not None and (not isinstance(row[f], str) or not row[f].strip()):
            raise DataError(path, n, "must be a non-empty string or absent", f)
    given = [f for f in NARRATIVE_FIELDS if row.get(f) is not None]
    if given and len(given) < len(NARRATIVE_FIELDS):
        missing = next(f for f in NARRATIVE_FIELDS if f not in given)
        raise DataError(path, n, f"the narratives come as a set ({', '.join(NARRATIVE_FIELDS)})", missing)
    _check_counterpart(row, path, n)
    return row


def _check_counterpart(row: dict, path, n) -> None:
    """The optional source counterpart: both fields or neither, a passage and a list of passages."""
    given = [f for f in COUNTERPART_FIELDS if row.get(f) is not None]
    if not given:
        return
    if len(given) < len(COUNTERPART_FIELDS):
        missing = next(f for f in COUNTERPART_FIELDS if f not in given)
        raise DataError(
            path, n, f"the counterpart comes as a pair ({', '.join(COUNTERPART_FIELDS)})", missing
        )
    _check_passage(path, n, "counterpart_positive", row["counterpart_positive"])
    if not isinstance(row["counterpart_hard_negatives"], list):
        raise DataError(path, n, "must be a list", "counterpart_hard_negatives")
    for i, p in enumerate(row["counterpart_hard_negatives"]):
        _check_passage(path, n, f"counterpart_hard_negatives[{i}]", p)


def passage_fields(seed: dict, counterparts: bool = True) -> Iterator[tuple[str, dict]]:
    """Each passage of a seed with its field: ``('positive', {...})``,
    ``('instruction_negatives[1]', {...})``, ``('hard_negatives[0]', {...})`` and (``counterparts``)
    ``counterpart_positive`` and ``counterpart_hard_negatives[i]`` when the seed has them."""
    yield "positive", seed["positive"]
    for f in ("instruction_negatives", "hard_negatives"):
        for i, p in enumerate(seed.get(f) or ()):
            yield f"{f}[{i}]", p
    if counterparts and seed.get("counterpart_positive"):
        yield "counterpart_positive", seed["counterpart_positive"]
        for i, p in enumerate(seed.get("counterpart_hard_negatives") or ()):
            yield f"counterpart_hard_negatives[{i}]", p


def check_unique_ids(ids: Iterable[str], seeds_name: str) -> None:
    """A ``ConfigError`` naming the first seed id given twice, for seeds that come from Python or
    an Arrow folder (a file's repeats are ``read_seeds``' ``DataError``, a Promptriever source's
    ``promptriever._SeedIds``'). Reversals, curation decisions and the held-out split are keyed by
    seed id, so a second seed under one id (a second export numbered from the same ids) would
    train with the other seed's reversal."""
    first: dict[str, int] = {}
    for n, sid in enumerate(ids, 1):
        prev = first.setdefault(sid, n)
        if prev != n:
            raise ConfigError(
                f"{seeds_name}: seed id {sid!r} is given twice (seeds #{prev} and #{n}): reversals, "
                "curation and the held-out split are keyed by id; give each seed its own id"
            )


def passage_text_clashes(
    numbered: Iterable[tuple[int, dict]], path, fields=passage_fields
) -> Iterator[DataError]:
    """A ``DataError`` (file, line, field) for each passage whose id named another text on an
    earlier line; ``fields(row)`` yields a row's ``(field, passage)`` (a seed's by default). Training tells passages apart by id (a batch encodes each id once), so two
    seed files that both number their passages ``pos-1``, ``neg-1`` ... would have one seed's
    positive encoded with the other's text. The same id with the same text is fine (mined hard
    negatives reuse passages). ``read_seeds`` raises the first; ``ifir data validate`` lists all.
    """
    first: dict[str, tuple[str, int]] = {}  # passage id -> (its first text, that line)
    for n, seed in numbered:
        for fld, p in fields(seed):
            text, m = first.setdefault(p["id"], (p["text"], n))
            if text != p["text"]:
                yield DataError(path, n, f"passage id {p['id']!r} has another text on line {m}", fld)


# What two exports of one text differ by beyond Unicode form: typographic quotes and dashes
# (word processors) and format characters (soft hyphens, zero-width spaces, byte order marks:
# Unicode category Cf), each mapped to what ``normalized_text`` compares.
@functools.cache
def _respell() -> dict[str, str]:
    return {
        **{chr(c): "" for c in range(sys.maxunicode + 1) if unicodedata.category(chr(c)) == "Cf"},
        **dict.fromkeys("\u2018\u2019\u201a\u201b\u2032", "'"),
        **dict.fromkeys("\u201c\u201d\u201e\u201f\u2033", '"'),
        **dict.fromkeys("\u2010\u2011\u2012\u2013\u2014\u2015\u2212", "-"),
    }


def normalized_text(text: str) -> str:
    """Text as copies are compared: HTML entities decoded, format characters (soft hyphen,
    zero-width space: Unicode category Cf) dropped, typographic quotes and dashes made ASCII,
    Unicode NFKC, casefolded, every run of whitespace one space, stripped
    (``'  The  Ｃauseway ' -> 'the causeway'``, ``'Don&#39;t\u00adstop’s' -> "don'tstop's"``;
    NFC and NFD spellings agree)."""
    if not text.isascii() or "&" in text:  # plain ASCII text without entities has none of these
        text = unicodedata.normalize("NFKC", html.unescape(text))
        respell = _respell()
        for ch in respell.keys() & set(text):  # a set operation: most texts hold none
            text = text.replace(ch, respell[ch])
    return " ".join(unicodedata.normalize("NFKC", text.casefold()).split())


def text_key(*texts: str) -> bytes:
    """A 20-byte digest of ``texts`` as copies are compared (``normalized_text``), to key copies
    by: a million seeds' keys fit in ~60 MB where the texts would take a gigabyte."""
    blob = "\x1f".join(normalized_text(str(t)) for t in texts)
    return hashlib.sha1(blob.encode("utf-8")).digest()


def _content_key(seed: dict) -> bytes:
    """What makes two seeds the same seed whatever their ids: the query, instruction and positive
    text, Unicode form, case and spacing aside (``normalized_text``; a 20-byte digest: a million
    seeds' keys fit in ~60 MB)."""
    return text_key(seed["query"], seed["instruction"], seed["positive"]["text"])


def same_seed_copies(seeds: Iterable[dict]) -> dict[str, str]:
    """``{copy id: first id}`` for seeds that repeat an earlier seed's normalised query,
    instruction and positive text under another id (two exports of one seed set, concatenated).
    Example: ``a`` and ``b`` with the same texts, in that order -> ``{"b": "a"}``."""
    first: dict[bytes, str] = {}  # content key -> the first id with it
    copies = {}
    for s in seeds:
        sid = first.setdefault(_content_key(s), s["id"])
        if sid != s["id"]:
            copies[s["id"]] = sid
    return copies


def _warn_copies(path, rows: list[tuple[int, dict]]) -> None:
    copies = same_seed_copies(s for _, s in rows)
    if copies:
        pairs = ", ".join(f"{a!r} = {b!r}" for b, a in list(copies.items())[:5])
        log.warning(
            "%s: %d seed(s) repeat another seed's query, instruction and positive under a new id "
            "(%s%s); the held-out split keeps the copies on one side",
            path,
            len(copies),
            pairs,
            ", ..." if len(copies) > 5 else "",
        )


def read_seeds(
    path: str | Path = SEEDS_PATH,
    min_hard_negatives: int = 2,
    stage: str = "bundle",
    check_passage_texts: bool = True,
) -> list[tuple[int, dict]]:
    """``(line_number, seed)`` for every row of a seed JSONL file, each checked for ``stage``;
    duplicate ids, a passage id with two texts (``passage_text_clashes``; ``check_passage_texts``
    False leaves them to the caller, which lists them) and a file without rows are errors.
    Seeds that repeat another under a new id (``same_seed_copies``) get one warning, and so do
    fields the schema does not read (``unknown_fields``; a misspelt field is an error).
    ``load_seeds`` without the line numbers, which ``ifir data validate`` names in its problems."""
    if stage not in STAGE_FIELDS:
        raise ValueError(f"unknown stage {stage!r}; choose from {', '.join(STAGE_FIELDS)}")
    rows, seen, unknown = [], {}, Counter()
    for n, row in read_jsonl(path, unique_keys=True):
        validate_seed(row, path, n, min_hard_negatives=min_hard_negatives, stage=stage)
        unknown.update(unknown_fields(row))
        if row["id"] in seen:
            raise DataError(path, n, f"duplicate id {row['id']!r} (first on line {seen[row['id']]})", "id")
        seen[row["id"]] = n
        rows.append((n, row))
    if not rows:
        raise DataError(path, None, "no seed rows")
    if unknown:
        log.warning(
            "%s: fields the seed schema does not read, left out: %s",
            path,
            ", ".join(f"{k} ({c} row{'s' * (c > 1)})" for k, c in unknown.most_common(8)),
        )
    if check_passage_texts:
        for err in passage_text_clashes(rows, path):
            raise err
    _warn_copies(path, rows)
    return rows


def load_seeds(
    path: str | Path = SEEDS_PATH,
    limit: int | None = None,
    min_hard_negatives: int = 2,
    stage: str = "bundle",
) -> list[dict]:
    """Read and validate a seed JSONL file for ``stage`` (``read_seeds``); duplicate ids and a
    passage id with two texts are errors.

    Every row is checked before anything is returned, so a bad line 900 fails before line 1 is
    sent to an LLM.
    """
    seeds = [row for _, row in read_seeds(path, min_hard_negatives, stage)]
    return seeds[:limit] if limit else seeds


def counterpart(seed: dict) -> dict:
    """The non-instruction counterpart of a seed built from the seed itself (docs/method.md §4,
    Promptriever's `only_query`), for seeds without the source's own (``COUNTERPART_FIELDS``).

    The bare query keeps the positive; the instruction negatives are *dropped*, not used as
    negatives, because without the instruction they are relevant too.
    """
    return {
        "id": seed["id"] + "::q",
        "query": seed["query"],
        "instruction": "",
        "positive": seed["positive"],
        "negatives": list(seed["hard_negatives"]),
    }


FINGERPRINT_VERSION = "v2:"  # v2 adds the other instruction negatives; v1 digests had no prefix


def seed_fingerprint(seed: dict, negative_index: int) -> str:
    """What a reversal of ``seed`` against its instruction negative ``negative_index`` was written
    from: ``v2:`` and a 16-hex digest of the query, instruction, positive, that negative and the
    seed's other instruction negatives, in order (ids and texts). The prompt shows the others as
    "must stay irrelevant" and training labels them irrelevant under I', so a reversal written
    before they changed is stale too.

    Synthesis stores it in each row (``seed_sha``) and training checks it, so a reversal written
    for an earlier version of a seed (edited text, reordered negatives, another seeds file with the
    same ids) is never paired with the current one. An index past the seed's negatives counts as
    ``None`` there, so the digest differs from any real negative's. Rows written before v2 carry a
    v1 digest (without the other negatives), still checked as such (``written_for``).
    """
    negatives = seed.get("instruction_negatives") or []
    others = [_passage(p) for i, p in enumerate(negatives) if i != negative_index]
    return FINGERPRINT_VERSION + _digest([*_fingerprint_parts(seed, negative_index), others])


def _fingerprint_v1(seed: dict, negative_index: int) -> str:
    """The digest rows carried before v2: query, instruction, positive and N* only."""
    return _digest(_fingerprint_parts(seed, negative_index))


def _fingerprint_parts(seed: dict, negative_index: int) -> list:
    negatives = seed.get("instruction_negatives") or []
    neg = negatives[negative_index] if 0 <= negative_index < len(negatives) else None
    return [seed.get("query"), seed.get("instruction"), _passage(seed.get("positive")), _passage(neg)]


def _passage(p):  # id and text only: a seed and its Arrow copy (other fields dropped) agree
    return [p.get("id"), p.get("text")] if isinstance(p, dict) else None


def _digest(parts: list) -> str:
    blob = json.dumps(parts, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()[:16]


def written_for(row: dict, seed: dict) -> bool:
    """Whether a synthesis row or reversal was written for ``seed`` as it is now: its
    ``negative_index`` is one of the seed's instruction negatives, its ``seed_sha`` (when it has
    one) is ``seed_fingerprint(seed, negative_index)`` (a v1 digest: without the other negatives),
    and its ``negative_id`` (when it has one) is that negative's id. Rows of earlier versions lack
    both fields: only the index is checked. The one rule that synthesis (what to redo), verify, the
    explorer and training apply."""
    idx, negs = row.get("negative_index", 0), seed.get("instruction_negatives") or []
    if not isinstance(idx, int) or isinstance(idx, bool) or not 0 <= idx < len(negs):
        return False
    sha = row.get("seed_sha")
    if sha is not None:
        if not isinstance(sha, str):
            return False  # a hand edit or another tool's row: not a version of this seed
        now = seed_fingerprint if sha.startswith(FINGERPRINT_VERSION) else _fingerprint_v1
        if sha != now(seed, idx):
            return False
    return row.get("negative_id") is None or row["negative_id"] == negs[idx]["id"]
