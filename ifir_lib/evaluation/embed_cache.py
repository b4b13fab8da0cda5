"""On-disk embedding cache: encode each unique text once per model, ever.

Layout: ``cache_dir()/emb/<model fingerprint>/<shard>.keys.npy`` + ``<shard>.vecs.npy``. A key
is the sha256 of ``kind + "\\0" + text`` (kind is ``"query"`` or ``"document"``, so the stored
prompt applies); the fingerprint (``models.model_fingerprint``) covers weights, prompts, max
length and each module's configuration (pooling, lower-casing, tokenizer), so a fine-tuned model,
or a copy pooled differently, never reads another model's vectors, and a backend other than
PyTorch's adds its name (``cache_fingerprint``: ``<fp>-onnx-int8-v3``), so int8 vectors never stand
in for fp32 ones. Each encode call that
produces new vectors writes one shard (vectors first, keys last, each via an atomic rename), so
concurrent runs and interrupted runs never leave a half-written entry that would be read.
``IFIR_CACHE`` moves the root (``config.cache_dir``).

Not handled here: eviction (delete the folder), and models whose output is not a fixed-size
float vector.
"""

from __future__ import annotations

import hashlib
import logging
import os
import uuid
from pathlib import Path

import numpy as np

from ..core.config import cache_dir
from ..core.errors import DataError, NonFiniteEmbeddingError
from ..core.locks import shared_append
from ..core.models import encode, model_fingerprint, prompt_name
from ..core.progress import progress
from .onnx_backend import EXPORT_VERSION, ONNX_BACKENDS
from .openvino_backend import OPENVINO_BACKENDS

log = logging.getLogger(__name__)


def text_key(text: str, kind: str) -> str:
    """``text_key('solar', 'query')`` -> 32 hex chars of sha256(``'query\\0solar'``)."""
    return hashlib.sha256(f"{kind}\0{text}".encode()).hexdigest()[:32]


# Backends whose vector of a text depends on the texts batched with it (int8: one activation scale
# per batch; bf16: kernels blocked by batch shape): never cached, as a cached vector would carry the
# neighbours of the run that wrote it (the same batch size left 0 of 300 int8 vectors equal)
BATCH_DEPENDENT = ("onnx-int8", "torch-bf16", "openvino-bf16")


def cache_fingerprint(fingerprint: str, backend: str = "torch", graph: str | None = None) -> str:
    """The cache folder's name: ``cache_fingerprint('ab12', 'onnx-int8') -> 'ab12-onnx-int8-v3'``;
    PyTorch's vectors keep the bare fingerprint (``cache_fingerprint('ab12') -> 'ab12'``). An
    exported backend's name carries the export recipe (``onnx_backend.EXPORT_VERSION``): vectors
    an older recipe computed are not read after an upgrade that replaced it. ``BATCH_DEPENDENT``
    backends are not cached (``encode_cached``): onnx-int8 at batch 8 read batch 32's vectors
    back (v1 p-MRR -4.42 for the -2.49 a fresh batch-8 run gives). ``graph``: the digest of a
    graph the caller gave an encoder (``OnnxEncoder.graph_key``), whose vectors are that graph's,
    not the model's export's: ``cache_fingerprint('ab12', 'onnx', 'cd34') -> 'ab12-onnx-v3-graph-cd34'``."""
    if backend in (*ONNX_BACKENDS, *OPENVINO_BACKENDS):
        return f"{fingerprint}-{backend}-v{EXPORT_VERSION}" + (f"-graph-{graph}" if graph else "")
    return fingerprint if backend == "torch" else f"{fingerprint}-{backend}"


