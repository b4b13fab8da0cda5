"""Stage 5, evaluation: how well a model follows instructions, with uncertainty.

Reads: a model (a name, a path, a run folder), FollowIR-format folders (the bundled sets v1 and
v2, or a user's), BEIR folders, and the paper's benchmarks through mteb 2.x (FollowIR,
InfoSearch, MAIR; local copies in the hub's schema when offline). Writes: nothing but the
embedding cache; results go to a table through ``pipelines.evaluate``.

- ``metrics``: p-MRR (FollowIR's pairwise MRR change, by hand with mteb's semantics), MAP@1000,
  nDCG@k (pytrec_eval), as pure functions over ``{qid: {doc_id: score}}``.
- ``stats``: bootstrap intervals over queries, paired tests, Holm correction, and the two-stage
  bootstrap and run-level tests that treat runs as the unit of replication.
- ``corpora``: FollowIR-format folders (read, check, write) and BEIR folders.
- ``evaluator``: ``EvalResult`` and our evaluation (``evaluate_followir``, ``evaluate_beir``).
- ``embed_cache``: each unique text encoded once per model and backend, on disk.
- ``backends``: the encoder, chosen by name (``torch``, ``torch-bf16``, ``onnx``, ``onnx-int8``,
  ``openvino``, ``openvino-bf16``); ``onnx_backend``: the exported ones (export once per model, int8
  quantization, ONNX Runtime's session); ``openvino_backend``: OpenVINO's session on that export.
- ``explain``: notebook 04's worked example, one query's p-MRR by hand from its two rankings.
- ``tasks`` and ``mteb_glue``: every mteb task in one place (the paper's columns, InfoSearch,
  MAIR, local FollowIR/BEIR folders as mteb tasks) and running them through ``mteb.evaluate``.

The one driver of evaluation is ``pipelines.evaluate.evaluate_models``. Imports: ``core``.
"""

from ..core.lazy import lazy_exports

__getattr__, __dir__, __all__ = lazy_exports(
    __name__,
    {
        **dict.fromkeys(["p_mrr", "p_mrr_per_query", "rank_score", "trec_per_query"], "metrics"),
        **dict.fromkeys(
            ["bootstrap_ci", "compare", "holm", "permutation_test", "two_stage_bootstrap", "run_level_test"],
            "stats",
        ),
        **dict.fromkeys(["FollowIRData", "load_followir", "write_followir", "load_beir"], "corpora"),
        **dict.fromkeys(["EvalResult", "evaluate_followir", "evaluate_beir", "ranking_table"], "evaluator"),
        "EmbeddingCache": "embed_cache",
        **dict.fromkeys(["BACKENDS", "encoder_for"], "backends"),
        **dict.fromkeys(["PAPER_TASKS", "get_paper_task"], "tasks"),
        **dict.fromkeys(
            ["evaluate_mteb", "evaluate_mteb_task", "local_followir_task", "get_task"], "mteb_glue"
        ),
    },
)
