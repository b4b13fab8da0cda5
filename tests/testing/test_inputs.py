"""The synthetic FollowIR generator: round trip, determinism, scale."""

from ifir_lib.evaluation.corpora import load_followir, write_followir
from ifir_lib.testing.inputs import synthetic_followir


def test_synthetic_set_round_trips(tmp_path):
    data = synthetic_followir(3, 30, 20, rng_seed=1)
    back = load_followir(write_followir(data, tmp_path / "fir"))
    assert back.problems == []
    assert back.queries == data.queries and back.corpus == data.corpus
    assert back.top_ranked == data.top_ranked and back.qrel_diff == data.qrel_diff
    assert all(len(c) == 20 for c in back.top_ranked.values())
    # every query has changed documents, all of them among its candidates
    assert set(back.qrel_diff) == set(back.queries)
    assert all(set(d) <= set(back.top_ranked[q]) for q, d in back.qrel_diff.items())


def test_synthetic_set_is_deterministic_and_scales():
    assert synthetic_followir(2, 20, rng_seed=5).corpus == synthetic_followir(2, 20, rng_seed=5).corpus
    big = synthetic_followir(
        20, 2000, 300, rng_seed=0, sentences=[f"Sentence number {i}." for i in range(50)]
    )
    assert len(big.corpus) == 2000 and all(len(c) == 300 for c in big.top_ranked.values())
    assert len({d["text"] for d in big.corpus.values()}) > 1900  # recombined, nearly all distinct
