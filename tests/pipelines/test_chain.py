"""pipelines.chain: the notebooks' folder, what each stage reads or falls back to, and the best
reversal per seed that notebook 02 opens on."""

import tempfile

from ifir_lib.pipelines.chain import Chain, best_reversal_rows, chain_folder


def test_folder_comes_from_ifir_out_then_smoke_then_the_demo(monkeypatch, tmp_path):
    monkeypatch.setenv("IFIR_OUT", str(tmp_path / "x"))
    assert chain_folder() == (tmp_path / "x").resolve()
    monkeypatch.delenv("IFIR_OUT")
    monkeypatch.setenv("IFIR_SMOKE", "1")
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    a, b = chain_folder(), chain_folder()
    assert a != b and a.is_relative_to(tmp_path), "smoke mode: a new temporary folder each time"
    monkeypatch.setenv("IFIR_SMOKE", "0")
    monkeypatch.setenv("CI", "")
    assert chain_folder().parts[-2:] == ("out", "demo")


def test_each_stage_says_what_it_read_or_fell_back_to(tmp_path):
    chain = Chain(tmp_path)
    assert chain.reversals_for_training().path is None
    assert "bundled reference reversals" in str(chain.reversals_for_training())
    assert chain.curation_for_training().path is None and chain.results_for_figures().path is None
    assert chain.synthesis_target(standin=True) == tmp_path / "standin" / "reversals.jsonl"
    for p in (chain.reversals, chain.curation, chain.results):
        p.write_text("")
    assert chain.reversals_for_training().path == chain.reversals == chain.synthesis_target(standin=False)
    assert chain.reversals_for_inspection().path == chain.reversals
    assert chain.curation_for_training().path == chain.curation
    assert chain.results_for_figures().path == chain.results


def test_best_reversal_is_a_verified_llm_row_else_the_reference(bundled_seeds):
    seeds = bundled_seeds[:4]
    rows = [
        {
            "key": seeds[0]["id"],
            "seed_id": seeds[0]["id"],
            "status": "accepted",
            "verify_flip": True,
            "reversal": "LLM one",
            "negative_index": 0,
        },
        {
            "key": seeds[1]["id"],
            "seed_id": seeds[1]["id"],
            "status": "accepted",
            "verify_flip": False,
            "reversal": "LLM two",
            "negative_index": 0,
        },
        {
            "key": seeds[2]["id"],
            "seed_id": seeds[2]["id"],
            "status": "declined",
            "verify_flip": None,
            "reversal": None,
            "negative_index": 0,
        },
    ]
    best, counts = best_reversal_rows(seeds, rows)
    assert counts == {"seeds": 4, "llm_verified": 1, "reference": 3, "none": 0}
    assert [r["reversal"] for r in best] == ["LLM one", *(s["reference_reversal"] for s in seeds[1:])]
    assert all(r["backend"] == "reference" for r in best[1:])
    no_ref = [{**seeds[3], "reference_reversal": None}]
    assert best_reversal_rows(no_ref, None)[1] == {"seeds": 1, "llm_verified": 0, "reference": 0, "none": 1}
