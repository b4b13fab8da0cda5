"""Stage 2, synthesis: an LLM writes the complementary instruction I' under which P+ and N* swap
labels (arXiv 2604.18845, §2 and Appendix A; docs/method.md §2).

Reads: seeds (``seeds``), a prompt template (``synthesis/templates/*.j2``), an LLM (any
OpenAI-compatible endpoint or a local transformers model; the key only from the environment).
Writes: a synthesis JSONL, one row per key (``<seed_id>`` or ``<seed_id>#<negative_index>``),
append-only and resumable, with a ``.config.json`` sidecar; an on-disk cache of answers;
verification columns (``ifir verify``).

- ``run``: ``SynthesisConfig`` and its presets, the plan (the *negative* policy: which
  instruction negative becomes N*), the loop, the output file's one reader (``iter_synthesis``),
  resume and shard merge; ``synthesize`` is the entry point.
- ``prompts``: the reversal prompt: load, version, render.
- ``llm`` and ``backends``: one async client with retries, rate limits and a cache; the
  ``openai`` and ``transformers`` backends.
- ``checks``: parse an answer and check the reversal it holds (pure functions).
- ``template``: the template baseline, a rule-based negation for ablations.
- ``pricing``: requests, tokens, cost and time of a run before it is sent.
- ``verify``: the retriever flip check and the optional LLM judge.
- ``explain``: notebook 01's worked example, the untrained model's topic shortcut on one seed.

Imports: ``core``, ``seeds``.
"""

from ..core.lazy import lazy_exports

__getattr__, __dir__, __all__ = lazy_exports(
    __name__,
    {
        **dict.fromkeys(
            [
                "SynthesisConfig",
                "SYNTHESIS_PRESETS",
                "synthesize",
                "iter_synthesis",
                "load_synthesis",
                "merge_shards",
                "plan",
            ],
            "run",
        ),
        **dict.fromkeys(["load_template", "render_prompt"], "prompts"),
        **dict.fromkeys(["LLM", "ResponseCache"], "llm"),
        **dict.fromkeys(["OpenAIBackend", "TransformersBackend"], "backends"),
        **dict.fromkeys(["parse_answer", "check_reversal", "phrasing_style"], "checks"),
        "template_reversal": "template",
        **dict.fromkeys(["price_synthesis", "parse_price"], "pricing"),
        **dict.fromkeys(["verify", "verify_file", "flip_margins"], "verify"),
    },
)
