"""Polarity-reversal synthesis (arXiv 2604.18845, §1 and Appendix A): seeds -> reversal rows.

For each seed (query q, instruction I, positive P+, instruction negatives N1..Nk) and a chosen
negative N*, a backend writes a complementary instruction I' under which N* is relevant and P+
is not. Backends: ``openai`` and ``transformers`` (an LLM prompted with the Appendix A structure,
``templates/reversal_prompt.j2``), ``template`` (a deterministic negation of I: an honest, naive
baseline) and ``reference`` (the seed's bundled ``reference_reversal``).

The run is resumable and shardable: rows are appended to a JSONL file as they arrive (a row that
cost a request is flushed at once and fsync'd right after, off the event loop); a restart
repairs a line cut by a kill, skips the keys already written, and retries rows that failed; LLM
answers are cached on disk, so a rerun sends no request. One row per key::

    {"key": "<seed_id>" | "<seed_id>#<neg_index>", "seed_id", "negative_index", "negative_id",
     "backend", "model", "status": "accepted"|"declined"|"rejected"|"failed", "reason",
     "reversal", "reasoning", "raw", "template", "template_version",
     "usage": {"prompt_tokens", "completion_tokens"}, "cost_usd", "instruction_type",
     "attempts", "cached", "elapsed_s"}

Not handled here: HTTP, retries and the cache (``backends``); the retriever and LLM-judge checks
(``verify``); turning rows into training examples (``trainsets``); two processes appending to
the same output file (give each ``--shard`` its own ``--out``). Validation is a filter for
broken outputs, not a proof that a reversal is correct (the paper applied no filter).
"""
from __future__ import annotations

import asyncio
import collections
import dataclasses
import difflib
import functools
import hashlib
import json
import logging
import os
import random
import re
import time
from dataclasses import dataclass, field
from pathlib import Path

from . import config as _config
from .backends import LLM, BackendError, RequestFailed, ResponseCache, atomic_write_text, run_sync
from .data import load_seeds
from .errors import DataError

log = logging.getLogger(__name__)

BACKENDS = ("openai", "transformers", "template", "reference")
NEGATIVE_MODES = ("first", "random", "all")
STATUSES = ("accepted", "declined", "rejected", "failed")

# USD per 1M tokens (input, output). Estimates from public price lists in 2025-26; override per
# run (``SynthesisConfig(prices=...)`` or ``--price``). Local models cost 0.
DEFAULT_PRICES: dict[str, tuple[float, float]] = {
    "Qwen/Qwen3-Next-80B-A3B-Instruct": (0.15, 1.50),
    "gpt-4o-mini": (0.15, 0.60),
    "gpt-4.1-mini": (0.40, 1.60),
    "gpt-4.1": (2.00, 8.00),
    "gpt-4o": (2.50, 10.00),
    "smollm2": (0.0, 0.0),
}


@dataclass(frozen=True)
class SynthesisConfig:
    """Settings for one synthesis run; defaults are the paper-scale run (arXiv 2604.18845).

    The paper used Qwen3-Next-80B-A3B-Instruct and does not state decoding settings or which
    negative becomes N*; temperature 0.7 / top_p 0.8 are Qwen's recommended Instruct settings,
    and N* = the first instruction negative. ``smoke()`` runs SmolLM2-135M on 2 seeds on a CPU.
    """
    backend: str = "openai"
    model: str = "Qwen/Qwen3-Next-80B-A3B-Instruct"
    base_url: str | None = None               # None: $OPENAI_BASE_URL or api.openai.com
    api_key_env: str = "OPENAI_API_KEY"       # the key itself is never stored
    temperature: float = 0.7
    top_p: float = 0.8
    max_tokens: int = 2048                    # room for the step-by-step reasoning
    timeout_s: float = 120.0                  # per request
    concurrency: int = 64
    max_retries: int = 6
    backoff_base_s: float = 1.0
    backoff_max_s: float = 60.0
    negative: str = "first"                   # which negative is N*: first | random | all
    negative_seed: int = 0                    # for negative="random"
    shard: str | None = None                  # "i/n"
    limit: int | None = None                  # first N seeds (before sharding)
    template: str = "reversal_prompt.j2"      # a name in ifir_lib/templates or a path
    max_sentences: int = 4
    copy_ratio: float = 0.9                   # difflib ratio above which I' is a near-copy of I
    copy_jaccard: float = 0.8                 # word-set Jaccard above which I' is a near-copy
    use_cache: bool = True
    cache_dir: str | None = None              # None: config.cache_dir()/llm (IFIR_CACHE overrides)
    retry_failed: bool = True                 # on resume, drop failed rows and try them again
    fsync: bool = True
    progress: bool = True
    device: str | None = None                 # transformers backend; None: cuda if available
    prices: dict = field(default_factory=lambda: dict(DEFAULT_PRICES))

    def __post_init__(self):
        if self.backend not in BACKENDS:
            raise ValueError(f"unknown backend {self.backend!r}; choose from {', '.join(BACKENDS)}")
        if self.negative not in NEGATIVE_MODES:
            raise ValueError(f"unknown negative mode {self.negative!r}; choose from {', '.join(NEGATIVE_MODES)}")
        if self.backend == "reference" and self.negative != "first":
            raise ValueError("backend 'reference' has one reversal per seed, for the first instruction negative; "
                             "use --negative first")
        if self.concurrency < 1:
            raise ValueError(f"concurrency must be >= 1, got {self.concurrency}")
        if self.shard is not None:
            parse_shard(self.shard)

    @classmethod
    def smoke(cls, **overrides) -> "SynthesisConfig":
        """SmolLM2-135M in-process, 2 seeds, short answers: under a minute on a laptop CPU
        (most of it reading the GGUF file)."""
        base = dict(backend="transformers", model="smollm2", max_tokens=64, temperature=0.0, concurrency=1,
                    limit=2, timeout_s=60.0)
        return cls(**{**base, **overrides})

    def replace(self, **changes) -> "SynthesisConfig":
        return dataclasses.replace(self, **changes)

    def decoding(self) -> dict:
        """What goes into each request (and into the cache key)."""
        return {"temperature": self.temperature, "top_p": self.top_p, "max_tokens": self.max_tokens}

    def price(self) -> tuple[float, float] | None:
        return self.prices.get(self.model)

    def llm_cache_dir(self) -> Path:
        return Path(self.cache_dir) if self.cache_dir else _config.cache_dir() / "llm"

    def to_dict(self) -> dict:
        d = dataclasses.asdict(self)
        d["prices"] = {k: list(v) for k, v in self.prices.items()}
        return d


