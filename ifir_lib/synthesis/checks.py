"""Parse an LLM's answer and check the reversal it holds: pure functions, no I/O.

``parse_answer`` extracts ``<answer><new_instruction>...</new_instruction></answer>`` (the
Appendix A output format of arXiv 2604.18845); ``check_reversal`` rejects what the prompt's
guardrails forbid (passage ids, meta-task language, a near-copy of I, a span copied from a
passage, too many sentences, no content).
``phrasing_style`` classifies how an instruction is worded, so data sets can be balanced by
style (docs/method.md §4). Not handled here: whether the reversal really swaps the labels (that
takes a reader: ``verify``, or the audit of the bundled data).
"""

from __future__ import annotations

import collections
import dataclasses
import difflib
import re
from dataclasses import dataclass

from ..seeds.cues import copies_span


@dataclass(frozen=True)
class Parsed:
    status: str  # accepted | declined | rejected
    reversal: str | None
    reasoning: str | None
    reason: str | None


_ANSWER = re.compile(r"<answer>(.*?)</answer>", re.S | re.I)
_NEW = re.compile(r"<new_instruction>(.*?)</new_instruction>", re.S | re.I)
_META = [  # meta-task language: the instruction must read well to someone who never saw the passages
    (
        r"\b(the|this|that|these|those|each|every|any|other|both|first|second|third|last|given|chosen|specific|"
        r"positive|negative|remaining)\s+passages?\b(?!\s+of\b)|\bpassages?\s+(\d|[a-c]\b|id)",
        "passage",
    ),
    (r"\b(instruction|hard)[\s-]+negatives?\b", "instruction negative"),
    (r"\b(positive|negative)\s+(passages?|documents?|examples?|samples?)\b", "positive/negative passage"),
    (r"\bthe\s+(positive|negatives?)\b(?!\s+(?!ones?\b)[a-z])", "the positive/negative"),
    (r"(?-i:N\*|P\+|\bN[1-9]\b|\bN_\{?i\}?)", "passage label"),  # not "N12" (an Ontario form)
    (
        r"\b(the\s+)?(document|text|article)s?\s+(above|below)\b|\b(above|aforementioned|given|provided|chosen|"
        r"specific|remaining)\s+(documents?|texts?|passages?|articles?)\b",
        "the document above",
    ),
    (r"\b(original|new|complementary|reversed|previous)\s+instruction\b", "original/new instruction"),
    (r"\bpolarity\b|\brelevance\s+labels?\b", "task vocabulary"),
]
# one pass over the text instead of one per rule; ``lastgroup`` names the rule that matched
_META_RX = re.compile("|".join(f"(?P<m{i}>{rx})" for i, (rx, _) in enumerate(_META)), re.I)
# every rule needs one of these substrings (or a capital N / P): a cheap screen before the regex
_META_WORDS = (
    "passage",
    "negative",
    "positive",
    "above",
    "below",
    "aforementioned",
    "given",
    "provided",
    "chosen",
    "specific",
    "remaining",
    "instruction",
    "polarity",
    "relevance",
)
_WORDS = re.compile(r"[a-z0-9]+")
# a decline in words: "None - nothing separates them.", "N/A", "No sound reversal exists." (the
# prompt asks for exactly "None"; models paraphrase it). "None of ..." may open an instruction.
_DECLINE = re.compile(
    r"(none|n/?a)(\s*[-–—:;.!]\s*.*)?|no\s+(sound|valid|suitable|possible|meaningful|objective|clear|good|such)\s+"
    r"(complementary\s+|reversed\s+|new\s+)?(reversal|instruction)s?\b.*",
    re.I | re.S,
)  # "None other than ...", "None, except ...", "N/A values must ..." are instructions: a decline's
# "None" stands alone or before a dash, colon, semicolon or full stop and its reason
_PLACEHOLDER = re.compile(r"\{\{|\}\}|\{%|%\}")  # template syntax echoed instead of filled
MIN_WORDS = 2  # words (runs of letters, or CJK characters): ".", "..." and "Spain!" say nothing
COPY_SPAN = 12  # consecutive words shared with a passage: the bundled reversals share at most 11
ABSTRACT_SPAN = 4  # the abstract style copies no 4-word span of N* (docs/method.md §2)
_SENT = re.compile(
    r"(?<!\b[A-Z])(?<!\be\.g)(?<!\bi\.e)(?<!\betc)(?<!\bvs)(?<!\bDr)(?<!\bSt)[.!?]+[\"')\]]*\s+(?=[\"'(\[]?[A-Z0-9])"
)


