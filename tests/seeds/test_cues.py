"""Surface cues (``seeds.cues``): word overlap, copied spans, names and length, on constructed seeds."""

from ifir_lib.seeds import cues


def _seed(instruction, reversal, positive, n_star, other="Tide tables for the harbour at dawn.", k=0):
    negatives = [{"id": "s-in1", "text": n_star}, {"id": "s-in2", "text": other}]
    if k == 1:
        negatives.reverse()
    return {
        "id": "s",
        "instruction": instruction,
        "reference_reversal": reversal,
        "reference_negative_index": k,
        "positive": {"id": "s-pos", "text": positive},
        "instruction_negatives": negatives,
        "hard_negatives": [{"id": "h-hn1", "text": "Knitting patterns for winter scarves and hats."}],
    }


def test_overlap_picks_only_a_strict_winner():
    assert cues.overlap_picks(
        "pruning apple trees in winter", "Winter pruning of apple trees.", ["Roses bloom."]
    )
    # a tie is not a pick: word matching alone cannot choose
    assert not cues.overlap_picks("apple trees", "apple trees", ["apple trees grow"])
    # stop words and instruction vocabulary carry no signal
    assert cues.content_words("Only documents about the apples, please") == {"apple"}


def test_copies_and_names():
    assert cues.copies_4gram("tell me about the year without a summer", "It was the year without a summer.")
    assert not cues.copies_4gram("a cold year after an eruption", "It was the year without a summer.")
    assert cues.capitalised_terms("Only results about Tambora and the NHS. Nothing else.") == {
        "Tambora",
        "NHS",
    }
    assert cues.names_only_right("Only Tambora", "Tambora erupted.", "Krakatoa erupted.")
    assert not cues.names_only_right("Only Tambora", "Tambora erupted.", "Tambora and Krakatoa.")


def test_view_cues_per_view_use_the_right_document():
    seed = _seed(
        instruction="Only volcanic winters in Europe",
        reversal="Only the Tambora eruption's effect on Asian rice harvests",
        positive="Europe suffered volcanic winters with failed wheat harvests.",
        n_star="After the Tambora eruption, Asian rice harvests failed for two years.",
    )
    # N* is instruction negative 1 of the reversal when k=1: the view must follow the index
    for k in (0, 1):
        s = _seed(
            seed["instruction"],
            seed["reference_reversal"],
            seed["positive"]["text"],
            seed["instruction_negatives"][0]["text"],
            k=k,
        )
        c = cues.seed_cues([s])["views"]
        assert c["instruction"]["overlap_picks_right"] == 1.0
        assert c["reference_reversal"]["overlap_picks_right"] == 1.0
        assert c["reference_reversal"]["names_term_only_right_has"] == 1.0
    abstract = {
        **seed,
        "abstract_reversal": "A food crisis outside Europe caused by a distant natural disaster",
    }
    c = cues.seed_cues([abstract])["views"]
    assert c["abstract_reversal"]["overlap_picks_right"] == 0.0 and c["abstract_reversal"]["seeds"] == 1
    assert "aug_instruction" not in c  # no seed carries one


def test_length_cues():
    s = _seed("x", "y", positive="one two three four five six seven eight", n_star="one two three four")
    lengths = cues.length_cues([s])
    assert lengths["positive_to_n_star_words_mean"] == 2.0 and lengths["positive_longer_than_n_star"] == 1.0
    assert lengths["positive_longest_candidate"] == 1.0 and lengths["chance_longest"] == round(1 / 4, 3)
