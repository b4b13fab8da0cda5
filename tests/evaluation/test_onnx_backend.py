"""The ONNX backends of evaluation against PyTorch, with the real bundled MiniLM.

fp32 ONNX must give torch's vectors; fp32 and int8 must leave every FollowIR metric within 0.5
points (x100) on a small synthetic set; the embedding cache must key on the backend; the export
must be made once and reused, beside a run folder for a training run.
"""

import copy
import json

import numpy as np
import pytest

pytest.importorskip(
    "onnxruntime",
    reason="the ONNX backends need onnxruntime: pip install 'ifir-lib[onnx]' (make setup-dev installs it)",
)

from ifir_lib.cli import main  # noqa: E402
from ifir_lib.core.errors import ConfigError  # noqa: E402
from ifir_lib.core.models import encode, format_document, model_fingerprint, using_prompts  # noqa: E402
from ifir_lib.core.run_folder import RunFolder  # noqa: E402
from ifir_lib.evaluation import onnx_backend as O  # noqa: E402
from ifir_lib.evaluation.backends import backend_label, encoder_for  # noqa: E402
from ifir_lib.evaluation.corpora import load_followir, write_followir  # noqa: E402
from ifir_lib.evaluation.embed_cache import EmbeddingCache, cache_fingerprint, text_key  # noqa: E402
from ifir_lib.evaluation.evaluator import evaluate_followir  # noqa: E402
from ifir_lib.pipelines.evaluate import evaluate_models  # noqa: E402
from ifir_lib.testing.inputs import synthetic_followir  # noqa: E402

METRICS = ("p_mrr", "map_at_1000", "ndcg_at_5", "score")


@pytest.fixture(scope="module", autouse=True)
def onnx_cache(module_cache):
    """One cache for the module: each export is made once here."""
    return module_cache


@pytest.fixture(scope="module")
def texts(encoder_texts):  # the shared fixture, by its old name here
    return encoder_texts


@pytest.fixture(scope="module")
def synthetic_set(tmp_path_factory):
    """A synthetic FollowIR folder: 8 queries, 120 documents, 60 candidates each."""
    return write_followir(synthetic_followir(8, 120, 60, rng_seed=3), tmp_path_factory.mktemp("fir") / "syn")


def test_fp32_onnx_vectors_equal_torch(minilm, texts):
    enc = encoder_for(minilm, "onnx")
    for prompts in (None, {"query": "query: ", "document": "passage: "}):  # stored prompts and others
        with using_prompts(minilm, prompts):
            for kind in ("query", "document"):
                ref = encode(minilm, texts, kind)
                got = encode(enc, texts, kind)
                assert got.shape == ref.shape and got.dtype == np.float32
                assert np.abs(np.linalg.norm(got, axis=1) - 1).max() < 1e-5
                assert (got * ref).sum(1).min() > 1 - 1e-4, (prompts, kind)


def test_int8_vectors_are_close_but_not_torch(minilm, texts):
    ref, got = (
        encode(minilm, texts, "document"),
        encode(encoder_for(minilm, "onnx-int8"), texts, "document"),
    )
    cos = (got * ref).sum(1)
    assert cos.min() > 0.97 and cos.mean() > 0.99
    assert cos.max() < 1 - 1e-6  # it is quantized: were it the fp32 graph, this would fail


INT8_SHORT = pytest.mark.xfail(
    strict=True,
    reason="issue 27's bound is not met by int8: ONNX Runtime's per-tensor dynamic activation scales move "
    "cosines by ~5e-3, near-tied documents swap, and the metrics move by up to a few points on small sets "
    "(bundled v1 MAP@1000 +1.16, v2 p-MRR +0.84 for MiniLM; docs/method.md §5); strict, so a fix shows up as a failure",
)


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["onnx", pytest.param("onnx-int8", marks=INT8_SHORT)])
def test_every_metric_within_half_a_point_of_torch(minilm, synthetic_set, backend):
    options = dict(bootstrap=0, cache=False)
    torch_res = evaluate_followir(minilm, synthetic_set, **options)
    res = evaluate_followir(minilm, synthetic_set, backend=backend, **options)
    label = backend_label(backend, 32)  # onnx-int8@32: its numbers move with the batch size
    assert res.backend == label and res.summary()["backend"] == label
    diffs = {m: round(res.metrics[m] - torch_res.metrics[m], 2) for m in METRICS}
    assert all(abs(d) <= 0.5 for d in diffs.values()), diffs