def count_sentences(text: str) -> int:
    """``'Use UK data. Skip blogs (e.g. Medium).' -> 2``; abbreviations do not end a sentence."""
    return len([s for s in _SENT.split(text.strip()) if s.strip()])


def parse_answer(raw: str | None) -> Parsed:
    """Extract ``<answer><new_instruction>...</new_instruction></answer>`` (the last answer block).

    ``'...<answer>None</answer>' -> declined``, and so is a decline in words (``'N/A'``, ``'None -
    nothing separates them'``, ``'No sound reversal exists.'``); no or malformed tags, two
    ``<new_instruction>`` blocks, or empty text -> rejected. The text before the answer is kept
    as ``reasoning``.
    """
    raw = raw or ""
    blocks = list(_ANSWER.finditer(raw))
    if not blocks:
        pos = raw.lower().rfind("<answer>")
        reasoning = (raw[:pos] if pos >= 0 else raw).strip() or None
        why = "garbled tags: <answer> not closed" if pos >= 0 else "missing <answer> tag"
        return Parsed("rejected", None, reasoning, why)
    m = blocks[-1]
    reasoning = raw[: m.start()].strip() or None
    body = m.group(1).strip()
    if _DECLINE.fullmatch(body):
        return Parsed("declined", None, reasoning, None)
    inner = list(_NEW.finditer(body))
    if not inner:
        return Parsed(
            "rejected", None, reasoning, "garbled tags: no <new_instruction>...</new_instruction> in <answer>"
        )
    if len(inner) > 1:
        return Parsed("rejected", None, reasoning, f"{len(inner)} <new_instruction> blocks in one answer")
    text = re.sub(r"\s+", " ", inner[0].group(1)).strip().strip("\"'“”").strip()
    if _DECLINE.fullmatch(text):
        return Parsed("declined", None, reasoning, None)
    if not text:
        return Parsed("rejected", None, reasoning, "empty instruction")
    return Parsed("accepted", text, reasoning, None)


def _mentions(text: str, token: str) -> bool:
    """``token`` occurs in ``text`` not glued to a word character or hyphen (no regex per id)."""
    start = text.find(token)
    while start >= 0:
        end = start + len(token)
        if (start == 0 or not (text[start - 1].isalnum() or text[start - 1] in "_-")) and (
            end == len(text) or not (text[end].isalnum() or text[end] in "_-")
        ):
            return True
        start = text.find(token, start + 1)
    return False


def _quick_ratio(a: str, b: str) -> float:
    """``difflib.SequenceMatcher(None, a, b).quick_ratio()`` with C-speed counting."""
    return 2 * sum((collections.Counter(a) & collections.Counter(b)).values()) / (len(a) + len(b) or 1)


def _jaccard(a: str, b: str) -> float:
    wa, wb = set(_WORDS.findall(a.lower())), set(_WORDS.findall(b.lower()))
    return len(wa & wb) / len(wa | wb) if wa | wb else 1.0


def check_reversal(
    text: str,
    seed: dict,
    *,
    max_sentences: int = 4,
    copy_ratio: float = 0.9,
    copy_jaccard: float = 0.8,
    check_copy: bool = True,
    copy_span: int = COPY_SPAN,
    target: int | None = None,
) -> str | None:
    """Why ``text`` is not a usable reversal of ``seed``, or None when it passes.

    Rejects fewer than ``MIN_WORDS`` words or echoed template syntax, passage ids, meta-task
    language (arXiv 2604.18845 App. A guardrails), a near-copy of the original instruction
    (difflib ratio > ``copy_ratio`` or word Jaccard > ``copy_jaccard``), a span of ``copy_span``
    consecutive words copied from the positive or an instruction negative (word matching would
    solve that view), and more than ``max_sentences`` sentences (the prompt asks for 1-2).
    ``target``: the index of N*, for the abstract style, whose reversal copies no
    ``ABSTRACT_SPAN``-word span of it.
    """
    if why := _no_content(text):
        return why
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
    if why := _copied_span(text, seed, copy_span, target):
        return why
    # n sentences need n-1 terminators: skip the regex when there are too few to exceed the max
    n = count_sentences(text) if sum(map(text.count, ".!?")) >= max_sentences else 1
    if n > max_sentences:
        return f"too long: {n} sentences (max {max_sentences})"
    return None


