"""Encoders that run the model's ONNX export, for evaluation: the model's own vectors, faster on a CPU.

``ifir evaluate --backend onnx`` (fp32) or ``onnx-int8`` (dynamic int8 weights) encode with
ONNX Runtime instead of PyTorch; ``openvino`` and ``openvino-bf16`` run the same fp32 export
in OpenVINO (``openvino_backend``). Only the model's first module (the transformer, the costly
part) runs in the runtime; the text goes through the model's own ``preprocess`` (tokenizer,
prompt, ``max_seq_length``), and the token embeddings through the model's own later modules
(pooling, normalisation, dense layers) in PyTorch, so everything but the transformer's
arithmetic is the torch path's code. fp32 agrees with PyTorch to ~1e-7 cosine; int8 (per-channel
QInt8 weights of every MatMul, ``onnxruntime.quantization.quantize_dynamic``) to ~0.99.

The export is made once per model weights and transformer configuration (``export_key``) and reused:
``RUN/onnx/model-<key>-v<EXPORT_VERSION>[-int8].onnx`` beside a training run folder, else
``cache_dir()/onnx/`` (``IFIR_CACHE``) for hub and PyPI models. Each file is written under a
temporary name and renamed, so a killed export leaves nothing that would be read. Example::

    enc = OnnxEncoder(load_model("minilm"), "onnx-int8")
    enc.encode(["solar panels"], normalize_embeddings=True).shape  -> (1, 384)

Not handled here: the choice of backend (``backends``), sentence-transformers' own
``backend="onnx"`` (it needs optimum-onnx, which does not import with transformers 5), OpenVINO's
session (``openvino_backend``), GPUs (the CPU execution provider only), models whose first module
is not a text ``Transformer``, and mteb's engine (which encodes with torch).
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import logging
import os
import warnings
from pathlib import Path

import numpy as np

from ..core.config import cache_dir
from ..core.errors import ConfigError, require_module
from ..core.models import module_settings, plain_prompt, weights_fingerprint, weights_state
from ..core.progress import progress
from ..core.run_folder import RunFolder
from .openvino_backend import OPENVINO_BACKENDS, PRECISION, check_openvino, openvino_session

log = logging.getLogger(__name__)

ONNX_BACKENDS = ("onnx", "onnx-int8")
# in every export's file name: exports of an older recipe are made again, not read (2: eager
# attention; 3: the key covers the transformer's configuration, ``export_key``)
EXPORT_VERSION = 3
ONNX_EXTRA = "pip install 'ifir-lib[onnx]'"  # what installs onnxruntime (pyproject's extra)
_SAMPLE = ["a b c", "a longer text, so that the batch has padding in it"]  # traced at export


def check_onnx(backend: str) -> None:
    """A ``ConfigError`` for a backend that is not an ONNX one, or when onnxruntime is not installed."""
    if backend not in ONNX_BACKENDS:
        raise ConfigError(
            f"backend: {backend!r} is not an ONNX backend; choose from {', '.join(ONNX_BACKENDS)}"
        )
    require_module("onnxruntime", f"backend {backend!r}", ONNX_EXTRA)


def check_exported(backend: str) -> None:
    """``check_onnx`` or ``check_openvino``, by the runtime that ``backend`` runs its export in."""
    if backend in OPENVINO_BACKENDS:
        check_openvino(backend)
    else:
        check_onnx(backend)


def export_key(model, fingerprint: str | None = None) -> str:
    """A hash of what enters the exported graph: the weights (``weights_fingerprint``:
    ``model_fingerprint`` without prompts or module configuration) and the first module's (the
    transformer's) configuration. Prompts, the tokenizer and the later modules (pooling,
    normalisation) run outside the graph, so copies of a model that differ only there share one
    export. ``fingerprint``: the model's current ``model_fingerprint``, whose pass over the
    weights is reused (``weights_fingerprint``)."""
    weights = weights_fingerprint(model, fingerprint)
    first = json.dumps(module_settings(model)["modules"][:1], sort_keys=True, default=repr)
    return hashlib.sha256(f"{weights}{first}".encode()).hexdigest()[:16]


def onnx_dir(source: str | Path | None = None) -> Path:
    """Where a model's exports go: ``RUN/onnx`` for a (writable) training run folder, else
    ``cache_dir()/onnx``."""
    if (
        source is not None
        and Path(source).is_dir()
        and RunFolder(source).is_run()
        and os.access(source, os.W_OK)
    ):
        return Path(source) / "onnx"
    return cache_dir() / "onnx"


def _text_transformer(model):
    first = model[0]
    if not hasattr(first, "module_output_name") or not hasattr(first, "preprocess"):
        raise ConfigError(
            f"ONNX backends need a model whose first module is a text Transformer, not {type(first).__name__}"
        )
    return first


def _input_names(features: dict) -> list[str]:
    """The integer (batch, seq) tensors of ``preprocess``' output: input_ids, attention_mask, ..."""
    import torch

    return [
        k
        for k, v in features.items()
        if isinstance(v, torch.Tensor) and v.ndim == 2 and not torch.is_floating_point(v)
    ]


