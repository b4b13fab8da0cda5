"""The held-out slice the experiment logs: its split and its three scores."""

import copy
import hashlib
import unicodedata

import pytest

from ifir_lib.core.models import format_query
from ifir_lib.testing.inputs import make_seed
from ifir_lib.training.heldout import heldout_scores, shared_bare_queries, split_heldout
from support.fakes import FakeEncoder


def test_split_heldout_is_fixed_disjoint_and_order_free():
    seeds = [make_seed(i) for i in range(40)]
    train, held = split_heldout(seeds, 6)
    train2, held2 = split_heldout(list(reversed(seeds)), 6)
    assert len(held) == 6 and len(train) == 34
    assert {s["id"] for s in held} == {s["id"] for s in held2}
    assert not {s["id"] for s in held} & {s["id"] for s in train}
    assert split_heldout(seeds, 0) == (seeds, [])
    with pytest.raises(ValueError, match="cannot hold out 40 of 40"):
        split_heldout(seeds, 40)


def _split_before_copies(seeds, n):
    """split_heldout as it was before copies were grouped: the n smallest id hashes."""
    ranked = sorted(seeds, key=lambda s: hashlib.sha256(f"heldout:{s['id']}".encode()).hexdigest())
    held = {s["id"] for s in ranked[:n]}
    return [s for s in seeds if s["id"] not in held], [s for s in seeds if s["id"] in held]


@pytest.mark.parametrize("n", [1, 8, 64, 1000])
def test_the_bundled_seeds_split_as_before(bundled_seeds, n):
    """The bundled seeds hold no copies: the experiment's held-out seeds (64 fast, 1000 paper) stay."""
    assert split_heldout(bundled_seeds, n) == _split_before_copies(bundled_seeds, n)


def _accented(i):
    seed = make_seed(i)
    seed["query"] += " (études récentes, Zürich)"  # NFC, as most tools write it
    return seed


@pytest.mark.parametrize(
    "respell",
    [
        lambda q: "  " + q.upper(),  # re-spaced and upper-cased
        lambda q: unicodedata.normalize("NFD", q),  # the same text in Unicode's decomposed form
    ],
    ids=["case-and-space", "nfd"],
)
def test_copies_of_a_seed_under_other_ids_stay_on_one_side(respell):
    seeds = [_accented(i) for i in range(20)]
    again = []
    for s in seeds:  # a second export of the same seeds, re-id'd and respelled
        t = copy.deepcopy(s)
        t["id"], t["query"] = "export2-" + s["id"], respell(s["query"])
        again.append(t)
    assert all(a["query"] != s["query"] for a, s in zip(again, seeds))
    train, held = split_heldout(seeds + again, 6)
    assert len(held) == 6 and len(train) == 34
    held_ids = {s["id"] for s in held}
    for s in seeds:
        assert (s["id"] in held_ids) == ("export2-" + s["id"] in held_ids), s["id"]
    assert {s["id"] for s in held if not s["id"].startswith("export2-")} <= {
        s["id"] for s in _split_before_copies(seeds + again, 6)[1]
    }, "a group goes where its smallest hash puts it"


def test_a_seeds_reversed_twin_stays_on_its_side():
    """A twin row (the seed's I' as its instruction, N* as its positive, the seed's P+ among its
    negatives) was trained while the seed was held out: exactly its rev_acc and orig_acc pairs
    (probe 46 K). Its instruction, positive and reversal are all other texts than the seed's own."""
    seeds = [make_seed(i) for i in range(12)]
    twins = []
    for s in seeds:
        k = s.get("reference_negative_index", 0)
        t = copy.deepcopy(s)
        t["id"], t["instruction"], t["reference_reversal"] = (
            "twin-" + s["id"],
            s["reference_reversal"],
            s["instruction"],
        )
        t["positive"], t["instruction_negatives"][k] = s["instruction_negatives"][k], s["positive"]
        t["positive"]["id"], t["instruction_negatives"][k]["id"] = "twin-p-" + s["id"], "twin-n-" + s["id"]
        twins.append(t)
    for n in (3, 5):
        train, held = split_heldout(seeds + twins, n)
        held_ids = {s["id"] for s in held}
        assert held and all((s["id"] in held_ids) == ("twin-" + s["id"] in held_ids) for s in seeds)


def test_a_reexport_with_one_character_changed_stays_on_one_side_in_any_order():
    """New seed and passage ids, the instruction's final period dropped: the same query and
    positive landed on both sides (6 of 8 held-out seeds in the probe), and concatenating the two
    exports in the other order held out other seeds."""
    seeds = [make_seed(i) for i in range(40)]
    again = []
    for s in seeds:
        t = copy.deepcopy(s)
        t["id"], t["instruction"] = "v2-" + s["id"], s["instruction"].rstrip(".")
        t["positive"]["id"] = "v2-" + s["positive"]["id"]
        again.append(t)
    train, held = split_heldout(seeds + again, 8)
    assert len(held) == 8
    trained = {s["positive"]["text"] for s in train} | {(s["query"], s["instruction"]) for s in train}
    for s in held:
        assert s["positive"]["text"] not in trained and (s["query"], s["instruction"]) not in trained
    assert {s["id"] for s in split_heldout(again + seeds, 8)[1]} == {s["id"] for s in held}