# ---- prompt templates -------------------------------------------------------------------------
@dataclass(frozen=True)
class PromptTemplate:
    """A Jinja template with the name and version its header declares, plus a hash of its text."""
    name: str
    version: str
    sha: str
    source: str

    @property
    def full_version(self) -> str:
        """``"1.0+3fa2b1c0"``: the declared version, and the text's hash (catches silent edits)."""
        return f"{self.version}+{self.sha}"

    def render(self, **variables) -> str:
        return _compile(self.source).render(**variables).strip() + "\n"


@functools.lru_cache(maxsize=16)
def _compile(source: str):
    import jinja2

    # StrictUndefined: a misspelt variable is an error, not a silently empty section of the prompt
    env = jinja2.Environment(undefined=jinja2.StrictUndefined, keep_trailing_newline=False, autoescape=False)
    return env.from_string(source)


@functools.lru_cache(maxsize=16)
def load_template(name: str) -> PromptTemplate:
    """Load ``name`` from ``ifir_lib/templates`` (or a path); read ``version:`` from its header."""
    path = Path(name)
    if not path.exists():
        path = _config.TEMPLATES_DIR / name
    if not path.exists():
        raise FileNotFoundError(f"prompt template {name!r} not found (looked in {_config.TEMPLATES_DIR})")
    source = path.read_text(encoding="utf-8")
    m = re.search(r"\{#-?\s*template:\s*([\w.-]+);\s*version:\s*([\w.+-]+)", source)
    tname, version = (m.group(1), m.group(2)) if m else (path.stem.removesuffix(".j2"), "unversioned")
    return PromptTemplate(tname, version, hashlib.sha256(source.encode()).hexdigest()[:8], source)


def render_prompt(seed: dict, negative_index: int, template: PromptTemplate | None = None) -> str:
    """The Appendix A prompt for ``seed`` with N* = ``instruction_negatives[negative_index]``."""
    template = template or load_template(SynthesisConfig.template)
    negs = seed["instruction_negatives"]
    return template.render(
        query=seed["query"], original_instruction=seed["instruction"], positive_passage=seed["positive"]["text"],
        specific_instruction_negative=negs[negative_index]["text"],
        remaining_instruction_negatives=[p["text"] for i, p in enumerate(negs) if i != negative_index])


# ---- which negative is N*; keys; shards ----------------------------------------------------------
def choose_negatives(seed: dict, mode: str = "first", rng_seed: int = 0) -> list[int]:
    """Indices of the negatives that become N*: ``first -> [0]``, ``all -> [0..k-1]``, ``random -> [j]``.

    ``random`` draws from ``Random(f"{rng_seed}:{seed_id}")``, so the choice depends on the seed
    alone, not on file order, ``--limit`` or sharding.
    """
    k = len(seed["instruction_negatives"])
    if mode == "first":
        return [0]
    if mode == "all":
        return list(range(k))
    if mode == "random":
        return [random.Random(f"{rng_seed}:{seed['id']}").randrange(k)]
    raise ValueError(f"unknown negative mode {mode!r}")


def row_key(seed_id: str, negative_index: int, mode: str) -> str:
    """``"s1"`` for one reversal per seed; ``"s1#2"`` under ``negative='all'``."""
    return f"{seed_id}#{negative_index}" if mode == "all" else seed_id


def parse_shard(shard: str) -> tuple[int, int]:
    """``"1/4" -> (1, 4)``; raise ValueError unless ``0 <= i < n``."""
    m = re.fullmatch(r"\s*(\d+)\s*/\s*(\d+)\s*", str(shard))
    if not m or not 0 <= int(m.group(1)) < int(m.group(2)):
        raise ValueError(f"--shard expects i/n with 0 <= i < n, got {shard!r}")
    return int(m.group(1)), int(m.group(2))


