"""RelationInfoNCELoss: contrastive loss over a deduplicated, relation-labelled batch.

Not handled here: building examples (``trainsets``), batching (``train.DualViewBatchSampler``).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import torch
from sentence_transformers.base.losses.gradcache import CachedLossMixin
from sentence_transformers.base.losses.merged_forward import embed_columns, merge_feature_batches
from torch import Tensor, nn

from ..core.errors import NonFiniteLossError


class RelationInfoNCELoss(CachedLossMixin, nn.Module):
    def __init__(
        self,
        model,
        temperature: float = 0.02,
        in_batch_negatives: bool = False,
        mini_batch_size: int | None = None,
        show_progress_bar: bool = False,
    ) -> None:
        """InfoNCE over a query x document *relation matrix*, as in ArcticTraining's bi-encoder
        trainer used by Dual-View Training (Zeng et al., arXiv 2604.18845; docs/method.md §3).

        Each query (query + instruction) is scored against every document in the batch,
        **deduplicated by document id**. A relation matrix ``R`` (queries x unique docs) holds
        +1 for the query's positive, -1 for its listed negatives and 0 for other in-batch
        documents; 0 entries count as negatives only when ``in_batch_negatives`` is on
        (ArcticTraining's default is off), and then only documents of *other* seeds: a document
        that another row of the same seed labels (an instruction negative, relevant to the
        bare-query row) is never a false negative. For a query with positive p and negative set N::

            loss = -log( exp(s_p / t) / (exp(s_p / t) + sum_{n in N} exp(s_n / t)) )

        Why dedup matters: in a dual-view batch P+ is one view's positive *and* its twin's
        negative. Plain MultipleNegativesRankingLoss treats the two copies as different columns,
        so the same text sits in the numerator and the denominator of one softmax: the target
        probability can never exceed 1/2 and the gradients of the two copies cancel. Here the
        copies are one column, and its label for each query comes from ``R``. Each unique
        document is also *encoded* once (``unique_rows``), with or without gradient caching.

        Args:
            model: the SentenceTransformer being trained.
            temperature: softmax temperature (paper: 0.02).
            in_batch_negatives: count unlabelled (0) in-batch documents as negatives.
            mini_batch_size: when set, use gradient caching (GradCache, arXiv 2101.06983; the
                technique of CachedMultipleNegativesRankingLoss) so the effective batch is
                bounded by compute, not memory.

        Inputs: columns ``(query, positive, negative_1, ..., negative_k)`` and a ``label`` row
        per example ``[group_id, query_id, positive_doc_id, negative_doc_id_1, ...]`` (integer
        ids assigned by ``trainsets.encode_ids``); the first two are read by the batch sampler.

        Example::

            loss = RelationInfoNCELoss(model, temperature=0.02, mini_batch_size=32)
        """
        super().__init__()
        self.model = model
        self.temperature = temperature
        self.in_batch_negatives = in_batch_negatives
        self.mini_batch_size = mini_batch_size or 0
        self.show_progress_bar = show_progress_bar
        # CachedLossMixin checks this flag; without a mini-batch size we run a plain forward.
        self.uses_gradient_cache = bool(mini_batch_size)
        self.doc_encoder = None  # ``frozen.FrozenBottom`` when only the top layers train

    @staticmethod
    def relation_matrix(doc_ids: Tensor) -> tuple[Tensor, Tensor]:
        """From per-example doc ids (B, 1+k) to (unique ids (U,), first column index (U,), R (B, U)).

        ``doc_ids=[[7, 8], [8, 7]]`` (a dual-view pair) -> unique ``[7, 8]``,
        ``R=[[+1, -1], [-1, +1]]``: two columns, not four.
        """
        b, c = doc_ids.shape
        flat = doc_ids.T.reshape(-1)  # column-major, matching torch.cat(columns)
        uniq, inverse = torch.unique(flat, return_inverse=True)
        # position of the first occurrence of each unique id in ``flat``
        first = torch.full((len(uniq),), flat.numel(), dtype=torch.long, device=flat.device)
        first.scatter_reduce_(0, inverse, torch.arange(flat.numel(), device=flat.device), reduce="amin")
        inv = inverse.view(c, b).T  # (B, 1+k): unique column of each doc
        rel = torch.zeros(b, len(uniq), dtype=torch.long, device=flat.device)
        rows = torch.arange(b, device=flat.device)
        for j in range(c - 1, 0, -1):  # negatives first, so a positive wins a clash
            rel[rows, inv[:, j]] = -1
        rel[rows, inv[:, 0]] = 1
        return first, rel

    def calculate_loss(
        self, reps: list[list[Tensor]], labels: Tensor | None = None, *, with_backward: bool = False
    ) -> Tensor:
        queries = torch.cat(reps[0])  # (B, dim)
        first, rel = self.relation_matrix(labels[:, 2:].to(queries.device))
        if len(reps) == 2 and labels.shape[1] > 3:  # one column of unique documents (``forward``)
            docs_u = torch.cat(reps[1])
        else:
            docs_u = torch.cat([torch.cat(r) for r in reps[1:]])[first]  # column-major, then dedup
        return self.info_nce(queries, docs_u, rel, labels, with_backward=with_backward)

    def info_nce(
        self, queries: Tensor, docs_u: Tensor, rel: Tensor, labels: Tensor, *, with_backward: bool = False
    ) -> Tensor:
        """The loss from query embeddings (B, dim), one embedding per unique document (U, dim) and
        the relation matrix (B, U)."""
        # cosine similarity, as in the paper's InfoNCE; (B, U)
        scores = (
            nn.functional.normalize(queries, dim=-1)
            @ nn.functional.normalize(docs_u, dim=-1).T
            / self.temperature
        )
        candidate = rel != 0
        if self.in_batch_negatives:
            # other groups' documents are negatives; a document labelled by a row of the *same*
            # group is not: a bare-query row must not push away its seed's instruction negatives
            groups = labels[:, 0].to(queries.device)
            same_group = (groups[:, None] == groups[None, :]).to(scores.dtype)  # (B, B)
            labelled_in_group = (same_group @ candidate.to(scores.dtype)) > 0  # (B, U)
            candidate = candidate | ~labelled_in_group
        # each positive competes with the query's negatives only (not with other positives)
        neg_mask = candidate & (rel != 1)
        neg_scores = scores.masked_fill(~neg_mask, float("-inf"))
        pos_rows, pos_cols = (rel == 1).nonzero(as_tuple=True)
        pos = scores[pos_rows, pos_cols]  # (P,)
        denom = torch.logaddexp(pos, torch.logsumexp(neg_scores[pos_rows], dim=1))
        loss = (denom - pos).mean()
        if not torch.isfinite(loss):
            raise NonFiniteLossError(f"loss is {loss.item()}; stopping before the optimizer step")
        if with_backward:
            loss.backward()
            loss = loss.detach()
        return loss

    def forward(self, sentence_features: Iterable[dict[str, Tensor]], labels: Tensor) -> Tensor:
        sentence_features = list(sentence_features)
        first, rel = self.relation_matrix(labels[:, 2:])
        unique = unique_rows(sentence_features[1:], first)
        if self.uses_gradient_cache:
            return self.forward_cached(
                sentence_features if unique is None else [sentence_features[0], unique], labels
            )
        if unique is None:  # features that cannot be merged: embed every column, dedup afterwards
            embeddings = embed_columns(self.model, sentence_features)
            return self.calculate_loss([[e] for e in embeddings], labels)
        queries = self.model(sentence_features[0])["sentence_embedding"]
        if self.doc_encoder is not None:
            docs_u = self.doc_encoder.encode(unique)
        else:
            docs_u = self.model(unique)["sentence_embedding"]
        return self.info_nce(queries, docs_u, rel.to(queries.device), labels)

    def get_config_dict(self) -> dict[str, Any]:
        return {
            "temperature": self.temperature,
            "in_batch_negatives": self.in_batch_negatives,
            "mini_batch_size": self.mini_batch_size or None,
        }

    @property
    def citation(self) -> str:
        return "@misc{zeng2026dualview, title={Dual-View Training for Instruction-Following Information Retrieval}, eprint={2604.18845}, archivePrefix={arXiv}, year={2026}}"


def unique_rows(doc_features: list[dict[str, Any]], first: Tensor) -> dict[str, Any] | None:
    """One tokenized row per unique document: the document columns merged column-major (as
    ``relation_matrix`` flattens ids), then the rows ``first`` picks, trimmed to their longest.

    A co-batched dual-view pair lists the same documents twice (P+ and N* swap roles, the other
    negatives repeat), so encoding each once halves the documents a step encodes. The loss and
    gradients are the same as encoding every column and deduplicating afterwards, up to dropout
    sampling. ``None`` when the columns cannot be merged (the caller then embeds every column).
    """
    merged = merge_feature_batches(doc_features)
    mask = merged.get("attention_mask") if merged is not None else None
    if not isinstance(mask, Tensor) or mask.ndim != 2:
        return None
    rows, width = mask.shape
    first = first.to(mask.device)
    picked = {k: v[first] if _per_row(v, rows) else v for k, v in merged.items()}
    keep = int(picked["attention_mask"].sum(dim=1).max())
    if picked["attention_mask"][:, keep:].any():  # left padding: keep the full width
        return picked
    return {
        k: v[:, :keep] if _per_row(v, len(first)) and v.ndim == 2 and v.shape[1] == width else v
        for k, v in picked.items()
    }


def _per_row(value: Any, rows: int) -> bool:
    return isinstance(value, Tensor) and value.ndim >= 1 and value.shape[0] == rows