class EmbeddingCache:
    """Vectors of one model, keyed by ``text_key``; loads all shards' keys on first use."""

    def __init__(self, fingerprint: str, root: str | Path | None = None):
        self.fingerprint = fingerprint
        self.dir = Path(root) if root is not None else cache_dir() / "emb" / fingerprint
        self._index: dict[str, tuple[int, int]] | None = None  # key -> (shard no., row)
        self._shards: list[np.ndarray] = []  # memory-mapped (n, dim) float32

    def _load_index(self) -> dict[str, tuple[int, int]]:
        if self._index is None:
            self._index = {}
            if self.dir.is_dir():
                for kpath in sorted(self.dir.glob("*.keys.npy")):
                    self._add_shard(kpath)
        return self._index

    def _add_shard(self, kpath: Path):
        vpath = kpath.with_name(kpath.name.replace(".keys.npy", ".vecs.npy"))
        try:
            keys = np.load(kpath)
            vecs = np.load(vpath, mmap_mode="r")
        except (OSError, ValueError) as e:  # unreadable shard: ignore it, it will be re-encoded
            log.warning("embedding cache: skipping unreadable shard %s (%s)", kpath, e)
            return
        if len(keys) != len(vecs):
            log.warning("embedding cache: skipping shard %s (keys/vectors length mismatch)", kpath)
            return
        if self._shards and vecs.shape[1:] != self._shards[0].shape[1:]:
            raise DataError(
                kpath,
                None,
                f"vectors of width {vecs.shape[1:]} beside shards of width {self._shards[0].shape[1:]} in "
                "one model's cache: two models shared its fingerprint; delete the folder",
            )
        n = len(self._shards)
        self._shards.append(vecs)
        for row, k in enumerate(keys.tolist()):
            self._index[k.decode("ascii")] = (n, row)

    def __len__(self) -> int:
        return len(self._load_index())

    def get(self, keys: list[str]) -> tuple[np.ndarray | None, list[int]]:
        """Return ``(vectors, missing_positions)``; ``vectors`` rows at missing positions are 0."""
        index = self._load_index()
        found = [(i, index[k]) for i, k in enumerate(keys) if k in index]
        missing = [i for i, k in enumerate(keys) if k not in index]
        if not found:
            return None, missing
        dim = self._shards[found[0][1][0]].shape[1]
        out = np.zeros((len(keys), dim), dtype=np.float32)
        # gather per shard with one fancy-index each (fast on memory maps)
        by_shard: dict[int, tuple[list[int], list[int]]] = {}
        for i, (s, row) in found:
            dst, src = by_shard.setdefault(s, ([], []))
            dst.append(i)
            src.append(row)
        for s, (dst, src) in by_shard.items():
            out[dst] = self._shards[s][src]
        return out, missing

    def put(self, keys: list[str], vectors: np.ndarray) -> None:
        """Store ``vectors`` (n, dim) under ``keys`` as one new shard."""
        if not keys:
            return
        self.dir.mkdir(parents=True, exist_ok=True)
        name = uuid.uuid4().hex
        vecs = np.ascontiguousarray(vectors, dtype=np.float32)
        karr = np.array([k.encode("ascii") for k in keys], dtype="S32")
        with shared_append(self.dir):  # writers take turns; readers need no lock (keys publish last)
            for suffix, arr in (
                (".vecs.npy", vecs),
                (".keys.npy", karr),
            ):  # keys last: they publish the shard
                tmp = self.dir / f".{name}{suffix}.tmp"
                with open(tmp, "wb") as fh:
                    np.save(fh, arr)
                os.replace(tmp, self.dir / f"{name}{suffix}")
        if self._index is not None:
            self._add_shard(self.dir / f"{name}.keys.npy")


def token_ids(model, texts: list[str], kind: str, prompt: str | None = None) -> list | None:
    """Each text's token ids as the model will read them (``prompt``, else its stored prompt for
    ``kind``, first; cut at its ``max_seq_length``); None without a tokenizer that takes this call."""
    tok = getattr(model, "tokenizer", None)
    if tok is None or not callable(tok):
        return None
    if prompt is None:
        prompt = (getattr(model, "prompts", None) or {}).get(prompt_name(model, kind)) or ""
    try:
        ids = tok(
            [prompt + t for t in texts],
            truncation=True,
            max_length=getattr(model, "max_seq_length", None) or 512,
        )
        return [list(x) for x in ids["input_ids"]]
    except Exception:  # a tokenizer that does not take this call
        return None


def _token_lengths(model, texts: list[str], kind: str) -> np.ndarray | None:
    """Token count of each text as the model will see it (``token_ids``); None if unknown (then
    ``encode_by_length`` falls back to one encode call)."""
    ids = token_ids(model, texts, kind)
    return None if ids is None else np.fromiter((len(x) for x in ids), dtype=np.int64, count=len(texts))


def check_finite(vecs: np.ndarray, texts: list[str], kind: str, where: str = "the model") -> np.ndarray:
    """``vecs`` when every value is finite, else ``NonFiniteEmbeddingError`` naming how many texts
    and the first one: NaN vectors ranked documents in dictionary order and scored a plausible MAP
    (and p-MRR 0.00) without a word, and were cached for every later run."""
    bad = ~np.isfinite(vecs.sum(axis=1, dtype=np.float64))  # NaN and inf survive a sum; n values, not n x dim
    if bad.any():
        first = texts[int(np.argmax(bad))]
        raise NonFiniteEmbeddingError(
            f"{where} gave NaN or inf vectors for {int(bad.sum())} of {len(texts)} {kind}s (first: "
            f"{first[:60]!r}): its weights are broken (a diverged run or a corrupted file); nothing was cached"
        )
    return vecs


def output_width(model) -> int | None:
    """The width of the vectors ``model`` encodes (``truncate_dim`` applied), or None when it does
    not say; an ``OnnxEncoder`` answers for the model it wraps."""
    for m in (model, getattr(model, "model", None)):
        for name in ("get_embedding_dimension", "get_sentence_embedding_dimension"):
            if callable(get := getattr(m, name, None)):
                try:
                    width = get()
                except Exception:  # a module that cannot tell
                    return None
                return int(width) if isinstance(width, int) and width > 0 else None
    return None


