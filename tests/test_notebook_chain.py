"""The notebooks as a chain: 01 -> 05 run in order in one fresh folder (smoke mode) and each one
reads what the previous one wrote there.

The local stand-in server plays the LLM endpoint (``IFIR_BASE_URL``), so notebook 01 writes the
chain's own ``reversals.jsonl`` (not ``standin/``) and the rest of the chain must pick it up:
02 opens on its verified rows, 03 trains on it with 02's decision, 04 evaluates 03's runs on v1
and v2, 05 draws 04's table. Each notebook runs in its own kernel, as a person runs them.
"""

from __future__ import annotations

import json
from pathlib import Path

import nbformat
import pandas as pd
import pytest

from ifir_lib.core.config import SEEDS_PATH
from ifir_lib.pipelines.demo import DemoConfig
from ifir_lib.pipelines.evaluate import run_label
from ifir_lib.seeds.schema import load_seeds
from ifir_lib.testing.openai_server import FakeOpenAIServer

NOTEBOOKS = Path(__file__).resolve().parents[1] / "notebooks"


def run_notebook(name: str, parameters: str = "", last: str = "") -> str:
    """Execute ``notebooks/<name>.ipynb`` (cwd: notebooks/) and return its text outputs joined.
    ``parameters`` is appended to the parameters cell (as papermill does), ``last`` run as a last cell."""
    from nbclient import NotebookClient

    nb = nbformat.read(NOTEBOOKS / f"{name}.ipynb", as_version=4)
    (cell,) = [c for c in nb.cells if "parameters" in c.metadata.get("tags", [])]
    cell.source += "\n" + parameters
    if last:
        nb.cells.append(nbformat.v4.new_code_cell(last))
    NotebookClient(nb, timeout=900, resources={"metadata": {"path": str(NOTEBOOKS)}}).execute()
    texts = []
    for cell in nb.cells:
        for out in cell.get("outputs", []):
            texts.append(out.get("text", "") or out.get("data", {}).get("text/plain", ""))
    return "\n".join(texts)


@pytest.fixture(scope="module")
def chain(module_tmp):
    """Run 01 -> 05 in one folder; ``{"out": folder, "<notebook>": its text output}``."""
    out = module_tmp / "chain"
    out.mkdir()
    server = FakeOpenAIServer(latency_s=0.0).start()
    mp = pytest.MonkeyPatch()
    for k, v in {
        "IFIR_SMOKE": "1",
        "IFIR_OUT": str(out),
        "IFIR_BASE_URL": server.url,
        "IFIR_LLM_MODEL": "test-model",
        "OPENAI_API_KEY": "sk-test-not-a-secret",
        "HF_HUB_OFFLINE": "1",
        "HF_DATASETS_OFFLINE": "1",
        "TOKENIZERS_PARALLELISM": "false",
    }.items():
        mp.setenv(k, v)
    try:
        ran = {"out": out}
        for name in ("01_synthesize", "02_inspect", "03_train", "04_evaluate", "05_figures"):
            ran[name] = run_notebook(name)
        yield ran
    finally:
        mp.undo()
        server.stop()


