"""Train the top layers only, with documents' frozen lower layers computed once (``train_top_layers``).

A declared cheaper variant of the method, applied to every mode alike (docs/method.md §3,
"cheaper training on a CPU"): the embeddings and the lower ``n - top`` transformer layers are
frozen, with their dropout off, so their output for a document is a fixed function of its tokens.
Each distinct document is run through them once (no gradient) and its hidden states are kept;
every later step starts the document at layer ``n - top`` and runs only the trainable top layers,
forward and backward. Queries run the whole model (their frozen part needs no backward either).
The saved model is an ordinary SentenceTransformer: the frozen layers keep the base model's weights.

What it changes: fewer trainable weights (the top layers, the pooling and any dense head), and no
dropout below them. What it does not change: the loss, the data, the batches, the schedule.
Not handled here: the loss (``loss``), the training loop (``trainer``).
"""

from __future__ import annotations

import contextlib

import torch
from torch import Tensor, nn

from ..core.errors import ConfigError

_SHARED: dict[tuple[str, int], dict[tuple[int, ...], Tensor]] = {}
_SHAPES: dict[tuple[str, int], bool] = {}


class _Skip(nn.Module):
    """A frozen layer skipped: returns its input hidden states, in the structure the layer returns."""

    def __init__(self, as_tuple: bool):
        super().__init__()
        self.as_tuple = as_tuple

    def forward(self, hidden_states, *args, **kwargs):
        return (hidden_states,) if self.as_tuple else hidden_states


class FrozenBottom:
    """Freeze all but the top ``top`` layers of ``model``'s transformer; ``encode`` documents from
    a cache of their hidden states below the trainable layers.

    Example::

        fb = FrozenBottom(model, top=2)           # MiniLM: layers 0-3 and the embeddings frozen
        docs = fb.encode(model.tokenize(texts))   # == model(features)["sentence_embedding"]
    """

    def __init__(self, model, top: int, share_as: str | None = None):
        self.model = model
        self.auto = model[0].auto_model
        layers = self.auto.encoder.layer
        if not 1 <= top <= len(layers):
            raise ConfigError(f"train_top_layers must be 1..{len(layers)} for this model, got {top}")
        self.k = len(layers) - top
        for module in (self.auto.embeddings, *layers[: self.k]):
            for p in module.parameters():
                p.requires_grad_(False)
            for m in module.modules():
                if isinstance(m, nn.Dropout):
                    m.p = 0.0
        # runs of one base model in one process (an experiment) share the cache: ``share_as`` names
        # it, by the model's content (``trainer`` passes ``model_fingerprint(model, modules=False)``)
        self.cache: dict[tuple[int, ...], Tensor] = (
            _SHARED.setdefault((share_as, self.k), {}) if share_as else {}
        )
        self.as_tuple: bool | None = _SHAPES.get((share_as, self.k)) if share_as else None
        self.share_as = share_as

    def trainable_parameters(self) -> int:
        return sum(p.numel() for p in self.model.parameters() if p.requires_grad)

    def _fill(self, features: dict, keys: list[tuple[int, ...]]) -> None:
        """Run the frozen part once for the rows whose key is not cached yet."""
        todo = [i for i, key in enumerate(keys) if key not in self.cache]
        if not todo:
            return
        layer = self.auto.encoder.layer[self.k - 1] if self.k else None
        seen = []
        hook = layer.register_forward_hook(lambda m, a, out: seen.append(out)) if layer is not None else None
        sub = {k: v[todo] for k, v in features.items() if isinstance(v, Tensor) and v.ndim == 2}
        try:
            with torch.no_grad():
                out = self.auto(**sub, output_hidden_states=True)
        finally:
            if hook is not None:
                hook.remove()
        if seen:
            self.as_tuple = isinstance(seen[0], tuple)
            if self.share_as:
                _SHAPES[(self.share_as, self.k)] = self.as_tuple
        states = out.hidden_states[self.k]
        mask = sub["attention_mask"].bool()
        for j, i in enumerate(todo):
            self.cache[keys[i]] = states[j][mask[j]].detach().clone()

    @contextlib.contextmanager
    def _from_cache(self, states: Tensor):
        """The model with its embeddings returning ``states`` and its frozen layers skipped."""
        enc, emb = self.auto.encoder, self.auto.embeddings
        layers = enc.layer
        enc.layer = nn.ModuleList([*(_Skip(bool(self.as_tuple)) for _ in range(self.k)), *layers[self.k :]])
        emb.forward = lambda *a, **kw: states
        try:
            yield
        finally:
            enc.layer = layers
            del emb.forward

    def encode(self, features: dict) -> Tensor:
        """Sentence embeddings of tokenized documents, with gradients through the top layers."""
        if self.k == 0:
            return self.model(features)["sentence_embedding"]
        ids, mask = features["input_ids"], features["attention_mask"].bool()
        keys = [tuple(row[m].tolist()) for row, m in zip(ids, mask)]
        self._fill(features, keys)
        states = torch.zeros(*ids.shape, self.auto.config.hidden_size, device=ids.device)
        for i, key in enumerate(keys):
            states[i, mask[i]] = self.cache[key]
        with self._from_cache(states):
            return self.model(features)["sentence_embedding"]
