"""Run the notebooks and write a rendered copy of each: Markdown with static PNG figures. ``make docs``
runs this on ``make demo``'s folder so that a reader on the repository page sees every table and
figure, while the committed ``.ipynb`` stay stripped.

For each notebook ``notebooks/NN_name.ipynb`` it writes ``OUT/NN_name.md`` and the figures under
``OUT/NN_name_files/`` (``output_<cell>_<n>.png``, linked relatively from the Markdown):

1. execute it in a fresh kernel (cwd ``notebooks/``, as nbmake and JupyterLab do), with one hidden
   first cell that makes plotly draw PNG images (kaleido, one Chrome for the whole notebook) sized
   for screens: at most 2x the figure's own width and at most 1400 px wide;
2. clean the outputs: widget views dropped (a rendered copy cannot run them; the notebooks show the
   same view as HTML beside them), tqdm progress bars and ANSI colour codes removed, pandas' random
   Styler ids and ``<style>`` blocks dropped (GitHub prints the CSS as text);
3. export Markdown (nbconvert) and scrub the text: the chain folder named as ``$IFIR_OUT`` was given
   (``out/demo``), repository paths made relative, random temporary names and local ports fixed,
   and the value of any ``*KEY*``/``*TOKEN*``/``*SECRET*`` environment variable replaced by its name;
4. check every written file is under 1 MB and no figure stayed interactive-only.

Not handled here: choosing the chain folder (``IFIR_OUT``, read by the notebooks through
``ifir_lib.pipelines.chain``), or checking that ``make demo`` ran (the Makefile's ``docs`` target).

Usage: ``IFIR_OUT=out/demo python tools/render_notebooks.py [--out docs/notebooks] [NOTEBOOK ...]``.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import nbformat

REPO_DIR = Path(__file__).resolve().parents[1]
NOTEBOOKS_DIR = REPO_DIR / "notebooks"
TOOLS_DIR = Path(__file__).resolve().parent
MAX_FILE_BYTES = 1_000_000  # each rendered file, Markdown and PNG alike
PNG_MAX_WIDTH = 1400  # px: sharp on a laptop screen, small enough to stay under MAX_FILE_BYTES
PNG_MAX_SCALE = 2.0
WIDGET_MIME = "application/vnd.jupyter.widget-view+json"
PLOTLY_MIME = "application/vnd.plotly.v1+json"
SETUP_TAG = "render-notebooks-setup"  # the hidden cells this tool adds and removes again
SECRET_NAME = re.compile(r"KEY|TOKEN|SECRET|PASSW|CREDENTIAL", re.IGNORECASE)


class RenderError(RuntimeError):
    """A notebook failed to run, or a rendered copy broke a rule (size, interactive-only figure)."""


# ---- in the kernel: plotly draws PNGs --------------------------------------------------------


def kernel_setup() -> None:
    """Run in the notebook's kernel before its first cell: every plotly figure shown becomes one PNG.

    One kaleido server (one Chrome) serves the whole notebook; without it each figure starts its own
    browser (~3 s). The size follows the figure's layout: a 504 px column figure becomes 1008 px
    wide, a 1008 px page-wide one 1400 px.
    """
    import warnings

    import kaleido
    import plotly.io as pio
    from plotly.io._base_renderers import PngRenderer

    # plotly passes its Chrome options on every call; with one server they are set once, at the start
    warnings.filterwarnings("ignore", message="The kopts argument is ignored if using a server")

    class FitPngRenderer(PngRenderer):
        def to_mimebundle(self, fig_dict):
            layout = fig_dict.get("layout", {})
            self.width = int(layout.get("width") or 700)  # plotly's defaults when the layout has none
            self.height = int(layout.get("height") or 500)
            self.scale = min(PNG_MAX_SCALE, PNG_MAX_WIDTH / self.width)
            return super().to_mimebundle(fig_dict)

    pio.renderers["ifir_png"] = FitPngRenderer()
    pio.renderers.default = "ifir_png"
    kaleido.start_sync_server(silence_warnings=True)


def kernel_teardown() -> None:
    """Stop the notebook's kaleido server, so that no Chrome outlives the kernel."""
    import kaleido

    kaleido.stop_sync_server(silence_warnings=True)


