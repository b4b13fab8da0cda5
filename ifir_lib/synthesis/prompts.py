"""The reversal prompt (arXiv 2604.18845, Appendix A; docs/method.md §2): load, version, render.

A template is a Jinja file in ``ifir_lib/templates`` (or any path) whose header declares
``template: <name>; version: <v>``; rows record ``<v>+<sha of the text>``, so a silent edit of
the prompt shows up in every row it produced. Not handled here: sending the prompt (``llm``),
parsing the answer (``checks``).
"""

from __future__ import annotations

import functools
import hashlib
import re
from dataclasses import dataclass
from pathlib import Path

from ..core.config import TEMPLATES_DIR

DEFAULT_TEMPLATE = "reversal_prompt.j2"
# ``ifir synthesize --style``: the reference reversal prompt, or the abstract style's (its I' must
# select N* without N*'s distinctive words; docs/method.md §2, reversal styles)
STYLE_TEMPLATES = {"reference": DEFAULT_TEMPLATE, "abstract": "reversal_prompt_abstract.j2"}


@dataclass(frozen=True)
class PromptTemplate:
    """A Jinja template with the name and version its header declares, plus a hash of its text."""

    name: str
    version: str
    sha: str
    source: str

    @property
    def abstract(self) -> bool:
        """Whether this is the abstract style's prompt (its header's name), whose reversals must
        copy no 4-word span of N* (``checks.ABSTRACT_SPAN``)."""
        return self.name == Path(STYLE_TEMPLATES["abstract"]).stem

    @property
    def full_version(self) -> str:
        """``"1.0+3fa2b1c0"``: the declared version, and the text's hash (catches silent edits)."""
        return f"{self.version}+{self.sha}"

    def render(self, **variables) -> str:
        return _compile(self.source).render(**variables).strip() + "\n"


@functools.lru_cache(maxsize=16)
def _compile(source: str):
    import jinja2

    # StrictUndefined: a misspelt variable is an error, not a silently empty section of the prompt
    env = jinja2.Environment(undefined=jinja2.StrictUndefined, keep_trailing_newline=False, autoescape=False)
    return env.from_string(source)


@functools.lru_cache(maxsize=16)
def load_template(name: str) -> PromptTemplate:
    """Load ``name`` from ``ifir_lib/templates`` (or a path); read ``version:`` from its header."""
    path = Path(name)
    if not path.exists():
        path = TEMPLATES_DIR / name
    if not path.exists():
        raise FileNotFoundError(f"prompt template {name!r} not found (looked in {TEMPLATES_DIR})")
    source = path.read_text(encoding="utf-8")
    m = re.search(r"\{#-?\s*template:\s*([\w.-]+);\s*version:\s*([\w.+-]+)", source)
    tname, version = (m.group(1), m.group(2)) if m else (path.stem.removesuffix(".j2"), "unversioned")
    return PromptTemplate(tname, version, hashlib.sha256(source.encode()).hexdigest()[:8], source)


def render_prompt(seed: dict, negative_index: int, template: PromptTemplate | None = None) -> str:
    """The Appendix A prompt for ``seed`` with N* = ``instruction_negatives[negative_index]``."""
    template = template or load_template(DEFAULT_TEMPLATE)
    negs = seed["instruction_negatives"]
    return template.render(
        query=seed["query"],
        original_instruction=seed["instruction"],
        positive_passage=seed["positive"]["text"],
        specific_instruction_negative=negs[negative_index]["text"],
        remaining_instruction_negatives=[p["text"] for i, p in enumerate(negs) if i != negative_index],
    )
