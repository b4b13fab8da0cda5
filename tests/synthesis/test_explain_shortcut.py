"""synthesis.explain: notebook 01's worked example finds a seed where the base model ignores I'."""

from ifir_lib.synthesis.explain import topic_shortcut


def test_shortcut_seed_ranks_p_first_under_both_instructions(bundled_seeds):
    ex = topic_shortcut(bundled_seeds, model="minilm")
    p = ex.table.iloc[0]
    assert p["document"].startswith("P+") and p["rank under I"] == 1 and p["rank under I'"] == 1
    n_star = ex.table[ex.table.document.str.startswith("N*")]
    assert len(n_star) == 1 and n_star.iloc[0]["rank under I'"] > 1  # N* should be first under I'
    assert ex.seed["id"] in ex.summary and "ranks P+ 1" in ex.summary
    n_docs = 1 + len(ex.seed["instruction_negatives"]) + len(ex.seed["hard_negatives"])
    assert len(ex.table) == n_docs and sorted(ex.table["rank under I"]) == list(range(1, n_docs + 1))