def _setup_cell(call: str) -> nbformat.NotebookNode:
    source = f"import sys\nsys.path.insert(0, {str(TOOLS_DIR)!r})\nimport render_notebooks\nrender_notebooks.{call}()"
    return nbformat.v4.new_code_cell(source, metadata={"tags": [SETUP_TAG]})


def execute(path: Path, timeout_s: int) -> nbformat.NotebookNode:
    """Run ``path`` in a fresh kernel (cwd: its folder); the executed notebook, setup cells removed.

    A failing cell raises ``RenderError`` naming the notebook, the cell and the error.
    """
    from nbclient import NotebookClient
    from nbclient.exceptions import CellExecutionError

    nb = nbformat.read(path, as_version=4)
    nb.cells = [_setup_cell("kernel_setup"), *nb.cells, _setup_cell("kernel_teardown")]
    client = NotebookClient(nb, timeout=timeout_s, resources={"metadata": {"path": str(path.parent)}})
    try:
        client.execute()
    except CellExecutionError as e:
        failed = next((i for i, c in enumerate(nb.cells) if _has_error(c)), None)
        where = {None: "a cell", 0: "the renderer's setup cell"}.get(failed, f"cell {failed - 1} (0-based)")
        raise RenderError(f"{path.name}: {where} failed:\n{strip_ansi(str(e))}") from None
    nb.cells = [c for c in nb.cells if SETUP_TAG not in c.metadata.get("tags", [])]
    return nb


def _has_error(cell: nbformat.NotebookNode) -> bool:
    return any(o.get("output_type") == "error" for o in cell.get("outputs", []))


# ---- cleaning the outputs ----------------------------------------------------------------------

ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b\][^\x07]*\x07")
# a tqdm bar: "desc:  40%|████      | 4/10 [00:02<00:03,  1.9it/s]"
PROGRESS_LINE = re.compile(r"^.*\d+%\|.*\|.*$|^.*\|\s*\d+/\d*\s*\[\d.*\]\s*$")
STYLE_BLOCK = re.compile(r"<style[^>]*>.*?</style>\s*", re.DOTALL | re.IGNORECASE)
STYLER_ID = re.compile(r'\sid="T_[0-9a-f]+[^"]*"')


def strip_ansi(text: str) -> str:
    """``"\\x1b[31mError\\x1b[0m"`` -> ``"Error"``."""
    return ANSI.sub("", text)


def clean_stream(text: str) -> str:
    """A stream's text as the reader should see it: what each ``\\r`` overwrote gone, progress bars
    and colour codes dropped. ``"a\\r 50%|#  | 1/2 [00:01<00:01]\\nok\\n"`` -> ``"ok\\n"``."""
    lines = []
    for line in strip_ansi(text).split("\n"):
        line = line.rstrip("\r").rsplit("\r", 1)[-1]  # a terminal shows only the last overwrite
        if not PROGRESS_LINE.match(line):
            lines.append(line)
    return "\n".join(lines)


def clean_html(html: str) -> str:
    """HTML for a Markdown page: no ``<style>`` (GitHub shows it as text), no random Styler ids
    (they change every run), no blank lines (a blank line ends an HTML block in Markdown)."""
    html = STYLER_ID.sub("", STYLE_BLOCK.sub("", html))
    return "\n".join(line for line in html.splitlines() if line.strip())


