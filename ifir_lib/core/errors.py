"""The project's errors. Every one derives from ``IfirError``, which the CLI turns into one line.

``DataError`` names the file, line and field, so a user can fix bad input without a debugger.
Anything that is *not* an ``IfirError`` is a bug and keeps its traceback. ``require_module``
turns a missing optional package into a ``ConfigError`` that says how to install it. Not handled
here: reading files (``jsonl``).
"""

from __future__ import annotations

import importlib
from pathlib import Path


class IfirError(Exception):
    """Base class: an error the user can fix (bad input, settings, an unreachable resource)."""


class ConfigError(IfirError, ValueError):
    """A config dataclass got a value it cannot run with (raised in ``__post_init__``)."""


class DataError(IfirError, ValueError):
    """Bad input file. ``str(err)`` reads ``path:line: field 'x': what is wrong``."""

    def __init__(self, path: str | Path, line: int | None, message: str, field: str | None = None):
        self.path, self.line, self.field = str(path), line, field
        where = f"{self.path}:{line}" if line is not None else self.path
        what = f"field '{field}': {message}" if field else message
        super().__init__(f"{where}: {what}")


class DatasetUnavailable(DataError):
    """A hub dataset is neither cached nor reachable (offline); the message says how to fetch it."""


class BackendError(IfirError, RuntimeError):
    """The LLM backend cannot be used at all (bad key, unknown model, unreachable): the run stops."""


class RequestFailed(IfirError, RuntimeError):
    """One request failed for good after its retries; the row is written as ``failed``."""

    def __init__(self, reason: str, attempts: int = 1):
        super().__init__(reason)
        self.reason, self.attempts = reason, attempts


class NonFiniteLossError(IfirError, FloatingPointError):
    """The training loss became NaN or inf; the message names the last good checkpoint."""


class NonFiniteEmbeddingError(IfirError, FloatingPointError):
    """A model gave NaN or inf vectors (diverged or corrupted weights): every score from them is noise."""


class FigureExportError(IfirError, RuntimeError):
    """Static (PNG/SVG) figure export needs a Chrome that kaleido can find."""


class OutputLocked(IfirError, RuntimeError):
    """Another live process holds the output (``locks.exclusive``); the message names it."""


def require_module(module: str, needed_by: str, install: str) -> None:
    """A ``ConfigError`` when ``module`` does not import:
    ``require_module('openvino', "backend 'openvino'", "pip install 'ifir-lib[openvino]'")``
    raises "backend 'openvino' needs openvino: pip install 'ifir-lib[openvino]'" where it is absent."""
    try:
        importlib.import_module(module)
    except ImportError:
        raise ConfigError(f"{needed_by} needs {module}: {install}") from None