def shard_of(seed_id: str, num_shards: int) -> int:
    """Stable across machines and Python runs (unlike ``hash()``): sha256 of the id, mod n."""
    return int(hashlib.sha256(seed_id.encode("utf-8")).hexdigest()[:16], 16) % num_shards


def plan(seeds: list[dict], mode: str = "first", rng_seed: int = 0, shard: str | None = None) -> list[tuple[str, dict, int]]:
    """``[(key, seed, negative_index), ...]`` for this shard, in seed order."""
    i, n = parse_shard(shard) if shard else (0, 1)
    return [(row_key(s["id"], j, mode), s, j) for s in seeds if n == 1 or shard_of(s["id"], n) == i
            for j in choose_negatives(s, mode, rng_seed)]


# ---- parsing and validation ------------------------------------------------------------------------
@dataclass(frozen=True)
class Parsed:
    status: str                 # accepted | declined | rejected
    reversal: str | None
    reasoning: str | None
    reason: str | None


_ANSWER = re.compile(r"<answer>(.*?)</answer>", re.S | re.I)
_NEW = re.compile(r"<new_instruction>(.*?)</new_instruction>", re.S | re.I)
_META = [  # meta-task language: the instruction must read well to someone who never saw the passages
    (r"\b(the|this|that|these|those|each|every|any|other|both|first|second|third|last|given|chosen|specific|"
     r"positive|negative|remaining)\s+passages?\b(?!\s+of\b)|\bpassages?\s+(\d|[a-c]\b|id)", "passage"),
    (r"\b(instruction|hard)[\s-]+negatives?\b", "instruction negative"),
    (r"\b(positive|negative)\s+(passages?|documents?|examples?|samples?)\b", "positive/negative passage"),
    (r"\bthe\s+(positive|negatives?)\b(?!\s+(?!ones?\b)[a-z])", "the positive/negative"),
    (r"(?-i:N\*|P\+|\bN[1-9]\b|\bN_\{?i\}?)", "passage label"),  # not "N12" (an Ontario form)
    (r"\b(the\s+)?(document|text|article)s?\s+(above|below)\b|\b(above|aforementioned|given|provided|chosen|"
     r"specific|remaining)\s+(documents?|texts?|passages?|articles?)\b", "the document above"),
    (r"\b(original|new|complementary|reversed|previous)\s+instruction\b", "original/new instruction"),
    (r"\bpolarity\b|\brelevance\s+labels?\b", "task vocabulary"),
]
# one pass over the text instead of one per rule; ``lastgroup`` names the rule that matched
_META_RX = re.compile("|".join(f"(?P<m{i}>{rx})" for i, (rx, _) in enumerate(_META)), re.I)
# every rule needs one of these substrings (or a capital N / P): a cheap screen before the regex
_META_WORDS = ("passage", "negative", "positive", "above", "below", "aforementioned", "given", "provided", "chosen",
               "specific", "remaining", "instruction", "polarity", "relevance")
_WORDS = re.compile(r"[a-z0-9]+")
_SENT = re.compile(r"(?<!\b[A-Z])(?<!\be\.g)(?<!\bi\.e)(?<!\betc)(?<!\bvs)(?<!\bDr)(?<!\bSt)[.!?]+[\"')\]]*\s+(?=[\"'(\[]?[A-Z0-9])")


def count_sentences(text: str) -> int:
    """``'Use UK data. Skip blogs (e.g. Medium).' -> 2``; abbreviations do not end a sentence."""
    return len([s for s in _SENT.split(text.strip()) if s.strip()])


def parse_answer(raw: str | None) -> Parsed:
    """Extract ``<answer><new_instruction>...</new_instruction></answer>`` (the last answer block).

    ``'...<answer>None</answer>' -> declined``; no or malformed tags, or empty text -> rejected.
    The text before the answer is kept as ``reasoning``.
    """
    raw = raw or ""
    blocks = list(_ANSWER.finditer(raw))
    if not blocks:
        pos = raw.lower().rfind("<answer>")
        reasoning = (raw[:pos] if pos >= 0 else raw).strip() or None
        why = "garbled tags: <answer> not closed" if pos >= 0 else "missing <answer> tag"
        return Parsed("rejected", None, reasoning, why)
    m = blocks[-1]
    reasoning = raw[:m.start()].strip() or None
    body = m.group(1).strip()
    if re.fullmatch(r"none\.?", body, re.I):
        return Parsed("declined", None, reasoning, None)
    inner = _NEW.search(body)
    if inner is None:
        return Parsed("rejected", None, reasoning, "garbled tags: no <new_instruction>...</new_instruction> in <answer>")
    text = re.sub(r"\s+", " ", inner.group(1)).strip().strip("\"'“”").strip()
    if re.fullmatch(r"none\.?", text, re.I):
        return Parsed("declined", None, reasoning, None)
    if not text:
        return Parsed("rejected", None, reasoning, "empty instruction")
    return Parsed("accepted", text, reasoning, None)


