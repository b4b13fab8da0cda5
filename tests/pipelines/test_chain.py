"""pipelines.chain: the notebooks' folder, what each stage reads or falls back to, and the best
reversal per seed that notebook 02 opens on."""

import json
import tempfile

import pytest

from ifir_lib.curation import widgets as iw
from ifir_lib.curation.decisions import load_decisions
from ifir_lib.pipelines.chain import Chain, best_reversal_rows, chain_folder
from ifir_lib.training.trainsets import build_trainset, load_reversals


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
    assert chain.reversals == chain.synthesis_target(standin=False)
    assert chain.reversals_for_training().path is None, "no verified LLM row: 02 showed the references"
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


def _llm_row(seed, reversal, verified):
    return {
        "key": seed["id"],
        "seed_id": seed["id"],
        "backend": "openai",
        "model": "m",
        "status": "accepted",
        "verify_flip": verified,
        "reversal": reversal,
        "negative_index": 0,
    }


def test_03_trains_exactly_the_reversals_02_showed_and_judged(bundled_seeds, tmp_path):
    """Notebook 02 opens seed 1 on its reference reversal (its LLM row is unverified); the curator
    rejects that text and accepts seed 0's verified LLM text. 03 must train the same texts: the
    reference for seed 1 is left out, seed 0 trains the LLM text, and no LLM text for seed 1."""
    seeds = bundled_seeds[:6]
    path = tmp_path / "seeds.jsonl"
    path.write_text("".join(json.dumps(s) + "\n" for s in seeds))
    chain = Chain(tmp_path / "out")
    chain.root.mkdir()
    rows = [_llm_row(seeds[0], "LLM one, verified.", True), _llm_row(seeds[1], "LLM two, unverified.", None)]
    chain.reversals.write_text("".join(json.dumps(r) + "\n" for r in rows))
    # notebook 02, its calls
    shown_seeds, synthesized = iw.load_for_inspection(path, chain.reversals_for_inspection().path)
    shown, _ = best_reversal_rows(shown_seeds, synthesized)
    explorer = iw.Explorer(shown_seeds, shown, curation_path=chain.curation, auto_advance=False)
    assert explorer.current["reversal"] == "LLM one, verified."
    explorer.accept_button.click()
    explorer.next_button.click()
    assert explorer.current["reversal"] == seeds[1]["reference_reversal"]
    explorer.reject_button.click()
    # notebook 03, its calls
    rev = chain.reversals_for_training(path)
    assert rev.path == chain.shown and "1 seeds with a verified LLM reversal, 5 with" in rev.note
    assert "notebook 01's LLM reversals (" in rev.note
    trained = load_reversals(rev.path)
    assert trained[seeds[0]["id"]]["reversal"] == "LLM one, verified."
    assert trained[seeds[1]["id"]]["reversal"] == seeds[1]["reference_reversal"]
    ts = build_trainset("ins-dv", seeds, trained, num_negatives=3, curation=load_decisions(chain.curation))
    dv = {e["group"]: e["instruction"] for e in ts.examples if e["view"] == "dv"}
    assert ts.counts["curated_out"] == 1 and seeds[1]["id"] not in dv
    assert dv[seeds[0]["id"]] == "LLM one, verified." and "LLM two, unverified." not in dv.values()
    assert "curation_stale" not in ts.counts, "every decision is about a text 03 trains"


def test_reversals_for_training_defaults_to_the_bundled_seeds_02_opens(tmp_path, bundled_seeds):
    chain = Chain(tmp_path)
    chain.reversals.write_text(json.dumps(_llm_row(bundled_seeds[3], "LLM, verified.", True)) + "\n")
    assert chain.reversals_for_training().path == chain.shown
    shown = load_reversals(chain.shown)
    assert len(shown) == len(bundled_seeds) and shown[bundled_seeds[3]["id"]]["reversal"] == "LLM, verified."


def test_notebook_04_s_base_model_is_the_one_its_runs_started_from(tmp_path):
    """Notebook 04 fixed BASE_MODEL = "minilm" while notebook 03 trains the preset's backbone
    (gte-multilingual-base on a GPU): a backbone's difference was tested as training's effect."""
    from ifir_lib.core.run_folder import RunFolder
    from ifir_lib.pipelines.chain import base_model_of, evaluate_chain

    assert base_model_of(tmp_path) is None  # no run yet: notebook 04 takes the preset's
    run = RunFolder(tmp_path / "models" / "ins-dv")
    run.path.mkdir(parents=True)
    run.start({"mode": "ins-dv", "config": {"base_model": "Alibaba-NLP/gte-multilingual-base"}}, "abc")
    (run.path / "modules.json").write_text("[]")
    assert base_model_of(tmp_path) == "Alibaba-NLP/gte-multilingual-base"
    with pytest.raises(
        ValueError, match=r"trained from Alibaba-NLP/gte-multilingual-base, not from the base model 'minilm'"
    ):
        evaluate_chain(Chain(tmp_path), "minilm", [])  # refused before any model is loaded
