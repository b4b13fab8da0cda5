"""Stage 1, seeds: the training instances every later stage starts from.

A *seed* is one instruction-following training instance: query q, instruction I, positive P+,
instruction negatives (on topic, violating I), hard negatives, and for the bundled set a
reference reversal I' and narratives (docs/method.md, "Words we use").

Reads: a seed JSONL (the bundled ``ifir_lib/data/seeds.jsonl`` or a user's), Promptriever rows
(the hub dataset or local Parquet/JSONL in its schema). Writes: Arrow seed tables, mined hard
negatives.

- ``schema``: the seed schema, ``validate_seed`` and ``load_seeds`` with errors naming file,
  line and field, ``counterpart`` (a seed without its instruction).
- ``forms``: short instructions or narratives, drawn per seed (``in_form``).
- ``promptriever``: Promptriever rows -> seeds, one mapping for the row and the Arrow path.
- ``arrow``: memory-mapped seed and passage tables at Promptriever scale (``ArrowSeeds``).
- ``mining``: hard negatives from the pooled corpus (``ifir mine-negatives``).

Imports: ``core`` only.
"""

from ..core.lazy import lazy_exports

__getattr__, __dir__, __all__ = lazy_exports(
    __name__,
    {
        **dict.fromkeys(
            [
                "load_seeds",
                "validate_seed",
                "counterpart",
                "seed_fingerprint",
                "written_for",
                "INSTRUCTION_TYPES",
            ],
            "schema",
        ),
        **dict.fromkeys(["NARRATIVE_SHARE", "forms", "in_form"], "forms"),
        **dict.fromkeys(["load_promptriever", "promptriever_to_arrow", "seeds_to_arrow"], "promptriever"),
        "ArrowSeeds": "arrow",
        **dict.fromkeys(["MiningConfig", "mine_negatives", "mine_file"], "mining"),
    },
)
