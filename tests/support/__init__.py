"""Helpers only the tests use: stand-in models and made-up results (``support.fakes``), model
folders made from the packaged MiniLM (``support.folders``).

Importable as ``support`` from any test folder: ``[tool.pytest.ini_options] pythonpath`` puts
``tests/`` on ``sys.path``. Inputs a notebook, a benchmark or a user also needs (synthetic
FollowIR sets, seeds, example figure inputs, the local OpenAI-compatible server, generated
Promptriever rows) live in the package, under ``ifir_lib.testing``.
"""
