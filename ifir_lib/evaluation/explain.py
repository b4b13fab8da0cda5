"""Notebook 04's worked example: one query's p-MRR computed by hand from its two rankings.

FollowIR gives each query an original instruction and a changed, narrower one; the *changed
documents* are relevant under the first and not under the second. A model that reads the
instruction ranks them lower under the changed one. Per changed document with ranks R_og and
R_new (Weller et al. 2024, eq. 1; docs/method.md §5)::

    moved down (R_new > R_og):  1 - R_og / R_new      (> 0, good)
    otherwise:                  R_new / R_og - 1      (<= 0)

and the query's p-MRR is their mean (x100). ``pmrr_by_hand`` does exactly this from the two score
lists, written out so a student can follow each number; it shares no code with ``metrics``, so
equality with the library (``EvalResult.per_query``) is a real check.
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd


@dataclass(frozen=True)
class HandPMRR:
    query: str
    table: pd.DataFrame  # one row per changed document: ranks, the case, the term
    p_mrr: float  # x100

    def sentence(self) -> str:
        down = int((self.table["R_new"] > self.table["R_og"]).sum())
        return (
            f"Query {self.query}: {len(self.table)} changed documents, {down} ranked lower under the "
            f"changed instruction; mean of the terms x100 = {self.p_mrr:.2f}."
        )


def _rank_of(scores: dict[str, float]) -> dict[str, int]:
    """Rank 1 = highest score; ties go to the larger doc id (mteb's order)."""
    ordered = sorted(scores, key=lambda d: (scores[d], d), reverse=True)
    return {d: i + 1 for i, d in enumerate(ordered)}


def pmrr_by_hand(
    og_scores: dict[str, float], new_scores: dict[str, float], changed: list[str], query: str = ""
):
    """The p-MRR of one query from its og and changed score lists and its changed documents."""
    r_og, r_new = _rank_of(og_scores), _rank_of(new_scores)
    rows, terms = [], []
    for d in sorted(changed, key=lambda d: r_og.get(d, len(og_scores) + 1)):
        a, b = r_og.get(d, len(og_scores) + 1), r_new.get(d, len(new_scores) + 1)
        if b > a:
            case, term = f"moved down: 1 - {a}/{b}", 1 - a / b
        else:
            case, term = f"up or same: {b}/{a} - 1", b / a - 1
        terms.append(term)
        rows.append({"doc_id": d, "R_og": a, "R_new": b, "term": case, "value x100": round(100 * term, 2)})
    return HandPMRR(query, pd.DataFrame(rows), 100 * sum(terms) / len(terms))


def pmrr_of_result(result, qid: str) -> HandPMRR:
    """``pmrr_by_hand`` on one query of an ``EvalResult`` (its og and changed runs and qrel diff)."""
    return pmrr_by_hand(result.runs["og"][qid], result.runs["changed"][qid], list(result.qrel_diff[qid]), qid)


def movement(result) -> dict[str, int]:
    """How the changed documents moved between the og and the changed ranking, over all queries:
    ``{"down", "same", "up"}`` (down is what the changed instruction asks for)."""
    out = {"down": 0, "same": 0, "up": 0}
    for qid, docs in result.qrel_diff.items():
        if not docs or qid not in result.runs["og"] or qid not in result.runs["changed"]:
            continue
        hand = pmrr_of_result(result, qid).table
        out["down"] += int((hand["R_new"] > hand["R_og"]).sum())
        out["up"] += int((hand["R_new"] < hand["R_og"]).sum())
        out["same"] += int((hand["R_new"] == hand["R_og"]).sum())
    return out