def _rows(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


@pytest.mark.slow
def test_01_writes_and_verifies_the_chains_reversals(chain):
    out = chain["out"]
    rows = _rows(out / "reversals.jsonl")
    assert len(rows) == 24 and not (out / "standin").exists(), "a real endpoint writes the chain's file"
    accepted = [r for r in rows if r["status"] == "accepted"]
    assert accepted and all("verify_flip" in r for r in accepted), "01 verifies what it wrote"
    assert "Seed A-001" in chain["01_synthesize"]  # the worked example of the topic shortcut


@pytest.mark.slow
def test_02_opens_on_verified_llm_reversals_with_true_counts(chain):
    out = chain["out"]
    n_seeds = len(load_seeds(SEEDS_PATH))
    verified = sum(
        1 for r in _rows(out / "reversals.jsonl") if r["status"] == "accepted" and r.get("verify_flip")
    )
    assert verified > 0
    assert (
        f"{n_seeds} seeds: {verified} open with a verified LLM reversal, {n_seeds - verified} with the bundled"
        in chain["02_inspect"]
    )
    decisions = _rows(out / "curation.jsonl")
    assert [d["decision"] for d in decisions] == ["accept"]


@pytest.mark.slow
def test_03_trains_on_01s_reversals_with_02s_decisions(chain):
    out = chain["out"]
    assert f"notebook 01's LLM reversals ({out / 'reversals.jsonl'})" in chain["03_train"]
    assert f"notebook 02's decisions ({out / 'curation.jsonl'})" in chain["03_train"]
    for mode in DemoConfig.preset("smoke").modes:
        record = json.loads((out / "models" / mode / "ifir_run.json").read_text())
        assert record["status"] == "finished" and record["mode"] == mode
        sources = json.dumps(record["data"])
        # 03 trains what 02 showed: 01's verified rows, the reference reversals for the rest
        assert str(out / "reversals_shown.jsonl") in sources and str(out / "curation.jsonl") in sources, (
            sources
        )
    assert "= library loss" in chain["03_train"]  # the tiny batch's loss, by hand and by the library


@pytest.mark.slow
def test_04_evaluates_03s_runs_on_v1_and_v2_and_checks_pmrr_by_hand(chain):
    out = chain["out"]
    table = pd.read_csv(out / "results.csv")
    labels = {run_label(out / "models" / m) for m in DemoConfig.preset("smoke").modes} | {"minilm"}
    for label in labels:
        sets = set(table.loc[table["model"] == label, "dataset"])
        assert sets == {"followir_mini", "followir_v2"}, f"{label}: {sets}"
    assert len(table) == len(table.drop_duplicates(["model", "mode", "dataset", "metric"])), "rows duplicated"
    assert ": equal" in chain["04_evaluate"] and "DIFFERENT" not in chain["04_evaluate"]


@pytest.mark.slow
def test_05_draws_04s_table(chain):
    out = chain["out"]
    assert f"notebook 04's results table ({out / 'results.csv'})" in chain["05_figures"]
    assert "MADE-UP" not in chain["05_figures"]
    assert "\\begin{table}" in chain["05_figures"] and "Ins-DV" in chain["05_figures"]
    assert "95% bootstrap CI over queries" in chain["05_figures"]  # the reading names its intervals
    for ext in ("pdf", "svg", "png"):
        assert list((out / "figures").glob(f"*.{ext}")), f"no .{ext} figure"


@pytest.mark.slow
def test_03_shows_the_sets_it_trains(module_tmp, monkeypatch):
    """Sections 2-4 of notebook 03 (the training sets' counts, one dual-view pair, the dry run) built
    their sets from the seeds alone: the bundled reference reversals, no curation, while section 5
    trained 02's reversals with its decisions. Here 02 rejected every seed of the Ins-DV set that
    the seeds alone give, so the sets shown must be the curated ones section 5 trains."""
    from ifir_lib.curation.decisions import CurationStore
    from ifir_lib.training.trainer import TrainConfig
    from ifir_lib.training.trainsets import build_trainset

    out = module_tmp / "shown"
    out.mkdir()
    uncurated = build_trainset(
        "ins-dv", SEEDS_PATH, budget=16, num_negatives=TrainConfig.preset("smoke").num_negatives
    )
    store = CurationStore(out / "curation.jsonl")
    for sid in sorted({e["group"] for e in uncurated.examples}):
        store.record(sid, "reject")  # no row: the reject applies to the seed's key, whatever its text
    for k, v in {"IFIR_SMOKE": "1", "IFIR_OUT": str(out), "HF_HUB_OFFLINE": "1"}.items():
        monkeypatch.setenv(k, v)
    last = 'import json; print("SHOWN", json.dumps({m: s.manifest() for m, s in sets.items()}))'
    text = run_notebook("03_train", 'MODES = ("ins-orig", "ins-dv")\nMAX_STEPS = 1', last)
    shown = json.loads(text.split("SHOWN ", 1)[1].splitlines()[0])
    for mode in ("ins-orig", "ins-dv"):
        trained = json.loads((out / "models" / mode / "ifir_run.json").read_text())["data"]
        assert shown[mode]["sha256"] == trained["sha256"], (
            f"{mode}: notebook 03 showed another set than it trained"
        )
    assert shown["ins-dv"]["curated_out"] == 8 and shown["ins-dv"]["sha256"] != uncurated.manifest()["sha256"]
