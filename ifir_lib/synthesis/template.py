"""The template baseline: a deterministic negation of the original instruction.

An honest, naive reversal source for ablations (``--backend template``): it flips polarity words
sentence by sentence and ignores N*, so other instruction negatives may become relevant too.
Not handled here: LLM reversals (``synthesize``), checks (``checks``).
"""

from __future__ import annotations

import hashlib
import re

from .checks import _SENT

# Polarity swaps, tried class by class; one swap per sentence, because two swaps in one sentence
# ("must include" -> "must not exclude") cancel out. Keys are matched case-insensitively at word
# boundaries, the leftmost match of the first class that has one wins; "^" anchors a key to the
# start of the sentence ("Only X" -> "Anything except X", but not "I only want").
_SWAP_CLASSES = [
    {
        "must not": "must",
        "should not": "should",
        "cannot": "can",
        "must": "must not",
        "should": "should not",
        "are not relevant": "are relevant",
        "is not relevant": "is relevant",
        "are relevant": "are not relevant",
        "is relevant": "is not relevant",
        "are irrelevant": "are relevant",
        "is irrelevant": "is relevant",
        "i only want": "I do not want",
        "i only need": "I do not need",
        "i do not want": "I want",
        "i don't want": "I want",
        "i do not need": "I need",
        "i don't need": "I need",
        "i want": "I do not want",
        "i need": "I do not need",
        "i'm looking for": "I'm not looking for",
        "i am looking for": "I am not looking for",
        "i'm after": "I'm not after",
        "i am after": "I am not after",
        "i'm interested in": "I'm not interested in",
    },
    {
        "exclude": "only include",
        "excluding": "only including",
        "ignore": "only consider",
        "avoid": "focus on",
        "omit": "only keep",
        "leave out": "only keep",
        "filter out": "keep only",
        "do not include": "only include",
        "don't include": "only include",
        "do not consider": "only consider",
        "only include": "exclude",
        "only consider": "do not consider",
        "only return": "do not return",
        "only retrieve": "do not retrieve",
        "focus on": "avoid",
        "include": "exclude",
        "including": "excluding",
        "only give me": "do not give me",
        "give me": "do not give me",
        "only show me": "do not show me",
        "show me": "do not show me",
    },
    {
        "^only": "anything except",
        "before": "after",
        "after": "before",
        "more than": "less than",
        "less than": "more than",
        "at least": "at most",
        "at most": "at least",
        "newer than": "older than",
        "older than": "newer than",
        "recent": "older",
        "without": "with",
        "with": "without",
    },
]
_SWAP_RX = [
    re.compile(
        "|".join(
            (r"^\s*\b" if k[0] == "^" else r"\b") + f"({re.escape(k.lstrip('^'))})" + r"\b"
            for k in sorted(t, key=len, reverse=True)
        ),
        re.I,
    )
    for t in _SWAP_CLASSES
]

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
            return sentence[: m.start(g)] + new + sentence[m.end(g) :]
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