def test_cache_keys_differ_by_backend(minilm, fir, onnx_cache):
    for backend in ("torch", "onnx-int8"):
        evaluate_followir(minilm, fir, bootstrap=0, backend=backend)
    fp = model_fingerprint(minilm)
    # an exported backend's vectors carry the export recipe: an older one's are not read
    assert (
        cache_fingerprint(fp) == fp
        and cache_fingerprint(fp, "onnx-int8") == f"{fp}-onnx-int8-v{O.EXPORT_VERSION}"
    )
    stores = {b: EmbeddingCache(cache_fingerprint(fp, b)) for b in ("torch", "onnx-int8")}
    texts = [format_document(d) for d in load_followir(fir).corpus.values()]
    keys = [text_key(t, "document") for t in texts]
    (vt, miss_t), (vq, miss_q) = (stores[b].get(keys) for b in ("torch", "onnx-int8"))
    # torch stored every document; int8 none: its vectors depend on their batch (BATCH_DEPENDENT)
    assert miss_t == [] and len(miss_q) == len(keys)


def test_export_is_made_once_and_reused(minilm, onnx_cache):
    first = O.export_onnx(minilm, "onnx-int8")
    stats = {p: p.stat() for p in (first, O.export_onnx(minilm, "onnx"))}
    assert first.parent == onnx_cache / "onnx" and first.name.endswith("-int8.onnx")
    O.OnnxEncoder(minilm, "onnx-int8").encode(["a new encoder, as in a new evaluation: same files"])
    again = O.export_onnx(minilm, "onnx-int8")
    assert again == first
    for p, st in stats.items():
        assert (p.stat().st_ino, p.stat().st_mtime_ns) == (st.st_ino, st.st_mtime_ns)
    assert not list(first.parent.glob(".*tmp*"))  # no temporary file left behind


def test_run_folder_keeps_its_export_and_a_retrained_run_replaces_it(minilm, tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    RunFolder(run).write({"mode": "ins-dv", "rng_seed": 0})
    old = O.export_onnx(minilm, "onnx", source=run)
    assert old.parent == run / "onnx"
    retrained = copy.deepcopy(minilm)
    next(retrained.parameters()).data[0, 0] += 1.0  # one weight changes: a new key
    new = O.export_onnx(retrained, "onnx", source=run)
    assert new != old and new.exists() and not old.exists()
    assert O.export_key(retrained) != O.export_key(minilm)


def _nudge(model) -> None:
    """An in-place change of every weight, as a hand-written fine-tuning step makes."""
    import torch

    torch.manual_seed(0)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(0.02 * torch.randn_like(p))


def _check_encodes_the_changed_model(minilm, texts, change, caplog) -> None:
    """An onnx encoder of a copy of ``minilm``, exported and held, then the copy's weights changed
    in place by ``change``: the encoder's next ``encode`` exports again, with a warning, and encodes
    as the changed model does."""
    model = copy.deepcopy(minilm)
    enc = encoder_for(model, "onnx")
    enc.encode(texts[:2])  # the export of the weights as they were, and its session
    change(model)
    with caplog.at_level("WARNING"):
        got = enc.encode(texts, normalize_embeddings=True)
    ref = model.encode(texts, normalize_embeddings=True)
    assert (got * ref).sum(1).min() > 1 - 1e-4
    assert "weights changed in place since its onnx export" in caplog.text


def test_an_encoder_whose_model_changed_in_place_exports_again(minilm, texts, caplog):
    """An encoder held across an in-place change of its model's weights (a fine-tuning step) kept
    encoding with its old export, and the evaluator cached those vectors under the new weights'
    fingerprint: a fresh onnx evaluation of the changed model read them back from disk (v1
    MAP@1000 78.96, where the changed weights score 69.77)."""
    _check_encodes_the_changed_model(minilm, texts, _nudge, caplog)


def _fused_step(model) -> None:
    """One fused AdamW step (transformers' default optimiser, ``adamw_torch_fused``): it changes
    every weight in place without bumping the parameters' version counters."""
    import torch

    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, fused=True)
    torch.manual_seed(0)
    for p in model.parameters():
        p.grad = torch.randn_like(p)
    opt.step()


def test_an_evaluation_after_a_fused_optimiser_step_exports_again(minilm, texts, fir, caplog):
    """A fused AdamW step leaves the version counters as they were, so the held encoder kept its
    old export and the evaluator cached its vectors under the new weights' fingerprint (cosine
    0.75 to the changed model's; v1 MAP@1000 78.96 where torch gives 79.05). The evaluation's
    fingerprint now has the export checked against the weights."""
    model = copy.deepcopy(minilm)
    enc = encoder_for(model, "onnx")
    enc.encode(texts[:2])  # the export of the weights as they were, and its session
    _fused_step(model)
    with caplog.at_level("WARNING"):
        res = evaluate_followir(enc, fir, bootstrap=0)
    assert res.fingerprint == model_fingerprint(model)
    docs = [format_document(d) for d in load_followir(fir).corpus.values()]
    cached, missing = EmbeddingCache(cache_fingerprint(res.fingerprint, "onnx")).get(
        [text_key(t, "document") for t in docs]
    )
    assert missing == []
    assert (cached * model.encode(docs, normalize_embeddings=True)).sum(1).min() > 1 - 1e-4
    assert "weights changed in place since its onnx export" in caplog.text


