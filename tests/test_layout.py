"""The package's shape: stage subpackages whose imports point one way, short functions, no cycle.

The stages, in pipeline order (``docs/method.md``, "Words we use"); a module may import its own
stage and earlier ones, never a later one. ``testing`` (inputs for notebooks, benches and tests)
may use every stage; ``cli`` and ``__main__`` sit on top.
"""

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "ifir_lib"
STAGES = (
    "core",
    "seeds",
    "synthesis",
    "curation",
    "training",
    "evaluation",
    "reporting",
    "pipelines",
    "testing",
)
TOP = {"cli": len(STAGES), "__main__": len(STAGES) + 1, "__init__": -1}
MAX_FUNCTION_LINES = 80
# An import inside a function only defers a heavy third-party library: a package module may be
# imported there only when it imports one of these at its top. The command line may defer any
# stage: building the parser imports no torch (``test_command_line_parses_without_torch``).
HEAVY = {
    "torch",
    "sentence_transformers",
    "transformers",
    "mteb",
    "datasets",
    "plotly",
    "ipywidgets",
    "pyarrow",
}
DEFERRED_OK = {"cli"}


def _heavy(path: Path) -> bool:
    """True when the module at ``path`` imports a ``HEAVY`` library at its top level."""
    tops = set()
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.Import):
            tops |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
            tops.add(node.module.split(".")[0])
    return bool(tops & HEAVY)


def _modules() -> dict[str, Path]:
    """``{'training.trainer': path, 'cli': path, ...}`` for every module of the package."""
    package = PACKAGE
    return {".".join(p.relative_to(package).with_suffix("").parts): p for p in package.rglob("*.py")}


def _imports(name: str, path: Path, known: set[str]) -> list[tuple[str, bool]]:
    """``[(imported module, inside a function?)]`` for every package-internal import of ``name``."""
    tree = ast.parse(path.read_text())
    in_function = {
        id(n)
        for f in ast.walk(tree)
        if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef))
        for n in ast.walk(f)
    }
    here = name.split(".")[:-1]  # the package the module sits in
    out = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.ImportFrom):
            continue
        if node.level:
            base = here[: len(here) - node.level + 1]
        elif (node.module or "").startswith("ifir_lib"):
            base = []
            node = ast.ImportFrom(module=node.module[len("ifir_lib") :].lstrip(".") or None, names=node.names)
        else:
            continue
        target = ".".join(base + ([node.module] if node.module else []))
        for alias in node.names:  # ``from . import config`` names a module
            full = f"{target}.{alias.name}" if target else alias.name
            out.append((full if full in known else target, id(node) in in_function))
    return [(t, f) for t, f in out if t in known or t in STAGES]


def _rank(module: str) -> int:
    head = module.split(".")[0]
    return TOP[head] if head in TOP else STAGES.index(head)


def _graph() -> dict[str, list[tuple[str, bool]]]:
    mods = _modules()
    known = set(mods) | {m.rsplit(".__init__", 1)[0] for m in mods if m.endswith("__init__")}
    return {m: _imports(m, p, known) for m, p in mods.items()}


def test_top_level_holds_the_stages_cli_and_nothing_else():
    names = {p.name for p in PACKAGE.iterdir() if p.name != "__pycache__"}
    assert names == {*STAGES, "cli.py", "__init__.py", "__main__.py", "data"}


def test_imports_point_one_way_along_the_stages():
    backward = [
        f"{m} imports {t}"
        for m, deps in _graph().items()
        for t, _ in deps
        if _rank(t) > _rank(m) and not (m.startswith("testing") and _rank(t) <= STAGES.index("testing"))
    ]
    assert backward == []


def test_imports_of_the_package_sit_at_the_top_of_a_file():
    mods = _modules()
    deferred = {
        f"{m} imports {t} in a function"
        for m, deps in _graph().items()
        for t, inside in deps
        if inside and m not in DEFERRED_OK and not (t in mods and _heavy(mods[t]))
    }
    assert sorted(deferred) == []


