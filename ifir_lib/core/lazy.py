"""Lazy re-exports for the stage packages' ``__init__``: public names without eager imports.

Each stage's ``__init__`` names its public pieces and the module each lives in::

    __getattr__, __dir__, __all__ = lazy_exports(__name__, {"RunFolder": "run_folder"})

``ifir_lib.core.RunFolder`` then imports ``ifir_lib.core.run_folder`` on first use (PEP 562),
so ``import ifir_lib.training`` costs nothing until a name is used, the command line still
parses without torch, and a stage's ``__init__`` cannot create an import cycle. Not handled
here: which names are public (each ``__init__`` says).
"""

from __future__ import annotations

from importlib import import_module


def lazy_exports(package: str, names: dict[str, str]):
    """``(__getattr__, __dir__, __all__)`` for ``package`` re-exporting ``{name: module}``."""

    def __getattr__(name: str):
        if name not in names:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        return getattr(import_module(f"{package}.{names[name]}"), name)

    def __dir__() -> list[str]:
        return sorted(names)

    return __getattr__, __dir__, sorted(names)
