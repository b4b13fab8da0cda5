"""Progress bars for work that takes more than a few seconds, and none in CI logs.

``progress(iterable, desc=...)`` is ``tqdm.auto.tqdm`` (a widget in JupyterLab, a text bar in a
terminal) with two defaults of its own:

- it is off when ``TQDM_DISABLE`` or ``CI`` is set (``progress_enabled``), so CI logs hold
  results rather than thousands of carriage returns;
- it appears only after ``delay=2`` seconds, so steps that finish at once print nothing.

``progress_enabled()`` is what the libraries that draw their own bars are told
(sentence-transformers' ``show_progress_bar``, the HF trainer's ``disable_tqdm``, mteb's).
Example: ``CI=true`` -> ``progress_enabled() == False``; ``for x in progress(rows): ...`` then
iterates silently. Not handled here: the bars' content (each caller names its unit), logging.
"""

from __future__ import annotations

from .config import env_flag


def progress_enabled() -> bool:
    """False when ``TQDM_DISABLE`` or ``CI`` holds a true value (``1``, ``true``...), else True.

    ``CI=true`` (GitHub Actions, GitLab) -> False; ``CI=0`` or unset -> True.
    """
    return not (env_flag("TQDM_DISABLE") or env_flag("CI"))


def progress(iterable=None, *, disable: bool = False, delay: float = 2.0, **kw):
    """``tqdm.auto.tqdm(iterable, **kw)``, off in CI and shown after ``delay`` seconds.

    ``disable=True`` turns it off whatever the environment says (a caller's ``--no-progress``).
    Use it as an iterable wrapper or, with ``total=``, as a context manager updated by hand.
    """
    from tqdm.auto import tqdm

    return tqdm(iterable, disable=disable or not progress_enabled(), delay=delay, **kw)