def test_no_import_cycle():
    graph = {m: {t for t, _ in deps if t != m} for m, deps in _graph().items()}
    state: dict[str, int] = {}  # 1: on the current path, 2: done

    def visit(m, path):
        state[m] = 1
        for d in sorted(graph.get(m, ())):
            if state.get(d) == 1:
                raise AssertionError("import cycle: " + " -> ".join(path[path.index(d) :] + [d]))
            if d not in state:
                visit(d, path + [d])
        state[m] = 2

    for m in sorted(graph):
        if m not in state:
            visit(m, [m])


def test_no_function_over_80_lines():
    long = []
    for name, path in _modules().items():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                lines = node.end_lineno - node.lineno + 1
                if lines > MAX_FUNCTION_LINES:
                    long.append(f"{name}.{node.name}: {lines} lines")
    assert long == []


@pytest.mark.parametrize(
    "files, expected",
    [
        (
            {"core/a.py": "from ..training.b import x\n", "training/b.py": "x = 1\n"},
            "core.a imports training.b",
        ),
        (
            {"core/a.py": "def f():\n    from . import b\n", "core/b.py": ""},
            "core.a imports core.b in a function",
        ),
    ],
)
def test_the_checks_see_planted_faults(tmp_path, monkeypatch, files, expected):
    for rel, text in files.items():
        (tmp_path / rel).parent.mkdir(exist_ok=True)
        (tmp_path / rel).write_text(text)
    monkeypatch.setattr(__import__(__name__), "PACKAGE", tmp_path)
    check = (
        test_imports_of_the_package_sit_at_the_top_of_a_file
        if "function" in expected
        else test_imports_point_one_way_along_the_stages
    )
    with pytest.raises(AssertionError, match=expected):
        check()


def test_cycle_check_sees_a_planted_cycle(tmp_path, monkeypatch):
    (tmp_path / "core").mkdir()
    for name, dep in (("a", "b"), ("b", "a")):
        (tmp_path / "core" / f"{name}.py").write_text(f"from .{dep} import x\n")
    monkeypatch.setattr(__import__(__name__), "PACKAGE", tmp_path)
    with pytest.raises(AssertionError, match="core.a -> core.b -> core.a"):
        test_no_import_cycle()


def test_command_line_parses_without_torch():
    """``ifir --help`` and offline failures come back in seconds: building the parser imports no torch."""
    import subprocess
    import sys

    probe = "import sys; from ifir_lib.cli import build_parser; build_parser(); print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False", out.stderr


def test_one_preset_set_everywhere():
    from ifir_lib.core import config as C
    from ifir_lib.pipelines.demo import DEMO_PRESETS
    from ifir_lib.pipelines.experiment import EXPERIMENT_PRESETS
    from ifir_lib.synthesis.run import SYNTHESIS_PRESETS
    from ifir_lib.training.trainer import TRAIN_PRESETS

    for presets in (TRAIN_PRESETS, DEMO_PRESETS, EXPERIMENT_PRESETS, SYNTHESIS_PRESETS):
        assert tuple(presets) == C.PRESET_NAMES


def test_only_the_run_folder_module_names_the_run_file():
    """``ifir_run.json`` is read and written by ``core.run_folder.RunFolder`` alone."""
    naming = sorted(n for n, p in _modules().items() if "ifir_run.json" in p.read_text())
    assert naming == ["core.run_folder"]


def test_every_option_states_its_default_once():
    """An option whose help names its default is not given argparse's "(default: None)" too."""
    import argparse
    import re

    from ifir_lib.cli import build_parser

    parser = build_parser()
    subs = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    for name, sub in subs.choices.items():
        options = re.split(r"\n  -", sub.format_help())
        for text in options:
            assert " ".join(text.split()).count("(default:") <= 1, (name, text)
