"""Borrowed hard negatives: the automatic screen and the audit file (``ifir data screen-negatives``).

Mined hard negatives reuse other seeds' passages by id, and a passage written for another seed can
be relevant to the borrowing seed's instruction I or reversal I' (a seed with the same query, or a
positive that meets the same constraint). A relevant document trained as a negative teaches the
model to ignore the instruction. So every borrowed hard negative is screened, then read by a
reviewer against a written rubric (the data card, "Hard-negative audit"); relevant ones are
dropped or replaced, and the verdicts ship in ``hard_negative_audit.jsonl``: one row per screened
hard negative, per reviewed replacement candidate and per own hard negative re-read (``origin``).
``ifir data validate`` fails on a borrowed hard negative without a reviewed ``keep`` row for
exactly its text.
Not handled here: mining (``mining``), the other bundle checks (``pipelines.bundle``).
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from pathlib import Path

from ..core.errors import ConfigError
from ..core.jsonl import read_jsonl
from ..core.models import load_model

_ROLE = re.compile(r"-(pos|in\d+|hn\d+)$")


def owner(passage_id: str) -> str:
    """The seed a passage id belongs to: ``'A-011-hn1'`` -> ``'A-011'``."""
    return _ROLE.sub("", passage_id)


def borrowed(seed: dict) -> list[dict]:
    """The seed's hard negatives whose id belongs to another seed."""
    return [h for h in seed["hard_negatives"] if owner(h["id"]) != seed["id"]]


