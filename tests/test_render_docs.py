"""tools/render_notebooks.py (``make docs``): rendered Markdown copies of the notebooks with PNG
figures, each file under 1 MB, no widget views, progress bars, colour codes, secrets or local paths.

The cleaning rules are checked on real notebook outputs and a real pandas Styler; one slow test
renders notebooks 02 (a widget explorer) and 05 (plotly figures) in smoke mode, as ``make docs``
runs them on the demo's folder.
"""

import importlib.util
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

import nbformat
import pandas as pd
import pytest

from ifir_lib.curation.tables import readable_table

REPO = Path(__file__).resolve().parents[1]
SCRIPT = REPO / "tools" / "render_notebooks.py"
KEY = "sk-test-R3nd3r-d0cs-k3y-0099"  # distinctive, so a leak is easy to grep for
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(scope="module")
def rn():
    spec = importlib.util.spec_from_file_location("render_notebooks", SCRIPT)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod  # dataclasses look their module up there
    spec.loader.exec_module(mod)
    return mod


def test_progress_bars_and_colour_codes_leave_the_streams(rn):
    bar = "Batches:  50%|█████     | 1/2 [00:01<00:01,  1.2it/s]\rBatches: 100%|██████████| 2/2 [00:02<00:00]"
    text = (
        f"{bar}\n\x1b[33mUserWarning: kept\x1b[0m\nLoading weights: 100%|██████████| 103/103 [00:00<00:00]\n"
    )
    out = rn.clean_output(nbformat.v4.new_output("stream", name="stderr", text=text))
    assert out.text == "UserWarning: kept\n"
    only_bars = nbformat.v4.new_output("stream", name="stderr", text=bar + "\n")
    assert rn.clean_output(only_bars) is None, "a stream of progress bars alone is dropped"


def test_prints_split_by_a_progress_bar_read_as_one_block(rn):
    out = [
        nbformat.v4.new_output("stream", name="stdout", text="synthesized: 532 of 1121\n"),
        nbformat.v4.new_output("stream", name="stderr", text="Batches: 100%|██████████| 9/9 [00:03<00:00]\n"),
        nbformat.v4.new_output("stream", name="stdout", text="  reference: 638 of 1123\n"),
    ]
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("verify()", outputs=out)])
    (cell,) = rn.clean_notebook(nb).cells
    assert [(o.name, o.text) for o in cell.outputs] == [
        ("stdout", "synthesized: 532 of 1121\n  reference: 638 of 1123\n")
    ]


def test_a_widget_view_goes_but_html_beside_it_stays(rn):
    view = {"application/vnd.jupyter.widget-view+json": {"model_id": "abc", "version_major": 2}}
    alone = nbformat.v4.new_output("display_data", data={**view, "text/plain": "VBox(children=(...))"})
    assert rn.clean_output(alone) is None
    with_html = nbformat.v4.new_output("display_data", data={**view, "text/html": "<p><b>Query:</b> q</p>"})
    assert rn.clean_output(with_html).data == {"text/html": "<p><b>Query:</b> q</p>"}


def test_styler_html_is_the_same_every_run_and_has_no_style_block(rn):
    df = pd.DataFrame({"key": ["A-001", "A-002"], "score": [0.5, 2246.0]})
    first, second = (rn.clean_html(readable_table(df)._repr_html_()) for _ in range(2))
    assert first == second, "pandas gives each Styler a random id; the rendered copy must not"
    assert "<style" not in first and "A-002" in first and "2,246" in first
    assert all(line.strip() for line in first.splitlines()), "a blank line would end the HTML block"


