"""Borrowed hard negatives: the screen, the audit rows, and what ``ifir data validate`` refuses."""

import json

from ifir_lib.seeds import negative_audit as na


def _seed(sid, query, hn_ids, texts):
    return {
        "id": sid,
        "query": query,
        "instruction": "Only field trials run outside Europe.",
        "reference_reversal": "Only laboratory studies, wherever they ran.",
        "reference_negative_index": 0,
        "positive": {"id": f"{sid}-pos", "text": texts[f"{sid}-pos"]},
        "instruction_negatives": [{"id": f"{sid}-in1", "text": texts[f"{sid}-in1"]}],
        "hard_negatives": [{"id": h, "text": texts[h]} for h in hn_ids],
    }


TEXTS = {
    "A-001-pos": "A field trial in Kenya tested drought-tolerant maize over three seasons.",
    "A-001-in1": "A greenhouse study in the Netherlands measured maize roots under drought.",
    "A-001-hn1": "Knitting patterns for winter scarves, with wool weights and needle sizes.",
    "B-002-pos": "A field trial in Malawi compared drought-tolerant maize with local varieties.",
    "B-002-in1": "A laboratory study grew maize seedlings in dry soil in controlled chambers.",
    "B-002-hn1": "Tide tables for a harbour, with times of high and low water.",
}
SEEDS = [
    _seed("A-001", "drought tolerant maize yields", ["A-001-hn1", "B-002-pos"], TEXTS),
    _seed("B-002", "Drought tolerant maize  yields", ["B-002-hn1", "A-001-hn1"], TEXTS),
]


def test_borrowed_and_owner():
    assert na.owner("A-011-hn1") == "A-011" and na.owner("M-116-in2") == "M-116"
    assert [h["id"] for h in na.borrowed(SEEDS[0])] == ["B-002-pos"]


def test_screen_flags_a_shared_query_and_a_near_positive():
    rows = {r["hn"]: r for r in na.screen(SEEDS)}
    assert set(rows) == {"B-002-pos", "A-001-hn1"}
    assert rows["B-002-pos"]["same_query"] and rows["B-002-pos"]["flagged"]
    assert rows["B-002-pos"]["sim_positive"] > rows["A-001-hn1"]["sim_positive"]


def test_screen_finds_the_shared_query_with_a_user_s_own_passage_ids():
    """With ids like 'doc7' (not '<seed>-pos'), the passage's seed was never found, so a seed
    borrowing its same-query twin's positive was not flagged by that criterion."""
    ids = {k: f"doc{i}" for i, k in enumerate(TEXTS)}
    texts = {ids[k]: v for k, v in TEXTS.items()}
    own = [
        {**s, "positive": {**s["positive"], "id": ids[s["positive"]["id"]]}}
        | {"instruction_negatives": [{**p, "id": ids[p["id"]]} for p in s["instruction_negatives"]]}
        | {"hard_negatives": [{"id": ids[h["id"]], "text": texts[ids[h["id"]]]} for h in s["hard_negatives"]]}
        for s in SEEDS
    ]
    rows = {(r["seed"], r["hn"]): r for r in na.screen(own)}
    assert rows[("A-001", ids["B-002-pos"])]["same_query"]