def test_a_bare_encode_after_a_fused_optimiser_step_exports_again(minilm, texts, caplog):
    """A bare ``encode`` on a held encoder checked only the version counters, which a fused AdamW
    step leaves as they were: it kept encoding with the old export (cosine 0.997 to the changed
    model's on these texts) until an evaluation checked the export. ``encode`` now sees the step."""
    _check_encodes_the_changed_model(minilm, texts, _fused_step, caplog)


def test_the_first_evaluation_after_an_export_hashes_the_weights_once(minilm, texts, fir, caplog):
    """``check_export`` hashed the weights (``export_key``) right after the evaluator's own
    ``model_fingerprint`` had: two passes over every weight in the first evaluation after an
    export (MiniLM: ~0.3 s each). It now reads the export's key off that fingerprint's pass."""
    model = copy.deepcopy(minilm)
    enc = encoder_for(model, "onnx")
    enc.encode(texts[:2])  # the export, made before the evaluation
    real, reads = model.state_dict, []
    model.state_dict = lambda *a, **k: reads.append(1) or real(*a, **k)  # each pass over the weights
    with caplog.at_level("WARNING"):
        evaluate_followir(enc, fir, bootstrap=0)
    assert len(reads) == 1 and "changed in place" not in caplog.text


def test_a_held_encoder_exports_once_over_ordinary_evaluations(minilm, fir, monkeypatch, caplog):
    """The per-evaluation check re-exports nothing while the weights stay: three evaluations (two
    prompt settings, so two fingerprints) and a torch encode between them open one export."""
    calls = []
    real = O.export_onnx
    monkeypatch.setattr(O, "export_onnx", lambda *a, **k: calls.append(1) or real(*a, **k))
    model = copy.deepcopy(minilm)
    enc = encoder_for(model, "onnx")
    with caplog.at_level("WARNING"):
        for prompts in ("model", "benchmark", "model"):
            evaluate_followir(enc, fir, bootstrap=0, cache=False, prompts=prompts)
            model.encode(["a torch encode between evaluations"])
    assert len(calls) == 1 and "changed in place" not in caplog.text


def test_a_graph_given_to_an_encoder_is_its_own_and_cached_apart(minilm, texts, fir, tmp_path, caplog):
    """A graph the caller gives (bench_int8's quantised graphs) is never exported again from the
    model behind the caller's back, even after the model changed in place; and its vectors are not
    cached as the model's export's (they were: ``<fp>-onnx-v3``, read back by a later onnx run)."""
    graph = tmp_path / "mine.onnx"
    graph.write_bytes(O.export_onnx(minilm, "onnx").read_bytes())  # the unchanged weights' graph
    model = copy.deepcopy(minilm)
    enc = O.OnnxEncoder.on_graph(model, graph, "onnx")
    _nudge(model)
    with caplog.at_level("WARNING"):
        got = enc.encode(texts, normalize_embeddings=True)
    assert enc.path == graph and "changed in place" not in caplog.text
    assert (got * minilm.encode(texts, normalize_embeddings=True)).sum(1).min() > 1 - 1e-4
    res = evaluate_followir(enc, fir, bootstrap=0)
    keys = [text_key(format_document(d), "document") for d in load_followir(fir).corpus.values()]
    export_store = EmbeddingCache(cache_fingerprint(res.fingerprint, "onnx"))
    assert len(export_store.get(keys)[1]) == len(keys)  # nothing claims to be the model's export
    graph_store = EmbeddingCache(cache_fingerprint(res.fingerprint, "onnx", enc.graph_key))
    assert graph_store.get(keys)[1] == [] and enc.graph_key in graph_store.dir.name