def _mentions(text: str, token: str) -> bool:
    """``token`` occurs in ``text`` not glued to a word character or hyphen (no regex per id)."""
    start = text.find(token)
    while start >= 0:
        end = start + len(token)
        if (start == 0 or not (text[start - 1].isalnum() or text[start - 1] in "_-")) and \
                (end == len(text) or not (text[end].isalnum() or text[end] in "_-")):
            return True
        start = text.find(token, start + 1)
    return False


def _quick_ratio(a: str, b: str) -> float:
    """``difflib.SequenceMatcher(None, a, b).quick_ratio()`` with C-speed counting."""
    return 2 * sum((collections.Counter(a) & collections.Counter(b)).values()) / (len(a) + len(b) or 1)


def _jaccard(a: str, b: str) -> float:
    wa, wb = set(_WORDS.findall(a.lower())), set(_WORDS.findall(b.lower()))
    return len(wa & wb) / len(wa | wb) if wa | wb else 1.0


def check_reversal(text: str, seed: dict, *, max_sentences: int = 4, copy_ratio: float = 0.9,
                   copy_jaccard: float = 0.8, check_copy: bool = True) -> str | None:
    """Why ``text`` is not a usable reversal of ``seed``, or None when it passes.

    Rejects passage ids, meta-task language (arXiv 2604.18845 App. A guardrails), a near-copy of
    the original instruction (difflib ratio > ``copy_ratio`` or word Jaccard > ``copy_jaccard``),
    and more than ``max_sentences`` sentences (the prompt asks for 1-2).
    """
    low = text.lower()
    for p in [seed["positive"], *seed["instruction_negatives"], *seed.get("hard_negatives", [])]:
        if len(str(p["id"])) >= 3 and _mentions(low, str(p["id"]).lower()):
            return f"names passage id {p['id']!r}"
    screen = "N" in text or "P+" in text or any(w in low for w in _META_WORDS)
    m = _META_RX.search(text) if screen else None
    if m:
        return f"meta-task language: {m.group(0)!r} ({_META[int(m.lastgroup[1:])][1]})"
    if check_copy:
        orig = seed["instruction"].lower()
        # cheap upper bounds of difflib's ratio() first: lengths, then character multisets
        close = 2 * min(len(low), len(orig)) / (len(low) + len(orig) or 1) > copy_ratio
        close = close and _quick_ratio(low, orig) > copy_ratio
        ratio = difflib.SequenceMatcher(None, low, orig).ratio() if close else 0.0
        if ratio > copy_ratio:
            return f"near-copy of the original instruction (difflib ratio {ratio:.2f})"
        jac = _jaccard(text, orig)
        if jac > copy_jaccard:
            return f"near-copy of the original instruction (word Jaccard {jac:.2f})"
    # n sentences need n-1 terminators: skip the regex when there are too few to exceed the max
    n = count_sentences(text) if sum(map(text.count, ".!?")) >= max_sentences else 1
    if n > max_sentences:
        return f"too long: {n} sentences (max {max_sentences})"
    return None


def parse_and_validate(raw: str | None, seed: dict, cfg: "SynthesisConfig | None" = None, check_copy: bool = True) -> Parsed:
    """``parse_answer`` then ``check_reversal``: an accepted answer may become rejected, with a reason."""
    cfg = cfg or SynthesisConfig()
    p = parse_answer(raw)
    if p.status != "accepted":
        return p
    why = check_reversal(p.reversal, seed, max_sentences=cfg.max_sentences, copy_ratio=cfg.copy_ratio,
                         copy_jaccard=cfg.copy_jaccard, check_copy=check_copy)
    return dataclasses.replace(p, status="rejected", reason=why) if why else p


# ---- the template baseline --------------------------------------------------------------------------
# Polarity swaps, tried class by class; one swap per sentence, because two swaps in one sentence
# ("must include" -> "must not exclude") cancel out. Keys are matched case-insensitively at word
# boundaries, the leftmost match of the first class that has one wins; "^" anchors a key to the
# start of the sentence ("Only X" -> "Anything except X", but not "I only want").
_SWAP_CLASSES = [
    {"must not": "must", "should not": "should", "cannot": "can", "must": "must not", "should": "should not",
     "are not relevant": "are relevant", "is not relevant": "is relevant", "are relevant": "are not relevant",
     "is relevant": "is not relevant", "are irrelevant": "are relevant", "is irrelevant": "is relevant",
     "i only want": "I do not want", "i only need": "I do not need", "i do not want": "I want", "i don't want": "I want",
     "i do not need": "I need", "i don't need": "I need", "i want": "I do not want", "i need": "I do not need",
     "i'm looking for": "I'm not looking for", "i am looking for": "I am not looking for",
     "i'm after": "I'm not after", "i am after": "I am not after", "i'm interested in": "I'm not interested in"},
    {"exclude": "only include", "excluding": "only including", "ignore": "only consider", "avoid": "focus on",
     "omit": "only keep", "leave out": "only keep", "filter out": "keep only", "do not include": "only include",
     "don't include": "only include", "do not consider": "only consider", "only include": "exclude",
     "only consider": "do not consider", "only return": "do not return", "only retrieve": "do not retrieve",
     "focus on": "avoid", "include": "exclude", "including": "excluding", "only give me": "do not give me",
     "give me": "do not give me", "only show me": "do not show me", "show me": "do not show me"},
    {"^only": "anything except", "before": "after", "after": "before", "more than": "less than",
     "less than": "more than", "at least": "at most", "at most": "at least", "newer than": "older than",
     "older than": "newer than", "recent": "older", "without": "with", "with": "without"},
]
_SWAP_RX = [re.compile("|".join((r"^\s*\b" if k[0] == "^" else r"\b") + f"({re.escape(k.lstrip('^'))})" + r"\b"
                                for k in sorted(t, key=len, reverse=True)), re.I) for t in _SWAP_CLASSES]

