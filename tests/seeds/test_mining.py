"""``ifir mine-negatives``: hard negatives from the pooled passages of all seeds, with a real MiniLM."""

import copy

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
