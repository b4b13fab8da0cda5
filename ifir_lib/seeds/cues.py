"""Surface cues: how far word matching alone gets on each view of the seeds (``ifir data stats``).

A model that matches words, not requirements, solves a view when the instruction shares more
content words with the right document than with any other candidate. These numbers say how often
that happens, per view, and list the other surface cues a model can learn instead of reading:
copied 4-word spans, capitalised terms only the right document has, and length. The same overlap
share is computed on a FollowIR-format set for comparison (docs/method.md §4, surface cues).
Not handled here: the checks that reject a reversal (``synthesis.checks``).
"""

from __future__ import annotations

import re
import statistics
import zlib
from collections.abc import Iterable

from .schema import normalized_text

_TOKEN = re.compile(r"[A-Za-z0-9][A-Za-z0-9'-]*")
_CAPITAL = re.compile(r"(?<![.!?:]\s)(?<!^)\b([A-Z][A-Za-z0-9-]*[A-Za-z0-9]|[A-Z]{2,})\b")
# English function words and the instruction's own vocabulary (document, relevant, ...): shared
# with every candidate or with none, they carry no signal about which document fits.
STOPWORDS = frozenset(
    """a about above after again against all also am an and any are as at be because been before
    being below between both but by can could did do does doing down during each either else
    few for from further had has have having he her here hers him his how i if in into is it its
    itself just least less like may me might more most much must my neither no nor not now of
    off on once only or other our out over own per rather same she should since so some such
    than that the their them then there these they this those through to too under until up
    upon us very via was we were what when where whether which while who whom whose why will
    with within without would you your yours one ones any anything something thing things
    want wants looking look need needs please give show find tell me i'm i'd it's don't
    document documents article articles text texts page pages passage passages source sources
    relevant irrelevant result results information answer answers cover covers covering
    discuss discusses discussing describe describes describing mention mentions mentioning
    explain explains explaining focus focuses focused include includes including exclude
    excludes excluding leave skip ignore keep stick only just rather instead prefer""".split()
)


def content_words(text: str) -> set[str]:
    """Lower-cased words of 3+ characters that are not stop words, a plural ``s`` stripped."""
    out = set()
    for w in _TOKEN.findall(text.lower()):
        w = w.strip("'-")
        if len(w) < 3 or w in STOPWORDS:
            continue
        out.add(w[:-1] if len(w) > 4 and w.endswith("s") and not w.endswith("ss") else w)
    return out


def overlap(instruction: str, doc: str) -> int:
    return len(content_words(instruction) & content_words(doc))


def overlap_picks(instruction: str, right: str, others: Iterable[str]) -> bool:
    """True when ``right`` shares strictly more content words with ``instruction`` than every other."""
    mine = overlap(instruction, right)
    return all(mine > overlap(instruction, o) for o in others)


def _words(text: str) -> list[str]:
    return [w.strip("'-") for w in _TOKEN.findall(text.lower())]


def copies_4gram(instruction: str, doc: str) -> bool:
    """True when a span of 4 consecutive words of ``instruction`` occurs in ``doc``."""
    return copies_span(instruction, doc, 4)


def copies_span(instruction: str, doc: str, n: int) -> bool:
    """True when a span of ``n`` consecutive words of ``instruction`` occurs in ``doc``."""
    w = _words(instruction)
    grams = {tuple(w[i : i + n]) for i in range(len(w) - n + 1)}
    d = _words(doc)
    return bool(grams) and any(tuple(d[i : i + n]) in grams for i in range(len(d) - n + 1))


def capitalised_terms(text: str) -> set[str]:
    """Capitalised words and acronyms not at the start of a sentence ("Matter", "NHS", "Kyoto")."""
    return {m.group(1) for m in _CAPITAL.finditer(text)}