# the baseline's "template version": bump the number when the rules change; the hash catches edits
TEMPLATE_BASELINE_VERSION = "1.1+" + hashlib.sha256(repr(_SWAP_CLASSES).encode()).hexdigest()[:8]


def _swap_once(sentence: str) -> str | None:
    for table, rx in zip(_SWAP_CLASSES, _SWAP_RX):
        m = rx.search(sentence)
        if m:
            g = m.lastindex
            word = m.group(g)
            new = table.get(word.lower()) or table["^" + word.lower()]
            if word[0].isupper() and new[0].islower():
                new = new[0].upper() + new[1:]
            return sentence[:m.start(g)] + new + sentence[m.end(g):]
    return None


def template_reversal(instruction: str) -> str:
    """A deterministic negation of ``instruction``, sentence by sentence (the honest baseline).

    ``'Exclude studies published before 2010.' -> 'Only include studies published before 2010.'``;
    ``'Documents must be peer-reviewed.' -> 'Documents must not be peer-reviewed.'``; with no
    polarity word to flip: ``'Find documents that do not satisfy this requirement: <I>'``. Unlike
    the paper's reversal it ignores N*, so the other instruction negatives may become relevant too.
    """
    sentences = [s for s in _SENT.split(instruction.strip()) if s.strip()]
    out, changed = [], False
    for s in sentences:
        new = _swap_once(s)
        changed |= new is not None
        out.append((new or s).strip())
    if not changed:
        return f"Find documents that do not satisfy this requirement: {instruction.strip()}"
    return " ".join(o if o[-1:] in ".!?" else o + "." for o in out)


# ---- output file: resume, load, merge --------------------------------------------------------------
def _read_rows(path: Path) -> tuple[list[dict], bool]:
    """Rows of a JSONL output, and whether the file needs repair (its last line lacks a newline).

    A kill can only cut the *last* line: if it still parses it is kept, otherwise dropped. A bad
    line anywhere else is corruption, not a kill, and raises ``DataError``.
    """
    lines = path.read_bytes().split(b"\n")
    tail = lines.pop()  # b"" when the file ends with a newline
    rows = []
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as e:
            raise DataError(path, n, f"invalid JSON ({e.msg}); only the last line may be cut by a kill") from None
        if not isinstance(row, dict) or "key" not in row:
            raise DataError(path, n, "missing", "key")
        rows.append(row)
    if tail.strip():
        try:
            row = json.loads(tail)
        except json.JSONDecodeError:
            row = None
        if isinstance(row, dict) and "key" in row:
            rows.append(row)  # complete JSON: only the newline was lost
        else:
            log.warning("%s: dropping a cut last line (%d bytes) left by an interrupted run", path, len(tail))
    return rows, tail != b""


def load_synthesis(path: str | Path) -> list[dict]:
    """Rows of a synthesis output, one per key (first kept), ignoring a cut last line.

    Read-only: the file is not repaired (``synthesize`` does that when it resumes).
    """
    path = Path(path)
    if not path.exists():
        raise DataError(path, None, "file not found")
    rows, _ = _read_rows(path)
    seen, out = set(), []
    for r in rows:
        if r["key"] not in seen:
            seen.add(r["key"])
            out.append(r)
    return out


def _dumps(row: dict) -> str:
    return json.dumps(row, ensure_ascii=False) + "\n"


def _prepare_output(path: Path, retry_failed: bool) -> set[str]:
    """Make ``path`` a clean resume point; return the keys already done.

    Drops a cut last line, duplicate keys and (with ``retry_failed``) failed rows, rewriting the
    file atomically only when something changed, so a kill during this step loses nothing.
    """
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        return set()
    rows, cut = _read_rows(path)
    keep, done = [], set()
    for r in rows:
        if r["key"] in done or (retry_failed and r.get("status") == "failed"):
            continue
        done.add(r["key"])
        keep.append(r)
    if cut or len(keep) != len(rows):
        log.info("%s: rewriting (%d rows kept of %d, cut last line: %s)", path, len(keep), len(rows), cut)
        atomic_write_text(path, "".join(_dumps(r) for r in keep))
    return done


@dataclass
class MergeSummary:
    out: str
    rows: int
    duplicates: int
    conflicts: int
    missing: list[str]
    failed: int
    unexpected: int

    @property
    def complete(self) -> bool:
        return not self.missing and not self.failed