def _flip_table(seed, follows: bool):
    """Vectors under which the model follows both instructions (or, ``follows=False``, neither)."""
    p, n = ([1.05, 0, 0.1], [0, 1, 0]) if follows else ([0.2, 1, 0.3], [1, 0, 0])
    table = {
        format_query(seed["query"], seed["instruction"]): [1, 0, 0.1],
        format_query(seed["query"], seed["reference_reversal"]): [0, 1, 0.1],
        seed["query"]: [0.5, 0.5, 0.1],
        seed["positive"]["text"]: p,
    }
    for i, d in enumerate(seed["instruction_negatives"]):
        table[d["text"]] = n if i == 0 else [0.3, 0.3, 0.1]
    for d in seed["hard_negatives"]:
        table[d["text"]] = [0, 0, 1]
    return table


def test_heldout_scores_hand_computed():
    seed = make_seed(3, negatives=2)
    good = heldout_scores(FakeEncoder(_flip_table(seed, True)), [seed])
    assert good["orig_acc"] == good["rev_acc"] == good["query_acc"] == 100.0
    bad = heldout_scores(FakeEncoder(_flip_table(seed, False)), [seed])
    # cosines under q + I: N0 .995, N1 .707, P+ .215, hard .0995 -> P+ beats the 2 hard negatives only
    assert bad["orig_acc"] == pytest.approx(50.0)
    # under q + I': P+ .964, N1 .707, N* 0 -> N* beats neither
    assert bad["rev_acc"] == 0.0
    # the bare query still ranks P+ and both instruction negatives above both hard negatives
    assert bad["query_acc"] == 100.0 and bad["heldout_score"] == pytest.approx(50.0)


def test_heldout_scores_pool_the_narrative_form():
    seed = make_seed(3, negatives=2)
    seed.update(narrative="N of I", reversal_narrative="N of I'", aug_narrative="unused here")
    table = _flip_table(seed, True)
    # the model follows the short form and gets the narrative form backwards
    table[format_query(seed["query"], "N of I")] = table[
        format_query(seed["query"], seed["reference_reversal"])
    ]
    table[format_query(seed["query"], "N of I'")] = table[format_query(seed["query"], seed["instruction"])]
    half = heldout_scores(FakeEncoder(table), [seed])
    # short form: all 4 orig pairs and 2 rev pairs right; narrative form: none (P+ .009 < hard .0995)
    assert half["orig_acc"] == half["rev_acc"] == pytest.approx(50.0) and half["query_acc"] == 100.0


def test_training_seeds_sharing_a_held_out_seed_s_bare_query_are_paired(caplog):
    """The split groups a question with its instruction only: All-orig trained a held-out seed's
    bare query (its query_acc question) through a seed with another instruction, without a word.
    The split stays as it is (the bundled one is pinned) and says nothing itself; the pairs are
    found for the modes that train a bare query (pipelines.train warns there)."""
    seeds = [make_seed(i) for i in range(12)]
    train, held = split_heldout(seeds, 3)
    asked = held[0]["query"]
    again = [{**s, "query": f"  {asked.upper()} "} if s["id"] == train[4]["id"] else s for s in seeds]
    with caplog.at_level("INFO"):
        train2, held2 = split_heldout(again, 3)
    assert [s["id"] for s in held2] == [s["id"] for s in held]  # the split is unchanged
    assert not caplog.records
    assert [(t["id"], h["id"]) for t, h in shared_bare_queries(train2, held2)] == [
        (train[4]["id"], held[0]["id"])
    ]


@pytest.mark.parametrize("mode", ["all-orig", "ins-dv"])
def test_the_bare_query_warning_is_given_only_for_a_mode_that_trains_the_bare_query(mode, caplog):
    """The warning fired from every split, for modes with no bare-query view (the cpu experiment
    preset, none of whose modes trains one, gave it for each of its runs); it is a warning only when
    a mode with the bare-query view is built, naming both seeds (bundled: H-003 asks B-023's query)."""
    from ifir_lib.pipelines.train import training_sets

    with caplog.at_level("WARNING"):
        training_sets((mode,), preset="smoke", budget=8, heldout_seeds=64)
    said = [r.getMessage() for r in caplog.records if "held-out split" in r.getMessage()]
    if mode == "ins-dv":
        assert said == []
    else:
        assert said == [
            "held-out split: training seed H-003 asks the bare query of held-out seed B-023 ('do smart "
            "thermostats actually save energy'); all-orig trains that query as its bare-query view, so "
            "B-023's held-out query_acc is not fully held out (1 training seed(s), 1 of 64 held-out seeds; "
            "the split groups questions with their instructions only, docs/method.md §6)"
        ]
