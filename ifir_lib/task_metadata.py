"""mteb metadata for the hub benchmarks this project wraps (``infosearch``, ``mair``).

Not handled here: loading the data or scoring it (the task classes in those modules).
"""

from __future__ import annotations


def instruction_task_metadata(
    template: str, *, name: str, description: str, reference: str, path: str, revision: str, main_score: str
):
    """A copy of mteb task ``template``'s metadata, renamed as English test-split instruction retrieval.

    ``path`` is the hub repo id or a local copy of it. The caller sets the result as a *class*
    attribute: mteb's ``unload_data`` drops instance-level metadata.
    """
    import mteb

    return mteb.get_task(template).metadata.model_copy(
        update={
            "name": name,
            "description": description,
            "reference": reference,
            "dataset": {"path": path, "revision": revision},
            "type": "InstructionRetrieval",
            "eval_splits": ["test"],
            "eval_langs": ["eng-Latn"],
            "main_score": main_score,
            "bibtex_citation": "",
        },
        deep=True,
    )
