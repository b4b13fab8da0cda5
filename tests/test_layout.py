"""The package's shape: no module over 450 lines, imports that never form a cycle."""

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "ifir_lib"


def _imports(path: Path) -> set[str]:
    """Package-internal modules ``path`` imports, at any depth (``from .x import y``, ``from . import x``)."""
    out = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.level == 1:
            if node.module:
                out.add(node.module.split(".")[0])
            else:
                out.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("ifir_lib."):
            out.add(node.module.split(".")[1])
    return out


def test_no_module_over_450_lines():
    sizes = {p.name: len(p.read_text().splitlines()) for p in PACKAGE.glob("*.py")}
    assert {n: k for n, k in sizes.items() if k > 450} == {}


def test_no_import_cycle():
    graph = {p.stem: _imports(p) for p in PACKAGE.glob("*.py")}
    graph = {m: {d for d in deps if d in graph and d != m} for m, deps in graph.items()}
    state: dict[str, int] = {}  # 1: on the current path, 2: done

    def visit(m, path):
        state[m] = 1
        for d in sorted(graph[m]):
            if state.get(d) == 1:
                raise AssertionError("import cycle: " + " -> ".join(path[path.index(d) :] + [d]))
            if d not in state:
                visit(d, path + [d])
        state[m] = 2

    for m in sorted(graph):
        if m not in state:
            visit(m, [m])


def test_cycle_check_sees_a_planted_cycle(tmp_path, monkeypatch):
    for name, dep in (("a", "b"), ("b", "a")):
        (tmp_path / f"{name}.py").write_text(f"from .{dep} import x\n")
    monkeypatch.setattr(__import__(__name__), "PACKAGE", tmp_path)
    try:
        test_no_import_cycle()
    except AssertionError as e:
        assert "a -> b -> a" in str(e)
    else:
        raise AssertionError("a planted cycle went unnoticed")


def test_command_line_parses_without_torch():
    """``ifir --help`` and offline failures come back in seconds: building the parser imports no torch."""
    import subprocess
    import sys

    probe = "import sys; from ifir_lib.cli import build_parser; build_parser(); print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False", out.stderr


def test_preset_names_in_config_match_train():
    from ifir_lib.core import config as C
    from ifir_lib.training.trainer import TRAIN_PRESETS

    assert tuple(TRAIN_PRESETS) == C.TRAIN_PRESET_NAMES