def _export_fp32(model, path: Path) -> None:
    """``torch.onnx.export`` (TorchScript exporter: one self-contained file) of the first module,
    traced with eager attention (``_eager_attention``)."""
    import torch

    first = _text_transformer(model)
    with torch.inference_mode(False):  # tensors that the tracer may record
        features = model.preprocess(_SAMPLE, prompt=None)
    names = _input_names(features)

    class FirstModule(torch.nn.Module):  # (batch, seq) int tensors -> (batch, seq, dim) token embeddings
        def __init__(self):
            super().__init__()
            self.inner = first

        def forward(self, *tensors):
            return self.inner(dict(zip(names, tensors)))[first.module_output_name]

    axes = {k: {0: "batch", 1: "sequence"} for k in [*names, "token_embeddings"]}
    was_training = first.training
    first.eval()
    try:
        with warnings.catch_warnings(), torch.inference_mode(False), torch.no_grad(), _eager_attention(first):
            warnings.simplefilter("ignore")  # tracer and deprecation warnings: checked by the tests
            torch.onnx.export(
                FirstModule(),
                tuple(features[k].to(first_device(model)) for k in names),
                str(path),
                input_names=names,
                output_names=["token_embeddings"],
                dynamic_axes=axes,
                opset_version=17,
                dynamo=False,
            )
    finally:
        first.train(was_training)


@contextlib.contextmanager
def _eager_attention(first):
    """The transformer with transformers' eager attention while it is traced, then as it was.

    Traced SDPA brings a mask-and-NaN guard (``Where``, ``IsNaN`` over every attention matrix) that
    took 13% of int8's run time; eager attention is the same arithmetic (MatMul, Softmax, MatMul)
    without it: onnx-int8 1.90x -> 2.31x and onnx 0.98x -> 1.08x torch's documents/s on 200
    bundled documents, vectors unchanged (a one-off comparison of the two exports in one run;
    docs/method.md §5)."""
    inner = getattr(first, "auto_model", None)
    was = getattr(getattr(inner, "config", None), "_attn_implementation", None)
    if not hasattr(inner, "set_attn_implementation") or was in (None, "eager"):
        yield
        return
    inner.set_attn_implementation("eager")
    try:
        yield
    finally:
        inner.set_attn_implementation(was)


def first_device(model):
    """The device of the model's weights (export traces there; ONNX Runtime runs on the CPU)."""
    return next(model.parameters()).device


def _quantize(src: Path, dst: Path) -> None:
    """Dynamic int8: per-channel QInt8 weights of every MatMul (per-tensor loses ~4% cosine)."""
    from onnxruntime.quantization import QuantType, quantize_dynamic

    # it logs a hint with ``logging.warning``, which would also give the root logger a stderr
    # handler for the rest of the process: a silent handler and a filter stand in while it runs
    root, quiet, drop = logging.getLogger(), logging.NullHandler(), (lambda record: False)
    root.addHandler(quiet)
    root.addFilter(drop)
    try:
        quantize_dynamic(
            str(src), str(dst), weight_type=QuantType.QInt8, per_channel=True, op_types_to_quantize=["MatMul"]
        )
    finally:
        root.removeFilter(drop)
        root.removeHandler(quiet)