def _write(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def test_audit_rows_and_what_validate_refuses(tmp_path):
    screened = [
        {"seed": "A-001", "hn": "B-002-pos", "flagged": True},
        {"seed": "B-002", "hn": "A-001-hn1", "flagged": False},
    ]
    reviews = [
        {
            "seed": "A-001",
            "hn": "B-002-pos",
            "verdict": "drop",
            "note": "a field trial outside Europe",
            "reviewer": "r1",
        },
        {"seed": "B-002", "hn": "A-001-hn1", "verdict": "keep", "note": "knitting", "reviewer": "r2"},
    ]
    rows = na.audit_rows(SEEDS, screened, reviews, sampled={("B-002", "A-001-hn1")})
    assert [r["verdict"] for r in rows] == ["drop", "keep"] and rows[1]["sampled"] and not rows[0]["sampled"]
    assert rows[0]["text_sha256"] == na.text_sha256(TEXTS["B-002-pos"])
    audit = _write(tmp_path / "audit.jsonl", rows)
    # the seeds still carry the dropped one: refused, with file and line
    assert na.check_negative_audit(SEEDS, audit) == [
        f"{audit}:1: A-001 carries B-002-pos with verdict 'drop'"
    ]
    cleaned = na.without_dropped(SEEDS, rows)
    assert [h["id"] for h in cleaned[0]["hard_negatives"]] == ["A-001-hn1"]
    assert na.check_negative_audit(cleaned, audit) == []
    # a borrowed text edited after its review, an unreviewed row, a missing row
    edited = [
        cleaned[0],
        {
            **cleaned[1],
            "hard_negatives": [cleaned[1]["hard_negatives"][0], {"id": "A-001-hn1", "text": "Other text."}],
        },
    ]
    assert na.check_negative_audit(edited, audit) == [
        f"{audit}:2: B-002 A-001-hn1: the text changed after its review"
    ]
    _write(audit, [rows[0], {**rows[1], "reviewers": []}])
    assert na.check_negative_audit(cleaned, audit) == [f"{audit}:2: B-002 A-001-hn1: no reviewer read it"]
    _write(audit, [rows[0]])
    assert na.check_negative_audit(cleaned, audit) == [
        "B-002: borrowed hard negative A-001-hn1 is not in audit.jsonl"
    ]
    counts = na.audit_counts(_write(audit, rows))
    assert (
        counts["borrowed_screened"] == 2
        and counts["flagged"] == 1
        and counts["dropped"] == 1
        and counts["reviewed"] == 2
    )


def test_conflicting_rows_for_one_pair_any_drop_wins(tmp_path):
    """A reviewed ``drop`` row and a later reviewed ``keep`` row for one pair passed (the last row
    won, by file order); in the other order they were refused. ``audit_rows``' rule: any drop wins."""
    sha = na.text_sha256(TEXTS["A-001-hn1"])
    row = {"seed": "B-002", "hn": "A-001-hn1", "text_sha256": sha, "reviewers": ["r1"]}
    drop, keep = {**row, "verdict": "drop"}, {**row, "verdict": "keep"}
    other = {"seed": "A-001", "hn": "B-002-pos", "text_sha256": na.text_sha256(TEXTS["B-002-pos"])}
    other |= {"verdict": "keep", "reviewers": ["r2"]}
    for order, line in (([drop, other, keep], 1), ([keep, other, drop], 3)):
        audit = _write(tmp_path / "audit.jsonl", order)
        assert na.check_negative_audit(SEEDS, audit) == [
            f"{audit}:{line}: B-002 carries A-001-hn1 with verdict 'drop'"
        ]
    # a drop of the text the pair held before, then a keep of the text it carries now: the keep holds
    old_drop = {**drop, "text_sha256": na.text_sha256("an older text of A-001-hn1")}
    assert na.check_negative_audit(SEEDS, _write(tmp_path / "audit.jsonl", [old_drop, other, keep])) == []


def test_a_seed_without_a_reversal_is_screened_without_the_i_prime_criterion():
    """A null ``reference_reversal`` (the schema allows it) was screened against the text "None";
    now its ``margin_reversal`` is None and only the other criteria flag it. A seed without the
    field is a clear error, not a ``KeyError``."""
    import pytest

    from ifir_lib.core.errors import ConfigError

    seeds = [SEEDS[0], {**SEEDS[1], "reference_reversal": None}]
    rows = {r["seed"]: r for r in na.screen(seeds)}
    assert rows["B-002"]["margin_reversal"] is None and rows["A-001"]["margin_reversal"] is not None
    unflagged = {**rows["B-002"], "same_query": False, "sim_positive": 0.0, "sim_n_star": 0.0, "margin_i": -1}
    assert not na.flagged(unflagged)
    with pytest.raises(ConfigError, match="no reference_reversal field .*B-002"):
        na.screen([SEEDS[0], {k: v for k, v in SEEDS[1].items() if k != "reference_reversal"}])