def test_a_given_graph_with_external_data_is_keyed_on_its_weights_too(minilm, texts, tmp_path):
    """A graph saved with external data (a model over 2 GB: ``mine.onnx`` + ``mine.onnx.data``) was
    keyed on the .onnx file alone, which holds no weights: an edited graph at the same path read
    the old one's cached vectors."""
    import onnx
    from onnx import numpy_helper

    graph, saved = tmp_path / "mine.onnx", {}
    for edit in (0.0, 0.01):
        proto = onnx.load(str(O.export_onnx(minilm, "onnx")))
        first = proto.graph.initializer[0]
        first.CopyFrom(numpy_helper.from_array(numpy_helper.to_array(first) + edit, first.name))
        (tmp_path / "mine.onnx.data").unlink(missing_ok=True)  # onnx appends to it otherwise
        onnx.save_model(proto, str(graph), save_as_external_data=True, location="mine.onnx.data")
        enc = O.OnnxEncoder.on_graph(minilm, graph, "onnx", session=object())  # key only
        saved[edit] = (graph.read_bytes(), enc.graph_key)
    assert saved[0.0][0] == saved[0.01][0]  # the .onnx file itself is the same
    assert saved[0.0][1] != saved[0.01][1]
    assert O.graph_digest(graph) == saved[0.01][1] and (tmp_path / "mine.onnx.data").exists()


def test_export_key_follows_the_graph_not_the_pooling(minilm):
    """Pooling runs in PyTorch after the graph: a copy pooled otherwise shares the export (its
    vectors are keyed apart by model_fingerprint); the transformer's own config enters the graph."""
    pooled = copy.deepcopy(minilm)
    pooled[1].pooling_mode = "cls"
    assert O.export_key(pooled) == O.export_key(minilm)
    assert model_fingerprint(pooled) != model_fingerprint(minilm)
    other = copy.deepcopy(minilm)
    other[0].auto_model.config.hidden_act = "relu"
    assert O.export_key(other) != O.export_key(minilm)


def test_a_failed_export_leaves_nothing(tmp_path):
    target = tmp_path / "model-x.onnx"

    def half_then_fail(tmp):
        tmp.write_bytes(b"half")
        raise RuntimeError("killed")

    with pytest.raises(RuntimeError):
        O._write_atomic(target, half_then_fail)
    assert list(tmp_path.iterdir()) == []


def test_bad_backend_fails_before_any_model_loads(fir):
    with pytest.raises(ConfigError, match="unknown choice 'tensorrt'"):
        evaluate_models(["no-such-model"], followir=[fir], backend="tensorrt", style=None)
    with pytest.raises(ConfigError, match="mteb"):
        evaluate_models(["no-such-model"], followir=[fir], backend="onnx", engine="mteb", style=None)


def test_cli_backend_flag(fir, capsys):
    assert main(["evaluate", "--model", "minilm", "--followir", str(fir), "--backend", "onnx", "--json"]) == 0
    out = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert out["backend"] == "onnx" and out["p_mrr_n_queries"] > 0


def test_export_is_traced_with_eager_attention_and_the_model_keeps_its_own(minilm, onnx_cache):
    import onnx

    ops = {n.op_type for n in onnx.load(str(O.export_onnx(minilm, "onnx"))).graph.node}
    assert "IsNaN" not in ops and "Softmax" in ops  # SDPA's traced guard is gone; attention is there
    assert minilm[0].auto_model.config._attn_implementation == "sdpa"  # restored after the trace
    folder = O.export_onnx(minilm, "onnx").parent
    old, other = folder / "model-0123456789abcdef.onnx", folder / f"model-fedcba-v{O.EXPORT_VERSION}.onnx"
    for p in (old, other):
        p.write_bytes(b"an export")
    changed = copy.deepcopy(minilm)
    next(changed.parameters()).data[0, 0] += 1.0  # a model not exported yet: its export prunes
    path = O.export_onnx(changed, "onnx")
    assert f"-v{O.EXPORT_VERSION}" in path.name  # older recipes are not read ...
    assert not old.exists() and other.exists()  # ... nor kept; another model's export stays
    for p in (other, path):
        p.unlink()


def test_a_truncated_model_keys_its_own_vectors_and_onnx_truncates_it(minilm, texts, tmp_path):
    """``truncate_dim`` was in no cache key: a model saved with ``truncate_dim=32`` and plain MiniLM
    shared one cache folder, so whichever ran second read the other's vectors (the packaged
    baseline then scored p-MRR -3.31 for -5.03), and ONNX ignored it."""
    fp = model_fingerprint(minilm)
    cut = copy.copy(minilm)
    cut.truncate_dim = 32
    assert model_fingerprint(cut) != fp and model_fingerprint(minilm) == fp  # plain: unchanged
    assert O.export_key(cut) == O.export_key(minilm)  # one graph: truncation runs after it
    ref = encode(cut, texts, "document")
    got = encode(encoder_for(cut, "onnx"), texts, "document")
    assert ref.shape == got.shape == (len(texts), 32)
    assert (got * ref).sum(1).min() > 1 - 1e-4
