"""Stand-in inputs and services, shipped with the package for tests, benchmarks, notebooks and users.

Everything here imitates something real so that a pipeline can run end to end without the hub, a
GPU or an API key; nothing here is a result, and the pipeline itself never imports it.

- ``inputs``: a synthetic FollowIR-format set of any size (``synthetic_followir``), valid seed rows
  (``make_seed`` / ``write_seeds``), a tiny BEIR folder (``write_beir``) and made-up inputs for every
  figure (``write_example_inputs``; notebook ``05_figures`` draws from them);
- ``openai_server``: a local OpenAI-compatible chat-completions server with injectable faults (the
  synthesis tests, ``bench/bench_synthesis.py``, notebook ``01_synthesize``);
- ``promptriever``: generated Promptriever rows in the hub schema, at any size (``bench/bench_scale.py``).

Helpers only the tests use (a fake encoder, made-up evaluation results) are not shipped: they live
in ``tests/support/``.
"""