def check_width(vecs: np.ndarray, model, folder: Path, text: str, kind: str) -> np.ndarray:
    """``vecs`` read from the cache ``folder`` when they are as wide as ``model``'s output, else a
    ``DataError``: another model wrote them under this fingerprint. Versions before the fingerprint
    hashed ``truncate_dim`` wrote a truncated model's vectors under the plain model's folder, where
    the plain model, evaluated later through a shared ``IFIR_CACHE``, read them back (v1 p-MRR
    -3.31 for MiniLM's -5.03). The reported width (``output_width``) is only a hint: on a mismatch
    the model encodes ``text`` and that vector's width decides (a last module that does not report
    its own, such as a custom projection, left the reported width of the module before it)."""
    width = output_width(model)
    if width is None or vecs.shape[1] == width:
        return vecs
    width = encode_by_length(model, [text], kind).shape[1]
    if vecs.shape[1] != width:
        raise DataError(
            folder,
            None,
            f"cached vectors of width {vecs.shape[1]} for a model that encodes {width}: another model "
            "(a truncate_dim copy, cached by an older version sharing IFIR_CACHE) wrote them under this "
            "fingerprint; delete the folder",
        )
    return vecs


def encode_by_length(model, texts: list[str], kind: str, *, batch_size: int = 32) -> np.ndarray:
    """``models.encode`` in batches of equal *token* length: the same vectors, less padding.

    sentence-transformers sorts a call's texts by character count, which on prose leaves about
    10% of the padded tokens as padding (measured on the benchmark set: 2.25M padded vs 2.03M
    real tokens at batch size 32); sorting by token count first brings that to ~0.1%. Vectors
    differ from a single call only by float rounding (~1e-7).
    """
    lens = _token_lengths(model, texts, kind) if len(texts) > batch_size else None
    if lens is None:
        return check_finite(
            np.asarray(encode(model, texts, kind, batch_size=batch_size), dtype=np.float32), texts, kind
        )
    order = np.argsort(-lens, kind="stable")
    out = None
    for start in progress(range(0, len(texts), batch_size), desc=f"encode {kind}s", unit="batch"):
        idx = order[start : start + batch_size]
        vecs = np.asarray(
            encode(model, [texts[i] for i in idx], kind, batch_size=batch_size), dtype=np.float32
        )
        if out is None:
            out = np.empty((len(texts), vecs.shape[1]), dtype=np.float32)
        out[idx] = vecs
    return check_finite(out, texts, kind)


def encode_cached(
    model,
    texts: list[str],
    kind: str,
    *,
    batch_size: int = 32,
    cache: bool | EmbeddingCache = True,
    fingerprint: str | None = None,
    backend: str | None = None,
) -> np.ndarray:
    """Encode ``texts`` (L2-normalised, (n, dim) float32), each unique text once.

    Duplicates are encoded once and copied; with ``cache`` on, texts seen before by the same
    model (same fingerprint) and backend are read from disk and only new ones reach the model,
    in batches of equal token length (``encode_by_length``).
    ``kind`` is ``"query"`` or ``"document"`` and selects the model's stored prompt. ``backend``
    (default: the model's ``backend`` attribute, else ``'torch'``; an encoder of ``backends``
    names its own) keys the cache with the fingerprint (``cache_fingerprint``). An ONNX/OpenVINO
    encoder whose export is not of the weights behind ``fingerprint`` exports them again first
    (``OnnxEncoder.check_export``).
    """
    uniq = list(dict.fromkeys(texts))
    pos = {t: i for i, t in enumerate(uniq)}
    if (backend or getattr(model, "backend", None)) in BATCH_DEPENDENT:
        cache = False  # a cached vector would hold the neighbours it was encoded with (cache_fingerprint)
    if fingerprint is not None and callable(getattr(model, "check_export", None)):
        model.check_export(fingerprint)  # an export of other weights than ``fingerprint``'s is made again
    if cache is False or cache is None:
        vecs = encode_by_length(model, uniq, kind, batch_size=batch_size)
    else:
        store = (
            cache
            if isinstance(cache, EmbeddingCache)
            else EmbeddingCache(
                cache_fingerprint(
                    fingerprint or model_fingerprint(model),
                    backend or getattr(model, "backend", None) or "torch",
                    getattr(model, "graph_key", None),
                )
            )
        )
        keys = [text_key(t, kind) for t in uniq]
        vecs, missing = store.get(keys)
        if vecs is not None:  # vectors cached before these checks
            check_width(vecs, model, store.dir, uniq[0], kind)
            check_finite(vecs, uniq, kind, where=f"the embedding cache {store.dir}")
        if missing:
            new = encode_by_length(model, [uniq[i] for i in missing], kind, batch_size=batch_size)
            if vecs is None:
                vecs = np.zeros((len(uniq), new.shape[1]), dtype=np.float32)
            vecs[missing] = new
            store.put([keys[i] for i in missing], new)
        log.info(
            "embeddings (%s): %d unique texts, %d from cache, %d encoded",
            kind,
            len(uniq),
            len(uniq) - len(missing),
            len(missing),
        )
    if len(uniq) == len(texts):
        return vecs
    return vecs[[pos[t] for t in texts]]