def merge_shards(paths: list[str | Path], out: str | Path, seeds: list[dict] | str | Path | None = None,
                 negative: str | None = None, rng_seed: int = 0) -> MergeSummary:
    """Join shard outputs into ``out`` (written atomically), one row per key.

    Duplicates keep the first non-failed row; two different accepted reversals for one key are
    counted as ``conflicts``. With ``seeds``, completeness is checked against the keys the
    seeds imply (``negative`` defaults to ``all`` when keys carry ``#``, else ``first``).
    """
    best: dict[str, dict] = {}
    dups = conflicts = 0
    for p in paths:
        for r in load_synthesis(p):
            k = r["key"]
            if k not in best:
                best[k] = r
                continue
            dups += 1
            old = best[k]
            if old.get("status") == "failed" and r.get("status") != "failed":
                best[k] = r
            elif old.get("status") == r.get("status") == "accepted" and old.get("reversal") != r.get("reversal"):
                conflicts += 1
    missing, unexpected, order = [], 0, sorted(best)
    if seeds is not None:
        seeds = load_seeds(seeds) if isinstance(seeds, (str, Path)) else seeds
        mode = negative or ("all" if any("#" in k for k in best) else "first")
        expected = [k for k, _, _ in plan(seeds, mode, rng_seed)]
        missing = [k for k in expected if k not in best]
        exp = set(expected)
        unexpected = sum(1 for k in best if k not in exp)
        order = [k for k in expected if k in best] + sorted(k for k in best if k not in exp)
    rows = [best[k] for k in order]
    atomic_write_text(Path(out), "".join(_dumps(r) for r in rows))
    return MergeSummary(str(out), len(rows), dups, conflicts, missing,
                        sum(1 for r in rows if r.get("status") == "failed"), unexpected)


# ---- the run -------------------------------------------------------------------------------------
@dataclass
class SynthesisSummary:
    """What one ``synthesize`` call did. Costs and tokens count only requests sent in this run."""
    out: str
    backend: str
    model: str
    keys: int = 0               # planned for this shard
    skipped: int = 0            # already in the output file
    written: int = 0
    accepted: int = 0
    declined: int = 0
    rejected: int = 0
    failed: int = 0
    cached: int = 0
    requests: int = 0           # HTTP attempts (or in-process generations)
    retries: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float = 0.0
    price_known: bool = True
    elapsed_s: float = 0.0
    template: str = ""
    template_version: str = ""
    reject_reasons: dict = field(default_factory=dict)
    fail_reasons: dict = field(default_factory=dict)
    retry_reasons: dict = field(default_factory=dict)

    def format(self) -> str:
        cost = f"${self.cost_usd:.4f}" + ("" if self.price_known else f" (no price for {self.model!r}; use --price)")
        lines = [f"synthesis -> {self.out}  [{self.backend}:{self.model}, {self.template} {self.template_version}]",
                 f"  keys {self.keys}: {self.skipped} already done, {self.written} written "
                 f"({self.accepted} accepted, {self.declined} declined, {self.rejected} rejected, {self.failed} failed)",
                 f"  requests {self.requests} (retries {self.retries}), cache hits {self.cached}, "
                 f"tokens {self.prompt_tokens} in / {self.completion_tokens} out, est. cost {cost}, {self.elapsed_s:.1f}s"]
        for title, d in (("rejected", self.reject_reasons), ("failed", self.fail_reasons), ("retried", self.retry_reasons)):
            if d:
                lines.append(f"  {title}: " + ", ".join(f"{k} x{v}" for k, v in sorted(d.items(), key=lambda kv: -kv[1])))
        return "\n".join(lines)


def cost_usd(prompt_tokens: int, completion_tokens: int, price: tuple[float, float] | None) -> float:
    """``cost_usd(1_000_000, 500_000, (0.15, 1.5)) -> 0.15 + 0.75 = 0.9``."""
    if not price:
        return 0.0
    return (prompt_tokens * price[0] + completion_tokens * price[1]) / 1e6


def build_llm(cfg: SynthesisConfig) -> LLM:
    """The ``LLM`` (backend + retries + cache) that ``cfg`` describes; openai/transformers only."""
    from .backends import OpenAIBackend, TransformersBackend

    if cfg.backend == "openai":
        backend = OpenAIBackend(cfg.model, cfg.base_url, cfg.api_key_env, cfg.timeout_s)
    elif cfg.backend == "transformers":
        backend = TransformersBackend(cfg.model, cfg.device)
    else:
        raise ValueError(f"backend {cfg.backend!r} does not call an LLM")
    cache = ResponseCache(cfg.llm_cache_dir()) if cfg.use_cache else None
    return LLM(backend, cfg.decoding(), concurrency=cfg.concurrency, max_retries=cfg.max_retries,
               backoff_base_s=cfg.backoff_base_s, backoff_max_s=cfg.backoff_max_s, cache=cache)


def _reason_class(reason: str | None) -> str:
    return (reason or "").split(":")[0].split(" after ")[0].split(" (")[0]


def _identity(cfg: SynthesisConfig, tmpl: PromptTemplate) -> tuple[str, str, str]:
    """``(model, template, template_version)`` recorded in rows; the baselines have no prompt."""
    if cfg.backend == "template":
        return "template", "template_reversal", TEMPLATE_BASELINE_VERSION
    if cfg.backend == "reference":
        return "reference", "reference_reversal", "seed"
    return cfg.model, tmpl.name, tmpl.full_version