def clean_output(out: nbformat.NotebookNode) -> nbformat.NotebookNode | None:
    """One output cleaned for a static page, or None to drop it (a widget view with nothing else,
    a stream left empty)."""
    if out.output_type == "stream":
        out.text = clean_stream(out.text)
        return out if out.text.strip() else None
    if out.output_type == "error":
        out.traceback = [strip_ansi(line) for line in out.traceback]
        return out
    data = out.get("data", {})
    if WIDGET_MIME in data:  # its text/plain is only "VBox(children=...)"; keep any real HTML
        data = {k: v for k, v in data.items() if k == "text/html"}
    if "text/html" in data:
        data["text/html"] = clean_html(data["text/html"])
    if "text/plain" in data:
        data["text/plain"] = strip_ansi(data["text/plain"])
    out.data = data
    return out if data else None


def _coalesce_streams(outputs: list) -> list:
    """Consecutive writes to one stream as one output (a kernel sends one per flush)."""
    merged = []
    for out in outputs:
        last = merged[-1] if merged else None
        if last is not None and out.output_type == last.output_type == "stream" and out.name == last.name:
            last.text += out.text
        else:
            merged.append(out)
    return merged


def clean_notebook(nb: nbformat.NotebookNode) -> nbformat.NotebookNode:
    """Every code cell's outputs cleaned (``clean_output``); interactive-only figures refused."""
    for index, cell in enumerate(nb.cells):
        if cell.cell_type != "code":
            continue
        outputs = [clean_output(o) for o in _coalesce_streams(cell.outputs)]
        # again: a dropped progress bar between two prints leaves them adjacent
        cell.outputs = _coalesce_streams([o for o in outputs if o is not None])
        for out in cell.outputs:
            if PLOTLY_MIME in out.get("data", {}) and "image/png" not in out.data:
                raise RenderError(f"cell {index}: a plotly figure came out without a PNG (renderer not set?)")
    return nb


# ---- the Markdown text: paths and secrets ------------------------------------------------------


def secret_values(environ: dict[str, str]) -> dict[str, str]:
    """``{value: "[$NAME]"}`` for every environment variable whose name says it holds a secret."""
    return {v: f"[${k}]" for k, v in environ.items() if SECRET_NAME.search(k) and len(v) >= 8}


def path_replacements(environ: dict[str, str]) -> dict[str, str]:
    """Absolute paths a reader should not see -> what to print instead, longest first.

    The chain folder reads as ``$IFIR_OUT`` was given (``out/demo``; ``$IFIR_OUT`` when that was
    absolute), the repository's own files relative to its root, the home folder as ``~``.
    """
    found = {}
    given = environ.get("IFIR_OUT", "")
    if given:
        found[str(Path(given).expanduser().resolve())] = (
            given if not Path(given).is_absolute() else "$IFIR_OUT"
        )
    found[f"{REPO_DIR}/"] = ""
    home = str(Path.home())
    if home not in ("/", ""):
        found[home] = "~"
    return dict(sorted(found.items(), key=lambda kv: -len(kv[0])))


def scrub(text: str, environ: dict[str, str]) -> tuple[str, list[str]]:
    """``text`` with secrets and local paths replaced; the names of the secrets found in it."""
    leaked = []
    for value, name in secret_values(environ).items():
        if value in text:
            leaked.append(name)
            text = text.replace(value, name)
    for path, shown in path_replacements(environ).items():
        text = text.replace(path, shown)
    tmp = re.escape(tempfile.gettempdir())
    # mkdtemp's random part: /tmp/tmpa1b2c3d4 and /tmp/ifir-chain-a1b2c3d4 -> .../tmpXXXXXXXX
    text = re.sub(rf"({tmp}/(?:[\w.]*-)?(?:tmp)?)[a-z0-9_]{{8}}(?![\w.-])", r"\1XXXXXXXX", text)
    # the stand-in server's port changes every run: http://127.0.0.1:54269/v1 -> 127.0.0.1:PORT/v1
    text = re.sub(r"\b(127\.0\.0\.1|localhost):\d{4,5}\b", r"\1:PORT", text)
    return text, leaked