def export_onnx(
    model, backend: str = "onnx", source: str | Path | None = None, *, key: str | None = None
) -> Path:
    """The ONNX file of ``model`` for ``backend`` (``'onnx'`` or ``'onnx-int8'``), exported if absent.

    ``source`` is the folder the model was loaded from (a run folder keeps its export beside it).
    Reused while the weights are unchanged: the file name carries ``export_key(model)`` (``key``:
    that key, when the caller has just computed it).
    """
    if backend not in ONNX_BACKENDS:
        raise ConfigError(f"backend: {backend!r} has no ONNX export; choose from {', '.join(ONNX_BACKENDS)}")
    folder = onnx_dir(source)
    stem = f"model-{key or export_key(model)}-v{EXPORT_VERSION}"
    fp32 = folder / f"{stem}.onnx"
    want = fp32 if backend == "onnx" else folder / f"{stem}-int8.onnx"
    if want.exists():
        return want
    folder.mkdir(parents=True, exist_ok=True)
    if not fp32.exists():
        log.info("exporting %s to ONNX (once per model)", source or "the model")
        _write_atomic(fp32, lambda tmp: _export_fp32(model, tmp))
    if want != fp32:
        _write_atomic(want, lambda tmp: _quantize(fp32, tmp))
    _prune(folder, stem, run=folder != cache_dir() / "onnx")

    return want


def _write_atomic(path: Path, write) -> None:
    """``write(tmp)`` then rename ``tmp`` to ``path``; a failure leaves no ``path``."""
    tmp = path.with_name(f".{path.stem}.{os.getpid()}.tmp.onnx")
    try:
        write(tmp)
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def _prune(folder: Path, stem: str, run: bool) -> None:
    """Remove stale exports: in a run folder every other (a retrained run's older weights), in the
    shared cache (other models' exports live there) those of an older ``EXPORT_VERSION``."""
    for old in folder.glob("model-*.onnx"):
        stale = not old.name.startswith(stem) if run else f"-v{EXPORT_VERSION}" not in old.name
        if stale:
            old.unlink(missing_ok=True)


