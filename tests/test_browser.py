"""Every notebook as people use it: in a real JupyterLab, in a real browser.

Starts JupyterLab from this environment (``python -m jupyterlab``: the kernel is this Python, so it
imports the checkout's ``ifir_lib``) on a free local port with a token, opens copies of
``notebooks/*.ipynb`` in the system Chromium, driven by Playwright's Python package (Playwright's
own browser download is not used), runs each one from the menu (Run > Run All Cells) in smoke
mode, and fails on any error output, traceback or uncaught page error. Then it checks what a
person sees:

- notebook 02: the explorer renders (no "Error displaying widget", no "Loading widget..."), and a
  real click on *next* and then *accept* writes that example's decision to the curation file;
- notebooks 03 to 05: each plotly figure is drawn, with its traces.

With ``IFIR_SCREENSHOTS=<folder>`` (``make screenshots``) it saves a PNG of each notebook's key
view there (at most 300 KB). Then the notebooks run on the demo's outputs (``IFIR_OUT``, which
``make demo`` filled; not smoke mode), one at a time, so the screenshots show real loss curves and
rankings; the explorer is not clicked, so no decision lands in the demo's folder. Not covered here: what the notebooks compute (nbmake and the unit
tests check that). Two notebooks run at a time (the machine has two cores), longest first.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted(p.stem for p in (REPO / "notebooks").glob("[0-9][0-9]_*.ipynb"))
FIRST = ("03_train",)  # the longest (training) starts first, so the two lanes finish together
SCREENSHOTS = os.environ.get("IFIR_SCREENSHOTS")  # make screenshots: the demo's outputs, not smoke
LANES = 1 if SCREENSHOTS else 2
RUN_TIMEOUT_S = 900  # per notebook, as nbmake's --nbmake-timeout in the Makefile
VIEWPORT = {"width": 1400, "height": 900}
MIN_FIGURES = {"03_train": 1, "05_figures": 2}  # plotly figures each notebook must draw, at least
# the cell whose view stands for the notebook in docs/img/, found by a piece of its code
KEY_VIEWS = {
    "01_synthesize": 'backend="template"',
    "02_inspect": "explorer.widget",
    "03_train": "fig_loss_curves(",
    "04_evaluate": "ranking_table(",
    "05_figures": "fig_metrics_by_mode(",
}
MAX_PNG_BYTES = 300_000
SMOKE_ENV = {
    "IFIR_SMOKE": "1",
    "HF_HUB_OFFLINE": "1",
    "HF_DATASETS_OFFLINE": "1",
    "TOKENIZERS_PARALLELISM": "false",
}

# JupyterLab renders an error output as stderr text: a traceback, or a last line naming an error
STDERR = '.jp-OutputArea-output[data-mime-type="application/vnd.jupyter.stderr"]'
ERROR_JS = r"""(stderr) => [...document.querySelectorAll('.jp-Notebook .jp-Cell')].flatMap((cell, i) =>
  [...cell.querySelectorAll(stderr)].map(o => o.textContent.trim()).filter(t =>
    t.includes('Traceback') || /^[\w.]*(Error|Exception)\b/m.test(t.split('\n').slice(-1)[0]))
  .map(t => 'cell ' + i + ': ' + t.split('\n').slice(-3).join(' | ')))"""
# Run All has ended when no cell is queued or running ("[*]") and the kernel is idle: "done" when
# every code cell ran, "stopped" when an error left the rest unrun
DONE_JS = """() => {
  const prompts = [...document.querySelectorAll('.jp-Notebook .jp-CodeCell .jp-InputPrompt')]
    .map(e => e.textContent.trim());
  const idle = document.querySelector('.jp-Notebook-ExecutionIndicator[data-status="idle"]');
  if (!idle || prompts.some(t => t === '[*]:')) return "";
  return prompts.every(t => /^\\[\\d+\\]:$/.test(t)) ? "done" : "stopped";
}"""
STARTED_JS = """() => [...document.querySelectorAll('.jp-Notebook .jp-CodeCell .jp-InputPrompt')]
  .some(e => e.textContent.trim() !== '[ ]:')"""


def find_chromium() -> str | None:
    """``BROWSER_PATH``, a Chromium or Chrome on ``PATH``, or the one tools/ensure_chrome.py finds."""
    if os.environ.get("BROWSER_PATH"):
        return os.environ["BROWSER_PATH"]
    for name in ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable"):
        if found := shutil.which(name):
            return found
    try:
        from choreographer.browsers.chromium import Chromium  # what kaleido and ensure_chrome use

        return Chromium.find_browser(skip_local=False)
    except Exception:  # choreographer missing or its search failed: no browser to offer
        return None


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def chromium():
    path = find_chromium()
    if not path:
        why = "no Chromium or Chrome found (make setup installs one: tools/ensure_chrome.py)"
        if os.environ.get("CI"):
            pytest.fail(why)  # CI runs make setup, so a missing browser is a broken setup there
        pytest.skip(why)
    return path


def _screenshot_env() -> dict:
    """The demo's folder as the chain's folder, outside smoke mode (``make screenshots``)."""
    out = Path(os.environ.get("IFIR_OUT", REPO / "out" / "demo")).resolve()
    if not (out / "results.csv").exists():
        pytest.fail(f"screenshots show the demo's outputs: no {out / 'results.csv'}; run make demo first")
    return {"IFIR_SMOKE": "0", "CI": "", "IFIR_OUT": str(out)}


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    """A JupyterLab on copies of the notebooks; its own config, data, settings and temp folders."""
    root = tmp_path_factory.mktemp("lab")
    nbdir = root / "notebooks"
    nbdir.mkdir()
    for name in NOTEBOOKS:
        shutil.copy(REPO / "notebooks" / f"{name}.ipynb", nbdir)
    settings = root / "settings" / "@jupyterlab" / "apputils-extension"
    settings.mkdir(parents=True)
    # "Never": no news toast over the screenshots and no request to the news feed
    (settings / "notification.jupyterlab-settings").write_text(json.dumps({"fetchNews": "false"}))
    kernel_tmp = root / "tmp"  # the notebooks' tempfile.mkdtemp() (smoke outputs) land here
    kernel_tmp.mkdir()
    env = {
        **os.environ,
        **SMOKE_ENV,
        **(_screenshot_env() if SCREENSHOTS else {}),
        "TMPDIR": str(kernel_tmp),
        "JUPYTER_CONFIG_DIR": str(root / "config"),  # no user config or user kernels interfere
        "JUPYTER_DATA_DIR": str(root / "data"),
        "JUPYTER_RUNTIME_DIR": str(root / "runtime"),
        "JUPYTERLAB_SETTINGS_DIR": str(root / "settings"),
        "JUPYTERLAB_WORKSPACES_DIR": str(root / "workspaces"),
    }
    port, token = free_port(), secrets.token_hex(16)
    cmd = [
        sys.executable,
        "-m",
        "jupyterlab",
        "--no-browser",
        "--ServerApp.ip=127.0.0.1",
        f"--ServerApp.port={port}",
        "--ServerApp.port_retries=0",
        f"--IdentityProvider.token={token}",
        f"--ServerApp.root_dir={nbdir}",
        *(["--allow-root"] if hasattr(os, "geteuid") and os.geteuid() == 0 else []),
    ]
    log = root / "lab.log"
    with open(log, "w") as out:
        proc = subprocess.Popen(cmd, env=env, stdout=out, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 120
    while True:
        try:
            urllib.request.urlopen(f"{url}/api/status?token={token}", timeout=5)
            break
        except OSError:
            if proc.poll() is not None or time.monotonic() > deadline:
                proc.kill()
                pytest.fail(f"JupyterLab did not start; its log:\n{log.read_text()[-3000:]}")
            time.sleep(0.5)
    yield {"url": url, "token": token, "tmp": kernel_tmp, "log": log}
    proc.terminate()  # the server shuts its kernels down on SIGTERM
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()
    shutil.rmtree(kernel_tmp, ignore_errors=True)  # trained smoke models: hundreds of MB


def _wait_for_kernel(page, name: str, timeout_s: float = 120) -> None:
    """Until the status bar says the kernel is idle, as a person would wait. A notebook opened
    before the page has the kernel list asks which kernel to start: take the preselected one."""
    dialog = page.locator(".jp-Dialog").filter(has_text="Select Kernel")
    idle = (
        page.locator("#jp-main-statusbar")
        .filter(has_text=re.compile(r"\| Idle"))
        .filter(has_not_text="No Kernel")
    )
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if dialog.count():
            dialog.get_by_role("button", name="Select", exact=True).click()
        elif idle.count():
            return
        page.wait_for_timeout(500)
    raise AssertionError(f"{name}: no idle kernel after {timeout_s} s")


def _open(browser, lab, name):
    from playwright.sync_api import TimeoutError as PlaywrightTimeout

    page = browser.new_page(viewport=VIEWPORT)
    page_errors: list[str] = []
    page.on("pageerror", lambda e: page_errors.append(str(e)))
    # a workspace of its own: the default one would reopen the notebooks the other tabs opened
    page.goto(f"{lab['url']}/lab/workspaces/{name}/tree/{name}.ipynb?token={lab['token']}")
    page.locator(".jp-NotebookPanel .jp-Cell").first.wait_for(timeout=120_000)
    assert page.locator(".jp-NotebookPanel").count() == 1, f"{name}: other notebooks open in its tab"
    page.keyboard.press("Control+b")  # fold the file browser away: the notebook gets the width
    _wait_for_kernel(page, name)
    # a Run All clicked while the session still connects can be lost: click again if no cell
    # was queued ("[*]" shows at once)
    for attempt in range(3):
        page.get_by_role("menuitem", name="Run", exact=True).click()
        page.get_by_role("menuitem", name="Run All Cells", exact=True).click()
        try:
            page.wait_for_function(STARTED_JS, timeout=15_000)
            break
        except PlaywrightTimeout:
            if attempt == 2:
                raise
    return {"page": page, "page_errors": page_errors, "start": time.monotonic()}


@pytest.fixture(scope="module")
def executed(chromium, lab):
    """Every notebook opened and run from the menu, two at a time; ``{name: run}``, pages open."""
    from playwright.sync_api import sync_playwright

    order = [n for n in FIRST if n in NOTEBOOKS] + [n for n in NOTEBOOKS if n not in FIRST]
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=chromium, headless=True)
        runs, running, t0 = {}, {}, time.monotonic()
        while order or running:
            while order and len(running) < LANES:
                name = order.pop(0)
                running[name] = runs[name] = _open(browser, lab, name)
                print(f"{name}: started at {time.monotonic() - t0:.0f} s", file=sys.stderr)
            for name, run in list(running.items()):
                state = run["page"].evaluate(DONE_JS)
                waited = time.monotonic() - run["start"]
                if state or waited > RUN_TIMEOUT_S:
                    run["state"], run["seconds"] = state or "timeout", round(waited, 1)
                    del running[name]
                    print(f"{name}: {run['state']} after {waited:.0f} s", file=sys.stderr)
            time.sleep(0.5)
        yield runs
        browser.close()


def errors_on(page) -> list[str]:
    """Error outputs and logged tracebacks, each as 'cell N: <its last lines>'."""
    return page.evaluate(ERROR_JS, STDERR)


def _cell_with(page, code: str):
    cells = page.locator(".jp-Notebook .jp-CodeCell").filter(has=page.locator(".jp-InputArea", has_text=code))
    assert cells.count() >= 1, f"no code cell containing {code!r}: update KEY_VIEWS in {Path(__file__).name}"
    return cells.first


def save_screenshot(page, name: str, folder: Path) -> Path:
    """The key view's cell (input and output), cut at the viewport's height, as a PNG <= 300 KB."""
    from PIL import Image
    from playwright.sync_api import expect

    expect(page.get_by_text("Loading widget...")).to_have_count(0, timeout=60_000)
    cell = _cell_with(page, KEY_VIEWS[name])
    page.set_viewport_size(
        {"width": VIEWPORT["width"], "height": 2 * VIEWPORT["height"]}
    )  # room for a tall cell
    try:
        page.wait_for_timeout(500)  # let the layout settle
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / f"notebook_{name}.png"
        cell.screenshot(path=str(path))
    finally:
        page.set_viewport_size(VIEWPORT)
    image = Image.open(path)
    if image.height > VIEWPORT["height"]:
        image = image.crop((0, 0, image.width, VIEWPORT["height"]))
    image.save(path, optimize=True)
    if path.stat().st_size > MAX_PNG_BYTES:  # a palette of 256 colours keeps text and plots sharp
        image.convert("RGB").quantize(256).save(path, optimize=True)
    assert path.stat().st_size <= MAX_PNG_BYTES, f"{path} is {path.stat().st_size} bytes"
    return path


def check_explorer(page, lab) -> None:
    """The explorer is drawn, and clicking next then accept in the page appends that decision."""
    from playwright.sync_api import expect

    from ifir_lib.curation.decisions import CurationStore

    for text in ("Loading widget...", "Error displaying widget"):
        expect(page.get_by_text(text)).to_have_count(0, timeout=60_000)
    detail = page.locator(".widget-html").filter(has_text="key:").first
    expect(detail).to_be_visible()

    def shown_key() -> str:
        return re.search(r"key: (\S+)", detail.inner_text()).group(1)

    before = shown_key()
    page.get_by_role("button", name="next ▶").click()
    expect(detail).not_to_contain_text(f"key: {before} ", timeout=60_000)
    key = shown_key()
    page.get_by_role("button", name="accept").click()
    status = page.locator(".widget-label").filter(has_text=f"accepted {key} -> ")
    expect(status).to_be_visible(timeout=60_000)
    path = Path(status.inner_text().split(" -> ", 1)[1].strip())
    assert path.resolve().is_relative_to(lab["tmp"].resolve()), (
        f"smoke mode wrote the curation file outside its temp folder: {path}"
    )
    store = CurationStore(path)
    assert store.decisions.get(key) == "accept", f"{path}: no accept for {key}: {store.decisions}"
    last = store.rows().iloc[-1]
    assert (last["key"], last["decision"]) == (key, "accept")


def check_figures(page, name: str) -> int:
    """Every plotly output is drawn as a plot with traces; returns how many there are."""
    plots = page.locator(".jp-Notebook .jp-RenderedPlotly")
    n = plots.count()
    assert n >= MIN_FIGURES.get(name, 0), f"{name}: {n} plotly figures drawn, expected {MIN_FIGURES[name]}"
    for i in range(n):
        plot = plots.nth(i)
        plot.scroll_into_view_if_needed()
        # the renderer's node is plotly.js's graph div: svg layers, one g.trace per drawn trace
        assert plot.locator(".main-svg").count() > 0, f"{name}: figure {i + 1} has no plot"
        assert plot.locator("g.trace").count() > 0, f"{name}: figure {i + 1} has no traces"
        width = plot.bounding_box()["width"]
        assert width > 300, f"{name}: figure {i + 1} is {width}px wide"
    return n


@pytest.mark.slow
@pytest.mark.parametrize("name", NOTEBOOKS)
def test_notebook_in_browser(name, executed, lab, tmp_path):
    run = executed[name]
    page = run["page"]
    try:
        assert run["state"] != "timeout", f"{name} did not finish in {RUN_TIMEOUT_S} s"
        errors = errors_on(page)
        assert not errors, f"{name}: error output in the page:\n" + "\n".join(errors)
        unrun = page.locator(".jp-Notebook .jp-Cell").evaluate_all(
            "cells => cells.map((c, i) => [i, c.querySelector('.jp-InputPrompt')?.textContent.trim()])"
            ".filter(([i, p]) => p === '[ ]:').map(([i]) => i)"
        )
        assert run["state"] == "done", f"{name}: Run All stopped; cells {unrun} did not run"
        assert not run["page_errors"], f"{name}: uncaught errors in the page: {run['page_errors']}"
        if SCREENSHOTS:  # the demo's outputs: no clicks, no decision written into its folder
            save_screenshot(page, name, REPO / SCREENSHOTS)
        elif name == "02_inspect":
            check_explorer(page, lab)
        figures = check_figures(page, name)
    except AssertionError:
        page.screenshot(path=str(tmp_path / f"{name}.png"))
        print(f"page at failure: {tmp_path / f'{name}.png'}; JupyterLab log: {lab['log']}")
        raise
    print(f"{name}: ran in {run['seconds']} s in the browser; {figures} plotly figures")