def _no_content(text: str) -> str | None:
    if _PLACEHOLDER.search(text):
        return "template syntax instead of an instruction"
    if len(re.findall(r"[\u3040-\u30ff\u3400-\u9fff\uac00-\ud7af]|[^\W\d_]+", text)) < MIN_WORDS:
        return f"no content: fewer than {MIN_WORDS} words"
    return None


def unusable(text: str) -> str | None:
    """Why a stored reversal cannot train whatever checks accepted it (a row written before these
    rules, or a hand-made file): a decline in words, no content, template syntax; else None."""
    if _DECLINE.fullmatch(text.strip()):
        return "a decline in words"
    return _no_content(text)


def _copied_span(text: str, seed: dict, span: int, target: int | None) -> str | None:
    """A passage of ``seed`` that ``text`` copies ``span`` consecutive words of (``ABSTRACT_SPAN``
    for N* when ``target`` is its index), named by role and id; else None."""
    negatives = seed["instruction_negatives"]
    if target is not None and copies_span(text, negatives[target]["text"], ABSTRACT_SPAN):
        return f"abstract style: copies a {ABSTRACT_SPAN}-word span of N* ({negatives[target]['id']!r})"
    for role, p in [("the positive", seed["positive"]), *(("instruction negative", n) for n in negatives)]:
        if copies_span(text, p["text"], span):
            return f"copies {span} consecutive words of {role} {p['id']!r}"
    return None


def parse_and_validate(
    raw: str | None, seed: dict, cfg=None, check_copy: bool = True, target: int | None = None
) -> Parsed:
    """``parse_answer`` then ``check_reversal``: an accepted answer may become rejected, with a reason.

    ``cfg`` is anything with ``max_sentences``, ``copy_ratio``, ``copy_jaccard`` and ``copy_span``
    (a ``SynthesisConfig``); None uses ``check_reversal``'s defaults. ``target``: N*'s index
    under the abstract style (``check_reversal``).
    """
    p = parse_answer(raw)
    if p.status != "accepted":
        return p
    names = ("max_sentences", "copy_ratio", "copy_jaccard", "copy_span")
    limits = {k: getattr(cfg, k) for k in names if hasattr(cfg, k)} if cfg else {}
    why = check_reversal(p.reversal, seed, check_copy=check_copy, target=target, **limits)
    return dataclasses.replace(p, status="rejected", reason=why) if why else p


# ---- phrasing style ------------------------------------------------------------------------------
# How an instruction is *worded*, independent of what it asks for. Checked in priority order:
# an exclusion clause anywhere wins, then a question, then a first-person voice; the rest are
# affirmative selections ("Only ...", "Focus on ...", "Relevant documents describe ...").
PHRASING_STYLES = ("exclusion", "question", "persona", "affirmative")
_NEGATION = re.compile(
    r"\b(not|no|never|none|nothing|nor|without|except|excluding|exclude[sd]?|avoid\w*|skip\w*|ignore\w*|omit\w*|"
    r"leave out|left out|leaving out|rather than|instead of|other than|isn't|aren't|don't|doesn't|won't|can't|cannot|"
    r"shouldn't|are out|is out|out of scope|irrelevant|unwanted|discard\w*|drop|rule out|ruled out|besides|apart from|"
    r"outside|alternatives? to)\b",
    re.I,
)
_FIRST_PERSON = re.compile(r"\b(I|I'm|I've|I'd|I'll|[Mm]e|[Mm]y|[Ww]e|[Ww]e're|[Oo]ur|us)\b")


def phrasing_style(text: str) -> str:
    """``'Skip anything before 2000.' -> 'exclusion'``; ``'Which trials used placebo?' -> 'question'``;
    ``'I need figures for Kenya.' -> 'persona'``; ``'Only trials from Kenya.' -> 'affirmative'``."""
    t = text.strip()
    if _NEGATION.search(t):
        return "exclusion"
    if t.endswith("?"):
        return "question"
    if _FIRST_PERSON.search(t):
        return "persona"
    return "affirmative"