def names_only_right(instruction: str, right: str, wrong: str) -> bool:
    """True when ``instruction`` names a capitalised term that ``right`` has and ``wrong`` lacks."""
    return any(t in right and t not in wrong for t in capitalised_terms(instruction))


def n_words(text: str) -> int:
    return len(_TOKEN.findall(text))


def _share(flags: list[bool]) -> float:
    return round(sum(flags) / len(flags), 3) if flags else float("nan")


def view_cues(seeds: list[dict], field: str) -> dict:
    """The cues of one view over ``seeds``: ``field`` is ``instruction`` (right document P) or a
    reversal field (``reference_reversal``, ``abstract_reversal``: right document N*)."""
    rows = [s for s in seeds if s.get(field)]
    picks, pairwise, copies, names, lengths = [], [], [], [], []
    for s in rows:
        k = int(s.get("reference_negative_index") or 0)
        n_star = s["instruction_negatives"][k]
        if field == "instruction":
            right, wrong = s["positive"], n_star
        else:
            right, wrong = n_star, s["positive"]
        others = [p["text"] for p in _candidates(s) if p["id"] != right["id"]]
        text = s[field]
        picks.append(overlap_picks(text, right["text"], others))
        pairwise.append(overlap(text, right["text"]) > overlap(text, wrong["text"]))
        copies.append(copies_4gram(text, right["text"]))
        names.append(names_only_right(text, right["text"], wrong["text"]))
        lengths.append(n_words(text))
    return {
        "seeds": len(rows),
        "overlap_picks_right": _share(picks),
        "overlap_prefers_right_to_wrong": _share(pairwise),  # the pair alone: P vs N*
        "copies_4gram_of_right": _share(copies),
        "names_term_only_right_has": _share(names),
        "instruction_words_mean": round(statistics.fmean(lengths), 1) if lengths else float("nan"),
    }


def model_cues(seeds: list[dict], encode) -> dict:
    """How often an untrained embedder puts the right document of each view above the wrong one
    (pairwise, cosine of ``encode(texts) -> normalised rows``): a matcher's accuracy, per view."""
    out = {}
    for field in ("instruction", *REVERSAL_FIELDS):
        rows = [s for s in seeds if s.get(field)]
        if not rows:
            continue
        flip = field in ("reference_reversal", "abstract_reversal")
        q = encode([f"{s['query']} {s[field]}" for s in rows])
        p = encode([s["positive"]["text"] for s in rows])
        n = encode(
            [s["instruction_negatives"][int(s.get("reference_negative_index") or 0)]["text"] for s in rows]
        )
        right, wrong = (n, p) if flip else (p, n)
        out[field] = _share([bool(x) for x in ((q * right).sum(1) > (q * wrong).sum(1))])
    return out


def _candidates(seed: dict) -> list[dict]:
    return [seed["positive"], *seed["instruction_negatives"], *seed["hard_negatives"]]


def length_cues(seeds: list[dict]) -> dict:
    """P/N* length ratio (mean of per-seed ratios) and how often P is the longest candidate."""
    ratios, longest = [], []
    for s in seeds:
        k = int(s.get("reference_negative_index") or 0)
        p = n_words(s["positive"]["text"])
        ratios.append(p / max(1, n_words(s["instruction_negatives"][k]["text"])))
        longest.append(p > max(n_words(c["text"]) for c in _candidates(s)[1:]))
    n_cand = statistics.fmean(len(_candidates(s)) for s in seeds) if seeds else float("nan")
    return {
        "positive_to_n_star_words_mean": round(statistics.fmean(ratios), 3) if ratios else float("nan"),
        "positive_longer_than_n_star": _share([r > 1 for r in ratios]),
        "positive_longest_candidate": _share(longest),
        "chance_longest": round(1 / n_cand, 3) if seeds else float("nan"),
    }


REVERSAL_FIELDS = ("reference_reversal", "abstract_reversal", "aug_instruction")