# ---- writing the copy --------------------------------------------------------------------------


@dataclass(frozen=True)
class Rendered:
    """What one notebook produced: the Markdown file, its figures and how long it ran."""

    markdown: Path
    figures: tuple[Path, ...]
    seconds: float

    def line(self) -> str:
        sizes = [p.stat().st_size for p in self.figures]
        biggest = f", largest {max(sizes) / 1e3:.0f} kB" if sizes else ""
        return (
            f"{self.markdown.name}: {self.markdown.stat().st_size / 1e3:.0f} kB, {len(sizes)} PNG{biggest}"
            f" ({self.seconds:.0f} s)"
        )


def to_markdown(nb: nbformat.NotebookNode, name: str) -> tuple[str, dict[str, bytes]]:
    """Markdown text and ``{relative file name: bytes}`` of its images (``<name>_files/...``)."""
    from nbconvert import MarkdownExporter

    resources = {"output_files_dir": f"{name}_files", "unique_key": "output"}
    body, resources = MarkdownExporter().from_notebook_node(nb, resources=resources)
    return body, dict(resources.get("outputs", {}))


def write_copy(out_dir: Path, name: str, body: str, files: dict[str, bytes]) -> tuple[Path, tuple[Path, ...]]:
    """Write ``name.md`` and its images, replacing an older copy's images; refuse a file over 1 MB."""
    figures_dir = out_dir / f"{name}_files"
    if figures_dir.exists():
        for old in figures_dir.iterdir():
            old.unlink()
    too_big = [f for f, data in files.items() if len(data) >= MAX_FILE_BYTES]
    if len(body.encode()) >= MAX_FILE_BYTES:
        too_big.append(f"{name}.md")
    if too_big:
        raise RenderError(f"{name}: over {MAX_FILE_BYTES // 1_000_000} MB: {', '.join(too_big)}")
    written = []
    for rel, data in sorted(files.items()):
        path = out_dir / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
        written.append(path)
    markdown = out_dir / f"{name}.md"
    markdown.write_text(body)
    return markdown, tuple(written)


def render(path: Path, out_dir: Path, environ: dict[str, str], timeout_s: int = 3600) -> Rendered:
    """Execute ``path`` and write its Markdown copy and PNG figures under ``out_dir``; ``environ``
    (the environment as the caller gave it) says what to scrub from the text."""
    start = time.monotonic()
    nb = clean_notebook(execute(path, timeout_s))
    body, files = to_markdown(nb, path.stem)
    body, leaked = scrub(body, environ)
    for name in leaked:
        print(
            f"render_notebooks: {path.name} printed the value of {name}; replaced by its name",
            file=sys.stderr,
        )
    markdown, figures = write_copy(out_dir, path.stem, body, files)
    return Rendered(markdown, figures, time.monotonic() - start)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("notebooks", nargs="*", type=Path, help="default: notebooks/0*.ipynb")
    parser.add_argument("--out", type=Path, default=REPO_DIR / "docs" / "notebooks", help="output folder")
    parser.add_argument("--timeout", type=int, default=3600, help="seconds one cell may run")
    args = parser.parse_args(argv)
    given = dict(os.environ)
    if os.environ.get("IFIR_OUT"):  # the kernels run in notebooks/: a relative folder must not move
        os.environ["IFIR_OUT"] = str(Path(os.environ["IFIR_OUT"]).expanduser().resolve())
    notebooks = args.notebooks or sorted(NOTEBOOKS_DIR.glob("0*.ipynb"))
    args.out.mkdir(parents=True, exist_ok=True)
    for path in notebooks:
        print(f"render {path.name} ...", flush=True)
        try:
            print(f"  {render(path.resolve(), args.out, given, args.timeout).line()}", flush=True)
        except RenderError as e:
            print(f"render_notebooks: {e}", file=sys.stderr)
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