def _row(key: str, seed: dict, j: int, cfg: SynthesisConfig, tmpl: PromptTemplate, parsed: Parsed, raw: str | None,
         c=None, attempts: int = 0, t0: float = 0.0) -> dict:
    """One output row (the schema in the module docstring); ``c`` is the ``Completion`` if any."""
    usage = {"prompt_tokens": c.prompt_tokens if c else 0, "completion_tokens": c.completion_tokens if c else 0}
    model, name, version = _identity(cfg, tmpl)
    return {
        "key": key, "seed_id": seed["id"], "negative_index": j, "negative_id": seed["instruction_negatives"][j]["id"],
        "backend": cfg.backend, "model": model, "status": parsed.status, "reason": parsed.reason,
        "reversal": parsed.reversal, "reasoning": parsed.reasoning, "raw": raw,
        "template": name, "template_version": version,
        "usage": usage, "cost_usd": round(cost_usd(usage["prompt_tokens"], usage["completion_tokens"], cfg.price()), 8),
        "instruction_type": seed.get("instruction_type"), "attempts": c.attempts if c else attempts,
        "cached": bool(c and c.cached), "elapsed_s": round(time.monotonic() - t0, 4),
    }


def _baseline_row(key: str, seed: dict, j: int, cfg: SynthesisConfig, tmpl: PromptTemplate) -> dict:
    t0 = time.monotonic()
    if cfg.backend == "reference":
        ref = (seed.get("reference_reversal") or "").strip()
        parsed = Parsed("accepted", ref, None, None) if ref else Parsed("declined", None, None, "seed has no reference_reversal")
        return _row(key, seed, j, cfg, tmpl, parsed, None, t0=t0)
    raw = template_reversal(seed["instruction"])
    # a negation is a near-copy by construction, so the copy check would reject every row
    parsed = parse_and_validate(f"<answer><new_instruction>{raw}</new_instruction></answer>", seed, cfg, check_copy=False)
    return _row(key, seed, j, cfg, tmpl, parsed, raw, t0=t0)


async def _llm_row(key: str, seed: dict, j: int, messages: list[dict], cfg: SynthesisConfig, tmpl: PromptTemplate,
                   llm: LLM) -> dict:
    t0 = time.monotonic()
    try:
        c = await llm.complete(messages)
    except RequestFailed as e:
        return _row(key, seed, j, cfg, tmpl, Parsed("failed", None, None, e.reason), None, attempts=e.attempts, t0=t0)
    return _row(key, seed, j, cfg, tmpl, parse_and_validate(c.text, seed, cfg), c.text, c, t0=t0)


class _GroupSync:
    """fsync off the event loop, one at a time; rows written meanwhile ride on the next one.

    An fsync takes milliseconds; done inline it would stall every in-flight request once per row.
    """

    def __init__(self, fd: int):
        self.fd, self.pending, self.task = fd, False, None

    def request(self):
        self.pending = True
        if self.task is None or self.task.done():
            self.task = asyncio.ensure_future(self._loop())

    async def _loop(self):
        while self.pending:
            self.pending = False
            await asyncio.to_thread(os.fsync, self.fd)

    async def drain(self):
        while self.task is not None and not self.task.done():
            await asyncio.shield(self.task)
        if self.pending:
            os.fsync(self.fd)