def seed_cues(seeds: list[dict]) -> dict:
    """``{views: {instruction|reference_reversal|abstract_reversal|aug_instruction: {...}}, lengths}``."""
    views = {"instruction": view_cues(seeds, "instruction")}
    for f in REVERSAL_FIELDS:
        if not any(s.get(f) for s in seeds):
            continue
        if f == "aug_instruction":  # the wording control keeps I's labels: right document P
            rows = [{**s, "instruction": s[f]} for s in seeds if s.get(f)]
            views[f] = view_cues(rows, "instruction")
        else:
            views[f] = view_cues(seeds, f)
    return {"views": views, "lengths": length_cues(seeds)}


def followir_cues(ev) -> dict:
    """The overlap share on a FollowIR-format set (``corpora.FollowIRData``): per instruction
    (``og``, ``changed``), how often the judged document with the most content words in common
    with the instruction alone is relevant under it, and the instructions' mean length."""
    out = {}
    for which, qrels in (("og", ev.qrels_og), ("changed", ev.qrels_changed)):
        picks, lengths = [], []
        for qid, q in ev.queries.items():
            text = q[f"instruction_{which}"]
            judged = qrels.get(qid, {})
            pool = [d for d in ev.top_ranked.get(qid, judged) if d in ev.corpus]
            if not pool or not any(judged.get(d, 0) > 0 for d in pool):
                continue
            best = max(pool, key=lambda d: (overlap(text, ev.corpus[d]["text"]), -pool.index(d)))
            picks.append(judged.get(best, 0) > 0)
            lengths.append(n_words(text))
        out[which] = {
            "queries": len(picks),
            "overlap_picks_relevant": _share(picks),
            "instruction_words_mean": round(statistics.fmean(lengths), 1) if lengths else float("nan"),
        }
    return out


class NearCopies:
    """Finds the texts of one collection that another text largely repeats: cut to its first
    sentences, a sentence short or long (a passage made from a test document is a leak though not
    an exact copy). Texts are compared after ``normalized_text`` (Unicode form, case, typographic
    quotes and entities) on their spans of ``n`` consecutive words (any script); one span in
    ``every`` is kept (by a stable hash), so memory stays a fraction of the words at paper scale.
    A span held by more than ``common`` texts (boilerplate: a licence line, a site footer) counts
    for none of them.

    ``NearCopies(["a b c ..."]).match(text)`` -> ``(index, share)`` of the indexed text sharing
    the largest share of the shorter text's kept spans, when that share is at least
    ``threshold``; else None. Under 5 kept spans on the shorter side (texts of a dozen words) is
    too few to tell, and left to exact comparison.
    """

    def __init__(
        self, texts: Iterable[str], n: int = 8, threshold: float = 0.5, every: int = 2, common: int = 50
    ):
        self.n, self.threshold, self.every, self.common = n, threshold, every, common
        self.sizes: list[int] = []
        self.index: dict[int, list[int]] = {}
        for i, text in enumerate(texts):
            spans = self._spans(text)
            self.sizes.append(len(spans))
            for h in spans:
                self.index.setdefault(h, []).append(i)

    def _spans(self, text: str) -> set[int]:
        w = re.findall(r"\w+", normalized_text(text))
        spans = {zlib.crc32(" ".join(w[i : i + self.n]).encode()) for i in range(len(w) - self.n + 1)}
        return {h for h in spans if h % self.every == 0}  # a stable hash: the same spans every run

    def match(self, text: str) -> tuple[int, float] | None:
        spans = self._spans(text)
        hits: dict[int, int] = {}
        for h in spans:
            owners = self.index.get(h, ())
            if len(owners) > self.common:
                continue
            for i in owners:
                hits[i] = hits.get(i, 0) + 1
        shares = [(i, k / m) for i, k in hits.items() if (m := min(len(spans), self.sizes[i])) >= 5]
        best = max(shares, key=lambda x: x[1], default=None)
        return best if best and best[1] >= self.threshold else None