def cpu_threads() -> int:
    """The cores this process may run on (``sched_getaffinity``, else ``os.cpu_count``)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def graph_digest(path: str | Path) -> str:
    """A short sha256 of an ONNX graph: its file, read in 1 MiB chunks, then each external-data file
    it names (name and bytes, in name order; ONNX keeps a graph over 2 GB's weights in them, beside
    it). A single-file graph's digest is its bytes' sha256."""
    path = Path(path)
    h = hashlib.sha256()
    for n, f in enumerate([path, *_external_data(path)]):
        if n:
            h.update(f.name.encode())
        with open(f, "rb") as fh:
            for chunk in iter(lambda: fh.read(1 << 20), b""):
                h.update(chunk)
    return h.hexdigest()[:16]


def _external_data(path: Path) -> list[Path]:
    """The external-data files an ONNX graph's tensors name (initializers and node attributes,
    subgraphs included), relative to its folder."""
    import onnx
    from onnx.external_data_helper import ExternalDataInfo, uses_external_data

    def tensors(graph):
        yield from graph.initializer
        for node in graph.node:
            for a in node.attribute:
                yield from ([a.t] if a.HasField("t") else [])
                yield from a.tensors
                for g in ([a.g] if a.HasField("g") else []) + list(a.graphs):
                    yield from tensors(g)

    graph = onnx.load(str(path), load_external_data=False).graph
    names = {ExternalDataInfo(t).location for t in tensors(graph) if uses_external_data(t)}
    return [path.parent / n for n in sorted(names)]


@functools.lru_cache(maxsize=4)
def _session(path: str, threads: int):
    import onnxruntime as ort

    opts = ort.SessionOptions()
    opts.intra_op_num_threads = threads
    opts.inter_op_num_threads = 1
    opts.log_severity_level = 3  # errors only
    return ort.InferenceSession(path, opts, providers=["CPUExecutionProvider"])


class OnnxEncoder:
    """What the evaluator needs of a SentenceTransformer (``encode``, ``prompts``, ``tokenizer``,
    ``max_seq_length``, ``state_dict``, ``named_children``), with the transformer run by ONNX Runtime or OpenVINO.

    Reads of ``prompts`` and the rest go to the wrapped model, so ``models.using_prompts`` on
    the model applies here, and ``models.model_fingerprint(enc)`` equals the model's. ``backend``
    names the backend (``embed_cache`` keys on it). The export and the ONNX Runtime session are
    made at the first ``encode`` (``session``): a run whose vectors are all cached needs neither.

    An export follows its model: weights changed in place since it was made are exported again,
    with a warning. Each ``encode`` checks the parameters' version counters and last optimiser
    steps (``models.weights_state``, 0.2% of an encode of 32 texts on MiniLM: any ``torch.optim``
    step, fused ones such as ``AdamW(fused=True)``, transformers' default, included; ``add_``
    under ``no_grad``; ``load_state_dict``); a change through ``param.data`` shows in neither,
    and only the evaluator's per-evaluation check of the weights' hash catches it
    (``check_export``, from ``embed_cache.encode_cached``). A graph the caller gives
    (``on_graph``: ``bench_int8``'s quantised graphs) is its own and is never replaced; its vectors
    are cached under its digest (``graph_key``: the file and its external data).
    """

    def __init__(self, model, backend: str = "onnx", *, source=None, threads: int | None = None):
        check_exported(backend)
        self.model, self.backend, self.source, self.threads = model, backend, source, threads
        self.first = _text_transformer(model)
        self.rest = list(model.children())[1:]  # pooling, normalisation, dense ...: the model's own
        self.path: Path | None = None
        self._session = None
        self._exported: tuple | None = None  # the weights' state when ``load`` exported them
        self._export_key: str | None = None  # ``export_key`` of the weights ``load`` exported
        self._checked: str | None = None  # the fingerprint ``check_export`` last found current
        self._graph_key: tuple[Path, str] | None = None

    @classmethod
    def on_graph(cls, model, path, backend: str = "onnx", *, session=None, threads=None) -> OnnxEncoder:
        """An encoder running the ONNX file ``path`` (a graph the caller made from the model's
        export), by ``session`` (default: the runtime's for ``backend``), with the model's own
        tokenizer and later modules. It is never exported again from the model."""
        enc = cls(model, backend, threads=threads)
        threads = threads or cpu_threads()
        if session is None and backend in OPENVINO_BACKENDS:
            session = openvino_session(str(path), threads, PRECISION[backend])
        enc.path, enc._session = Path(path), session or _session(str(path), threads)
        return enc

    @property
    def graph_key(self) -> str | None:
        """``None`` for the model's own export; for a graph given by the caller (``on_graph``, or a
        session set by hand), a digest of its file: the embedding cache keys on it, so its vectors
        never pass for the model's export's (``embed_cache.cache_fingerprint``; ``graph_digest``:
        its external-data files too)."""
        if self._exported is not None or self.path is None or self._session is None:
            return None
        if self._graph_key is None or self._graph_key[0] != self.path:
            self._graph_key = (self.path, graph_digest(self.path))
        return self._graph_key[1]

    def load(self) -> OnnxEncoder:
        """Export the model if no export of its weights exists, and open the session; returns self.
        OpenVINO compiles the fp32 export (the ``onnx`` backend's file). An export whose model's
        weights changed in place since is made again, with a warning: the old session encoded the
        old weights, and the evaluator cached its vectors under the new weights' fingerprint."""
        if self._session is not None and self._exported is None:
            return self  # a graph the caller gave (``on_graph``): its own, never replaced
        if self._session is not None and self._exported != weights_state(self.model):
            self._stale()
        if self._session is None:
            threads = self.threads or cpu_threads()
            export = "onnx" if self.backend in OPENVINO_BACKENDS else self.backend
            self._export_key, self._checked = export_key(self.model), None
            self.path = export_onnx(self.model, export, self.source, key=self._export_key)
            if self.backend in OPENVINO_BACKENDS:
                self._session = openvino_session(str(self.path), threads, PRECISION[self.backend])
            else:
                self._session = _session(str(self.path), threads)
            self._exported = weights_state(self.model)
        return self

    def check_export(self, fingerprint: str) -> None:
        """Drop an export whose weights are no longer the model's (the next ``encode`` exports
        again, with a warning). ``fingerprint``: the model's ``model_fingerprint``, which the
        evaluator computes for each evaluation: when it differs from the one last checked, the
        export's key of the current weights (``export_key``, from the fingerprint's own pass over
        the weights, not a second one) is compared with the export's. This catches what
        ``weights_state`` misses: ``param.data``. Nothing to check before the first export, or for
        a graph the caller gave (``on_graph``)."""
        if self._session is None or self._exported is None or fingerprint == self._checked:
            return
        if export_key(self.model, fingerprint) != self._export_key:
            self._stale()
        else:
            self._checked = fingerprint

    def _stale(self) -> None:
        log.warning(
            "%s: the model's weights changed in place since its %s export was made; exporting "
            "it again, so that its vectors are its current weights'",
            self.source or "the model",
            self.backend,
        )
        self._session = None

    @property
    def session(self):
        """The runtime's session, ONNX Runtime's or OpenVINO's (``load`` on first use; ``encode``
        checks the export against the model's weights once per call)."""
        return self._session if self._session is not None else self.load()._session

    prompts = property(lambda self: self.model.prompts)
    default_prompt_name = property(lambda self: getattr(self.model, "default_prompt_name", None))
    truncate_dim = property(lambda self: getattr(self.model, "truncate_dim", None))
    tokenizer = property(lambda self: self.model.tokenizer)
    max_seq_length = property(lambda self: self.model.max_seq_length)

    def state_dict(self):
        return self.model.state_dict()

    def named_children(self):  # the model's modules, whose configuration the fingerprint hashes
        return self.model.named_children()

    def _prompt(self, prompt: str | None, prompt_name: str | None) -> str | None:
        if prompt is not None:
            return prompt
        if prompt_name is not None:
            return self.model.prompts[prompt_name]
        return plain_prompt(self.model) or None

    def _embed(self, batch: list[str], prompt: str | None):
        """One batch: (n, dim) float32 torch tensor, as ``SentenceTransformer.forward`` gives it."""
        import torch

        features = self.model.preprocess(batch, prompt=prompt)
        feed = {i.name: features[i.name].cpu().numpy() for i in self.session.get_inputs()}
        (tokens,) = self.session.run(["token_embeddings"], feed)
        features = {k: v.cpu() if isinstance(v, torch.Tensor) else v for k, v in features.items()}
        features[self.first.module_output_name] = torch.from_numpy(tokens)
        with torch.inference_mode():
            for module in self.rest:
                features = module(features)
        return features["sentence_embedding"].float()

    def encode(
        self,
        texts: list[str],
        *,
        prompt_name: str | None = None,
        prompt: str | None = None,
        batch_size: int = 32,
        normalize_embeddings: bool = False,
        show_progress_bar: bool = False,
        convert_to_numpy: bool = True,
        truncate_dim: int | None = None,
        **_ignored,
    ) -> np.ndarray:
        """``SentenceTransformer.encode`` for a list of texts: (n, dim) float32 numpy, longest first
        in batches (as sentence-transformers sorts), cut to ``truncate_dim`` (else the model's)
        before normalising, as sentence-transformers does. ``encode(['a'], normalize_embeddings=True)``."""
        self.load()  # the export of the model's current weights (``load``)
        prompt = self._prompt(prompt, prompt_name)
        dim = truncate_dim or self.truncate_dim
        order = np.argsort([-len(t) for t in texts], kind="stable")
        out = np.empty((len(texts), 0), dtype=np.float32)
        for start in progress(
            range(0, len(texts), batch_size), disable=not show_progress_bar, desc="Batches"
        ):
            idx = order[start : start + batch_size]
            vecs = self._embed([texts[i] for i in idx], prompt).numpy()[:, :dim]
            if normalize_embeddings:
                vecs = vecs / np.clip(np.linalg.norm(vecs, axis=1, keepdims=True), 1e-12, None)
            if out.shape[1] == 0:
                out = np.empty((len(texts), vecs.shape[1]), dtype=np.float32)
            out[idx] = vecs
        return out