async def _run(items, cfg: SynthesisConfig, out: Path, tmpl: PromptTemplate, llm: LLM | None,
               summary: SynthesisSummary) -> None:
    from tqdm.auto import tqdm

    counts = collections.Counter()
    rejects, fails = collections.Counter(), collections.Counter()
    slots = asyncio.Semaphore(cfg.concurrency)  # bounds the tasks alive at once, not just requests
    bar = tqdm(total=len(items), desc=f"synthesize [{cfg.backend}]", unit="row", disable=not cfg.progress,
               dynamic_ncols=True, leave=True)
    with out.open("a", encoding="utf-8") as fh:
        sync = _GroupSync(fh.fileno()) if cfg.fsync else None
        last_postfix, last_flush = [0.0], [time.monotonic()]

        def write(row: dict):
            fh.write(_dumps(row))
            # A row that cost a request is flushed at once (in the OS: survives a kill of this
            # process) and fsync'd soon after (survives a power cut). Rows replayed from the
            # cache or a baseline are free to redo, so they ride along with the next flush.
            if row["attempts"] > 0 or time.monotonic() - last_flush[0] > 0.5:
                fh.flush()
                last_flush[0] = time.monotonic()
                if sync is not None and row["attempts"] > 0:
                    sync.request()
            counts[row["status"]] += 1
            counts["cached"] += row["cached"]
            if row["status"] == "rejected":
                rejects[_reason_class(row["reason"])] += 1
            elif row["status"] == "failed":
                fails[_reason_class(row["reason"])] += 1
            if not row["cached"]:
                summary.cost_usd += row["cost_usd"]
            if not bar.disable:
                bar.update(1)
                now = time.monotonic()
                if now - last_postfix[0] > 0.2:  # formatting the counts per row would cost more than the row
                    last_postfix[0] = now
                    bar.set_postfix(ok=counts["accepted"], declined=counts["declined"], rejected=counts["rejected"],
                                    failed=counts["failed"], cached=counts["cached"], refresh=False)

        tasks: set[asyncio.Task] = set()
        fatal: list[BackendError] = []

        async def work(key, seed, j, messages):
            try:
                write(await _llm_row(key, seed, j, messages, cfg, tmpl, llm))
            except BackendError as e:  # the run cannot go on: stop the other requests too
                if not fatal:
                    fatal.append(e)
                    for t in tasks:
                        if t is not asyncio.current_task():
                            t.cancel()
            finally:
                slots.release()

        try:
            for n, (key, seed, j) in enumerate(items):
                if fatal:
                    break
                if llm is None:
                    write(_baseline_row(key, seed, j, cfg, tmpl))
                    continue
                messages = [{"role": "user", "content": render_prompt(seed, j, tmpl)}]
                t0 = time.monotonic()
                hit = llm.lookup(messages)
                if hit is not None:  # answered from the cache: no task, no slot
                    write(_row(key, seed, j, cfg, tmpl, parse_and_validate(hit.text, seed, cfg), hit.text, hit, t0=t0))
                    if n % 256 == 0:
                        await asyncio.sleep(0)  # let in-flight requests progress
                    continue
                await slots.acquire()
                if fatal:
                    break
                t = asyncio.create_task(work(key, seed, j, messages))
                tasks.add(t)
                t.add_done_callback(tasks.discard)
            results = await asyncio.gather(*list(tasks), return_exceptions=True)
            if fatal:
                raise fatal[0]
            for r in results:  # a bug in a task must not pass silently
                if isinstance(r, Exception):
                    raise r
        finally:
            fh.flush()
            if sync is not None:
                await sync.drain()
            bar.set_postfix(ok=counts["accepted"], declined=counts["declined"], rejected=counts["rejected"],
                            failed=counts["failed"], cached=counts["cached"], refresh=False)
            bar.close()
            summary.written = sum(counts[s] for s in STATUSES)
            for s in STATUSES:
                setattr(summary, s, counts[s])
            summary.cached = counts["cached"]
            summary.reject_reasons, summary.fail_reasons = dict(rejects), dict(fails)


def synthesize(seeds: list[dict] | str | Path = _config.SEEDS_PATH, out: str | Path = "reversals.jsonl",
               config: SynthesisConfig | None = None, **overrides) -> SynthesisSummary:
    """Write one polarity reversal per key to ``out`` (JSONL), resuming whatever is there.

    Args:
        seeds: seed rows or a seed JSONL path (validated in full before any request).
        out: the output JSONL; its config goes next to it as ``<out stem>.config.json``.
        config: a ``SynthesisConfig``; ``overrides`` replace its fields (``limit=10``).

    Raises ``DataError`` for bad seeds or a corrupt output file and ``BackendError`` when the run
    cannot go on (bad key, unknown model, unreachable server); rows written so far are kept.

    Example: 3 seeds, ``negative='all'``, 2 negatives each -> 6 rows keyed ``s1#0, s1#1, ...``;
    run it again -> 0 rows written, 0 requests.
    """
    cfg = (config or SynthesisConfig()).replace(**overrides) if overrides else (config or SynthesisConfig())
    t0 = time.monotonic()
    seed_rows = load_seeds(seeds, limit=cfg.limit) if isinstance(seeds, (str, Path)) else list(seeds)[:cfg.limit]
    tmpl = load_template(cfg.template)
    out = Path(out)
    items = plan(seed_rows, cfg.negative, cfg.negative_seed, cfg.shard)
    done = _prepare_output(out, cfg.retry_failed)
    pending = [it for it in items if it[0] not in done]
    model, tname, tversion = _identity(cfg, tmpl)
    summary = SynthesisSummary(str(out), cfg.backend, model, keys=len(items), skipped=len(items) - len(pending),
                               price_known=cfg.price() is not None or cfg.backend in ("template", "reference"),
                               template=tname, template_version=tversion)
    atomic_write_text(out.with_name(out.stem + ".config.json"), json.dumps(
        {"config": cfg.to_dict(), "template": tname, "template_version": tversion,
         "seeds": str(seeds) if isinstance(seeds, (str, Path)) else f"<{len(seed_rows)} rows>"}, indent=2), fsync=False)
    if not pending:  # nothing to do: no backend, no request, no model load
        summary.elapsed_s = time.monotonic() - t0
        return summary
    llm = build_llm(cfg) if cfg.backend in ("openai", "transformers") else None

    async def main():
        try:
            await _run(pending, cfg, out, tmpl, llm, summary)
        finally:
            if llm is not None:
                await llm.aclose()

    try:
        run_sync(main())
    finally:
        if llm is not None:
            st = llm.stats
            summary.requests, summary.retries = st.requests, st.retries
            summary.prompt_tokens, summary.completion_tokens = st.prompt_tokens, st.completion_tokens
            summary.retry_reasons = dict(st.retry_reasons)
        summary.elapsed_s = time.monotonic() - t0
    return summary