def text_sha256(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


@dataclass(frozen=True)
class ScreenConfig:
    """A borrowed hard negative h of seed s is flagged for review when any of these holds (cosine
    similarities of the embedder's normalised embeddings; q+I is the query with I, q+I' with I')."""

    model: str = "minilm"
    max_sim_positive: float = 0.75  # sim(h, P) at or above: a near-copy of the positive
    max_sim_n_star: float = 0.75  # sim(h, N*) at or above: a near-copy of the reversal's positive
    max_margin_i: float = -0.07  # sim(q+I, h) - sim(q+I, P) at or above: scored near P under I
    max_margin_reversal: float = -0.07  # sim(q+I', h) - sim(q+I', N*) at or above: near N* under I'


def screen(seeds: list[dict], cfg: ScreenConfig = ScreenConfig(), embed=None) -> list[dict]:
    """One row per borrowed hard negative: its similarities, ``same_query`` (the owner seed, found by
    the passage's id or else by its text, has the identical query) and ``flagged``.
    ``embed(texts) -> normalised array``; default: ``cfg.model``.
    A seed whose ``reference_reversal`` is null (or empty) is screened without the I' criterion:
    its ``margin_reversal`` is None (it was scored against the text "None"). A seed without the
    field is a ``ConfigError``."""
    if embed is None:
        model = load_model(cfg.model)
        embed = lambda texts: model.encode(texts, batch_size=64, normalize_embeddings=True)  # noqa: E731
    by_id = {s["id"]: s for s in seeds}
    rows = [(s, h) for s in seeds for h in borrowed(s)]
    if not rows:
        return []
    missing = sorted({s["id"] for s, _ in rows if "reference_reversal" not in s})
    if missing:
        raise ConfigError(
            f"{len(missing)} seed(s) with borrowed hard negatives have no reference_reversal field "
            f"(e.g. {', '.join(missing[:3])}): the screen scores them under I'; give it, null when none"
        )
    texts = {p["id"]: p["text"] for s, h in rows for p in (h, s["positive"], n_star(s))}
    ids = sorted(texts)
    emb = dict(zip(ids, embed([texts[i] for i in ids])))
    qs = sorted({s["id"] for s, _ in rows})
    q_i = dict(zip(qs, embed([f"{by_id[i]['query']} {by_id[i]['instruction']}" for i in qs])))
    with_rev = [i for i in qs if (by_id[i]["reference_reversal"] or "").strip()]
    q_r = (
        dict(
            zip(with_rev, embed([f"{by_id[i]['query']} {by_id[i]['reference_reversal']}" for i in with_rev]))
        )
        if with_rev
        else {}
    )
    # a passage's seed by its id (the bundled '<seed>-pos' pattern), else by the seed whose positive
    # or instruction negative holds its text: with a user's own ids ('doc5') same_query never fired
    by_text = {p["text"]: t for t in seeds for p in (t["positive"], *t["instruction_negatives"])}
    out = []
    for s, h in rows:
        e, p, n = emb[h["id"]], emb[s["positive"]["id"]], emb[n_star(s)["id"]]
        src = by_id.get(owner(h["id"])) or by_text.get(h["text"])
        row = {
            "seed": s["id"],
            "hn": h["id"],
            "same_query": bool(src) and _norm(src["query"]) == _norm(s["query"]),
            "sim_positive": round(float(e @ p), 4),
            "sim_n_star": round(float(e @ n), 4),
            "margin_i": round(float(q_i[s["id"]] @ e - q_i[s["id"]] @ p), 4),
            "margin_reversal": round(float(q_r[s["id"]] @ e - q_r[s["id"]] @ n), 4)
            if s["id"] in q_r
            else None,
        }
        row["flagged"] = flagged(row, cfg)
        out.append(row)
    return out


def flagged(row: dict, cfg: ScreenConfig = ScreenConfig()) -> bool:
    return bool(
        row["same_query"]
        or row["sim_positive"] >= cfg.max_sim_positive
        or row["sim_n_star"] >= cfg.max_sim_n_star
        or row["margin_i"] >= cfg.max_margin_i
        or (row["margin_reversal"] is not None and row["margin_reversal"] >= cfg.max_margin_reversal)
    )


def n_star(seed: dict) -> dict:
    return seed["instruction_negatives"][int(seed.get("reference_negative_index") or 0)]


def _norm(text: str) -> str:
    return " ".join(text.lower().split())


def check_negative_audit(seeds: list[dict], audit_path: str | Path | None) -> list[str]:
    """Problems: a borrowed hard negative with no audit row, a row no reviewer signed, a row for
    another text, or a verdict other than ``keep`` while the seed still carries it. Several rows
    for one pair and text are settled as ``audit_rows`` settles reviews: any ``drop`` wins (a later
    ``keep`` row no longer overrides an earlier ``drop``, nor did file order decide); a drop of an
    older text does not outvote a keep of the text the seed carries now."""
    if audit_path is None:
        return []
    if not Path(audit_path).exists():
        return [f"{audit_path}: hard-negative audit file not found"]
    rows = {}
    for n, row in read_jsonl(audit_path):
        for f in ("seed", "hn", "verdict", "text_sha256"):
            if f not in row:
                return [f"{audit_path}:{n}: missing field {f!r}"]
        key = (row["seed"], row["hn"], row["text_sha256"])  # a verdict judges one text
        prev = rows.get(key)
        if prev is None or prev[1]["verdict"] != "drop":  # any drop wins
            rows[key] = (n, row)
    latest = {(k[0], k[1]): v for k, v in sorted(rows.items(), key=lambda kv: kv[1][0])}  # any text
    problems = []
    for s in seeds:
        for h in borrowed(s):
            # the rows that judged the text the seed carries now, else the pair's last (another text)
            n, row = rows.get((s["id"], h["id"], text_sha256(h["text"]))) or latest.get(
                (s["id"], h["id"]), (None, None)
            )
            if row is None:
                problems.append(
                    f"{s['id']}: borrowed hard negative {h['id']} is not in {Path(audit_path).name}"
                )
            elif not row.get("reviewers"):
                problems.append(f"{audit_path}:{n}: {s['id']} {h['id']}: no reviewer read it")
            elif row["verdict"] != "keep":
                problems.append(
                    f"{audit_path}:{n}: {s['id']} carries {h['id']} with verdict {row['verdict']!r}"
                )
            elif row["text_sha256"] != text_sha256(h["text"]):
                problems.append(f"{audit_path}:{n}: {s['id']} {h['id']}: the text changed after its review")
    return problems


def audit_counts(audit_path: str | Path) -> dict:
    """Counts for the data card: screened, flagged, sampled, reviewed, dropped, replaced."""
    rows = [row for _, row in read_jsonl(audit_path)]
    original = [r for r in rows if r.get("origin", "original") == "original"]
    replacements = [r for r in rows if r.get("origin") == "replacement"]
    own = [r for r in rows if r.get("origin") == "own"]
    return {
        "borrowed_screened": len(original),
        "flagged": sum(1 for r in original if r.get("flagged")),
        "unflagged_sampled": sum(1 for r in original if r.get("sampled")),
        "reviewed": sum(1 for r in rows if r.get("reviewers")),
        "dropped": sum(1 for r in original if r["verdict"] == "drop"),
        "dropped_flagged": sum(1 for r in original if r["verdict"] == "drop" and r.get("flagged")),
        "dropped_unflagged": sum(1 for r in original if r["verdict"] == "drop" and not r.get("flagged")),
        "replacement_candidates_reviewed": len(replacements),
        "replacement_candidates_rejected": sum(1 for r in replacements if r["verdict"] == "drop"),
        "replacements_carried": sum(1 for r in replacements if r.get("carried")),
        "own_dropped": sum(1 for r in own if r["verdict"] == "drop"),
    }


def audit_rows(seeds: list[dict], screened: list[dict], reviews: list[dict], sampled: set) -> list[dict]:
    """The audit file's rows: each screened (seed, hn) with its screen values, whether it was in the
    blind sample of unflagged ones (``sampled``, a set of (seed, hn)), and its review (``reviews``:
    rows with seed, hn, verdict, note, reviewer; several reviews of one pair must agree on keep, so
    any ``drop`` wins). A screened pair without a review has verdict ``unreviewed``."""
    text = {p["id"]: p["text"] for s in seeds for p in s["hard_negatives"]}
    by_pair: dict[tuple, list[dict]] = {}
    for r in reviews:
        by_pair.setdefault((r["seed"], r["hn"]), []).append(r)
    out = []
    for row in screened:
        pair = (row["seed"], row["hn"])
        rs = by_pair.get(pair, [])
        verdict = "unreviewed" if not rs else "drop" if any(r["verdict"] == "drop" for r in rs) else "keep"
        out.append(
            {
                **row,
                "text_sha256": text_sha256(text[row["hn"]]),
                "sampled": pair in sampled,
                "verdict": verdict,
                "reviewers": sorted({r["reviewer"] for r in rs}),
                "note": " | ".join(r.get("note", "") for r in rs),
                "origin": row.get("origin", "original"),
            }
        )
    return out


def dropped_texts(audit_path: str | Path) -> dict[str, set[str]]:
    """``{seed id: text_sha256 of every hard negative the audit dropped for it}``: any ``drop`` row
    counts (``audit_rows``' rule: several reviews of one pair must agree on keep). A dropped passage
    left the seed's list (``without_dropped``); training's random padding reads this to never draw
    it back for that seed (``training.trainsets``)."""
    out: dict[str, set[str]] = {}
    for _, row in read_jsonl(audit_path):
        if row.get("verdict") == "drop":
            out.setdefault(row["seed"], set()).add(row["text_sha256"])
    return out


def without_dropped(seeds: list[dict], rows: list[dict]) -> list[dict]:
    """The seeds minus every hard negative whose audit row says ``drop``."""
    dropped = {(r["seed"], r["hn"]) for r in rows if r["verdict"] == "drop"}
    return [
        {**s, "hard_negatives": [h for h in s["hard_negatives"] if (s["id"], h["id"]) not in dropped]}
        for s in seeds
    ]
