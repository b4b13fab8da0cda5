"""``ifir mine-negatives``: hard negatives from the pooled passages of all seeds, with a real MiniLM."""

import copy
import json

import pytest

from ifir_lib.core.errors import ConfigError
from ifir_lib.seeds.mining import MiningConfig, mine_negatives
from ifir_lib.testing.inputs import make_seed


def _passage_ids(seed):
    return {p["id"] for p in (seed["positive"], *seed["instruction_negatives"])}


def test_mined_negatives_are_k_and_never_relevant_to_the_bare_query(minilm):
    """Never a seed's own positive or instruction negatives, nor another seed's with the same query:
    two seeds asking one question (under other instructions) answered each other's bare query, and
    mining made one's positive the other's hard negative (7 cases on the bundled seeds)."""
    seeds = [make_seed(i) for i in range(12)]
    twin = copy.deepcopy(seeds[0])  # the same query under another instruction, its own passages
    twin["id"], twin["instruction"] = "twin", "Only consider studies from before 2000."
    twin["positive"] = {"id": "twin-pos", "text": seeds[0]["positive"]["text"].replace("five", "six")}
    twin["instruction_negatives"] = [
        {"id": "twin-neg", "text": seeds[0]["instruction_negatives"][0]["text"] + " Again."}
    ]
    seeds.append(twin)
    mined, counts = mine_negatives(seeds, MiningConfig(k=3, replace=True), model=minilm)
    assert counts["mined"] == len(seeds) and seeds[0]["hard_negatives"] != mined[0]["hard_negatives"]
    for s in mined:
        ids = [p["id"] for p in s["hard_negatives"]]
        assert len(ids) == 3 and not set(ids) & _passage_ids(s), s["id"]
    for a, b in ((mined[0], twin), (mined[-1], seeds[0])):
        assert not {p["id"] for p in a["hard_negatives"]} & _passage_ids(b), a["id"]


def test_a_query_worded_a_little_otherwise_is_the_same_query(minilm):
    """'how to taper before a marathon' and 'how do I taper before a marathon?' were two queries:
    25 bundled seeds got their twin's positive or instruction negative as a hard negative."""
    seeds = [make_seed(i) for i in range(10)]
    twin = copy.deepcopy(seeds[0])
    twin["id"], twin["query"] = "twin", seeds[0]["query"] + "?"
    twin["positive"] = {"id": "twin-pos", "text": "Rooftop solar panels research: output per square metre."}
    twin["instruction_negatives"] = [{"id": "twin-neg", "text": "Solar panels research on costs, 2019."}]
    mined, counts = mine_negatives([*seeds, twin], MiningConfig(k=3, replace=True), model=minilm)
    assert not {p["id"] for p in mined[0]["hard_negatives"]} & _passage_ids(twin)
    assert not {p["id"] for p in mined[-1]["hard_negatives"]} & _passage_ids(seeds[0])
    assert counts["near_same_query_seeds"] >= 2
    with pytest.raises(ConfigError, match="same_query_cosine"):
        MiningConfig(same_query_cosine=0)


def test_k_and_max_rel_are_checked():
    """``k`` 0 or below took the whole pool (the loop stopped only at ``len == k``); ``max_rel``
    above 1 turned the false-negative guard off, at or below 0 it kept nothing."""
    for bad in (
        dict(k=0),
        dict(k=-1),
        dict(k=True),
        dict(max_rel=2.0),
        dict(max_rel=0.0),
        dict(max_rel=-0.5),
    ):
        with pytest.raises(ConfigError, match="--k|--max-rel"):
            MiningConfig(**bad)
    assert MiningConfig(k=1, max_rel=1.0).k == 1


def test_own_hard_negatives_are_topped_up_and_short_seeds_counted(minilm, caplog):
    """Without ``replace`` a seed's hand-picked hard negatives were replaced wholesale; with it they
    go. A seed the pool leaves short of ``k`` is counted and warned about."""
    seeds = [make_seed(i) for i in range(10)]
    hand = {"id": "hand-1", "text": "A hand-picked note on garden sheds and their roofs."}
    seeds[0]["hard_negatives"] = [hand]
    mined, counts = mine_negatives(seeds, MiningConfig(k=3), model=minilm)
    assert mined[0]["hard_negatives"][0] == hand and len(mined[0]["hard_negatives"]) == 3
    assert len({p["text"] for p in mined[0]["hard_negatives"]}) == 3 and counts["short_of_k"] == 0
    replaced, _ = mine_negatives(seeds, MiningConfig(k=3, replace=True), model=minilm)
    assert len(replaced[0]["hard_negatives"]) == 3 and hand not in replaced[0]["hard_negatives"][:1]
    _, counts = mine_negatives(seeds, MiningConfig(k=500, replace=True), model=minilm)
    assert counts["short_of_k"] == len(seeds) and "10 seed(s) got fewer than k=500" in caplog.text


def test_mine_file_reads_seeds_without_hard_negatives_or_type(tmp_path):
    """The README's path: a seed file with only the training stage's fields was refused
    (``hard_negatives``, ``instruction_type``: missing)."""
    from ifir_lib.seeds import mining

    src = tmp_path / "seeds.jsonl"
    rows = [make_seed(i) for i in range(8)]
    for r in rows:
        del r["hard_negatives"], r["instruction_type"]
    src.write_text("".join(json.dumps(r) + "\n" for r in rows))
    counts = mining.mine_file(src, tmp_path / "out.jsonl", MiningConfig(k=2))
    assert counts["mined"] == 8 and counts["short_of_k"] == 0
    out = [json.loads(x) for x in (tmp_path / "out.jsonl").read_text().splitlines()]
    assert all(len(r["hard_negatives"]) == 2 for r in out)