def test_scrub_names_secrets_and_shortens_paths(rn, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # make runs from the repository root with IFIR_OUT=out/demo
    env = {"OPENAI_API_KEY": KEY, "IFIR_OUT": "out/demo", "PATH": "/usr/bin"}
    seeds = REPO / "ifir_lib" / "data" / "seeds.jsonl"
    temp = f"{tempfile.gettempdir()}/tmpab12cd34"  # what tempfile.mkdtemp() names
    text = f"key {KEY}\nresults {tmp_path}/out/demo/results.csv\nseeds {seeds}\nexample {temp}/runs: done\n"
    clean, leaked = rn.scrub(text, env)
    assert leaked == ["[$OPENAI_API_KEY]"] and KEY not in clean
    assert "results out/demo/results.csv" in clean and str(tmp_path) not in clean
    assert "seeds ifir_lib/data/seeds.jsonl" in clean
    assert f"example {tempfile.gettempdir()}/tmpXXXXXXXX/runs: done" in clean
    assert rn.scrub("stand-in at http://127.0.0.1:54269/v1", env)[0] == "stand-in at http://127.0.0.1:PORT/v1"


def _chrome_or_skip():
    try:
        from choreographer.browsers.chromium import Chromium  # what kaleido uses

        found = os.environ.get("BROWSER_PATH") or Chromium.find_browser(skip_local=False)
    except Exception:  # choreographer missing or its search failed
        found = None
    if not found:
        why = "no Chrome for kaleido's PNG export (make setup installs one: tools/ensure_chrome.py)"
        pytest.fail(why) if os.environ.get("CI") else pytest.skip(why)


def _png_width(path: Path) -> int:
    data = path.read_bytes()
    assert data[:8] == PNG_SIGNATURE, f"{path.name} is not a PNG"
    return int.from_bytes(data[16:20], "big")  # IHDR: width, then height


@pytest.fixture(scope="module")
def rendered(tmp_path_factory):
    """Notebooks 02 and 05 rendered in smoke mode into a fresh folder: ``(folder, chain folder, proc)``."""
    _chrome_or_skip()
    root = tmp_path_factory.mktemp("docs")
    chain, out = root / "chain", root / "notebooks"
    env = {**os.environ, "IFIR_SMOKE": "1", "IFIR_OUT": str(chain), "OPENAI_API_KEY": KEY}
    env.update(HF_HUB_OFFLINE="1", HF_DATASETS_OFFLINE="1", TOKENIZERS_PARALLELISM="false")
    names = [REPO / "notebooks" / f"{n}.ipynb" for n in ("02_inspect", "05_figures")]
    cmd = [sys.executable, str(SCRIPT), "--out", str(out), *map(str, names)]
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=900, cwd=REPO)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return out, chain, proc


@pytest.mark.slow
def test_each_notebook_gets_a_markdown_copy_with_its_figures(rendered):
    out, _, proc = rendered
    assert sorted(p.name for p in out.glob("*.md")) == ["02_inspect.md", "05_figures.md"]
    figures = sorted((out / "05_figures_files").glob("*.png"))
    assert len(figures) >= 4, "05 draws at least four plotly figures"
    for png in figures:
        assert png.stat().st_size < 1_000_000, f"{png.name}: {png.stat().st_size} bytes"
        assert 1000 <= _png_width(png) <= 1400, f"{png.name}: {_png_width(png)} px wide"
    assert "05_figures.md:" in proc.stdout and "PNG" in proc.stdout  # one line per notebook


@pytest.mark.slow
def test_image_links_resolve_and_nothing_interactive_or_local_leaks(rendered):
    out, chain, _ = rendered
    for md in out.glob("*.md"):
        text = md.read_text()
        assert md.stat().st_size < 1_000_000
        links = re.findall(r"!\[[^\]]*\]\(([^)]+)\)", text)
        assert all((out / link).is_file() for link in links), f"{md.name}: a broken image link"
        assert "widget-view+json" not in text and "VBox(" not in text, f"{md.name}: a widget view"
        assert "\x1b[" not in text and "%|" not in text, f"{md.name}: colour codes or a progress bar"
        assert KEY not in text and str(chain) not in text, f"{md.name}: a secret or the local chain path"
    assert re.search(r"!\[png\]\(05_figures_files/output_\d+_\d+\.png\)", (out / "05_figures.md").read_text())
    assert "Original instruction I:" in (out / "02_inspect.md").read_text(), (
        "02's static view of the explorer"
    )
