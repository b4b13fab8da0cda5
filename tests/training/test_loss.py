"""RelationInfoNCELoss against hand-computed cases and against plain MNRL on a dual-view batch."""

import math

import pytest
import torch
from torch import nn

from ifir_lib.core.errors import NonFiniteLossError
from ifir_lib.training.loss import RelationInfoNCELoss


class FixedEmbedder(nn.Module):
    """Stands in for a SentenceTransformer: feature 'x' *is* the embedding, so cases are exact."""

    def forward(self, features):
        return {"sentence_embedding": features["x"]}


def features(*cols):
    return [{"x": c.clone().requires_grad_(True)} for c in cols]


def test_relation_matrix_dedups_dual_view_pair():
    # example 0: positive doc 7, negative doc 8; example 1 (its twin): positive 8, negative 7
    first, rel = RelationInfoNCELoss.relation_matrix(torch.tensor([[7, 8], [8, 7]]))
    assert rel.tolist() == [[1, -1], [-1, 1]]  # two document columns, not four
    assert first.tolist() == [0, 1]  # doc 7 first seen at flat 0, doc 8 at flat 1


def test_loss_matches_hand_computation():
    # one query, positive at cosine 1, negative at cosine 0, temperature 0.5
    q = torch.tensor([[1.0, 0.0]])
    pos = torch.tensor([[1.0, 0.0]])
    neg = torch.tensor([[0.0, 1.0]])
    labels = torch.tensor([[0, 0, 10, 11]])
    loss = RelationInfoNCELoss(FixedEmbedder(), temperature=0.5)(features(q, pos, neg), labels)
    expected = -math.log(math.exp(1 / 0.5) / (math.exp(1 / 0.5) + math.exp(0 / 0.5)))
    assert loss.item() == pytest.approx(expected, rel=1e-6)


def test_in_batch_negatives_switch():
    # two unrelated queries; query 0's docs are orthogonal to query 1's
    q = torch.tensor([[1.0, 0.0], [0.0, 1.0]])
    pos = torch.tensor([[1.0, 0.0], [0.0, 1.0]])
    neg = torch.tensor([[0.6, 0.8], [0.8, 0.6]])
    labels = torch.tensor([[0, 0, 1, 2], [1, 1, 3, 4]])
    off = RelationInfoNCELoss(FixedEmbedder(), temperature=1.0)(features(q, pos, neg), labels).item()
    on = RelationInfoNCELoss(FixedEmbedder(), temperature=1.0, in_batch_negatives=True)(
        features(q, pos, neg), labels
    ).item()
    # off: each query sees its own positive + negative; on: also the other query's two docs
    e = math.exp
    expected_off = -math.log(e(1) / (e(1) + e(0.6)))  # same for both queries by symmetry? q1: pos 1, neg .6
    expected_on_q0 = -math.log(e(1) / (e(1) + e(0.6) + e(0) + e(0.8)))
    assert off == pytest.approx(expected_off, rel=1e-6)
    assert on == pytest.approx(expected_on_q0, rel=1e-6)


def test_in_batch_negatives_never_include_the_same_seeds_documents():
    """A seed's original row (q+I: P+ over N) and its bare-query row (q: P+ over a hard negative H)
    share a batch with another seed's row. With in-batch negatives on, the bare-query row must not
    treat N (relevant to q alone) as a negative; the other seed's documents still count."""
    q = torch.tensor([[1.0, 0.0], [1.0, 0.0], [0.0, 1.0]])
    pos = torch.tensor([[1.0, 0.0], [1.0, 0.0], [0.0, 1.0]])  # P+ (id 1) twice, then seed B's P (id 5)
    neg = torch.tensor([[0.8, 0.6], [0.0, 1.0], [0.6, 0.8]])  # N (2), H (3), seed B's negative (6)
    labels = torch.tensor([[0, 0, 1, 2], [0, 1, 1, 3], [1, 2, 5, 6]])
    on = RelationInfoNCELoss(FixedEmbedder(), temperature=1.0, in_batch_negatives=True)(
        features(q, pos, neg), labels
    ).item()
    e = math.exp
    # row 0 (q+I): its own N, plus seed B's two docs; H belongs to its own seed, so it is masked
    row0 = -math.log(e(1) / (e(1) + e(0.8) + e(0.0) + e(0.6)))
    # row 1 (bare q): own H, plus seed B's two docs; never N
    row1 = -math.log(e(1) / (e(1) + e(0.0) + e(0.0) + e(0.6)))
    # row 2 (seed B): own negative, plus seed A's P+, N and H
    row2 = -math.log(e(1) / (e(1) + e(0.8) + e(0.0) + e(0.6) + e(1.0)))
    assert on == pytest.approx((row0 + row1 + row2) / 3, rel=1e-6)


def test_dual_view_batch_plain_mnrl_is_stuck_where_relation_loss_is_not():
    """The batch the paper's dedup is for: P+ is view 1's positive and view 2's negative.

    With perfect embeddings (each view's query equals its positive, orthogonal to the other),
    RelationInfoNCE goes to ~0. Plain MNRL sees P+ twice in one softmax (as view 1's positive
    column and as view 2's negative column), so the target probability is at most 1/2 and the
    loss cannot drop below log 2, however good the model is.
    """
    from sentence_transformers.sentence_transformer.losses import MultipleNegativesRankingLoss

    p_plus, n_star = torch.tensor([1.0, 0.0]), torch.tensor([0.0, 1.0])
    q = torch.stack([p_plus, n_star])  # view 1: q+I ~ P+ ; view 2: q+I' ~ N*
    pos = torch.stack([p_plus, n_star])
    neg = torch.stack([n_star, p_plus])  # each view's negative is the other's positive
    labels = torch.tensor([[0, 0, 100, 101], [0, 1, 101, 100]])
    ours = RelationInfoNCELoss(FixedEmbedder(), temperature=0.02)(features(q, pos, neg), labels).item()

    class FakeST(FixedEmbedder):
        pass

    mnrl = MultipleNegativesRankingLoss(FakeST(), scale=50.0)(features(q, pos, neg), None).item()
    assert ours < 1e-6
    assert mnrl == pytest.approx(math.log(2), abs=1e-5) or mnrl > math.log(2)

    # MNRL is stuck, not converged: its loss is log 2 yet the gradient on the positives is zero,
    # because the pull on P+ as view 1's positive and the push on the same P+ as view 2's
    # negative cancel. The model gets no signal from this batch.
    f = features(q, pos, neg)
    MultipleNegativesRankingLoss(FakeST(), scale=50.0)(f, None).backward()
    assert f[1]["x"].grad.abs().max() < 1e-12


def test_cached_equals_uncached():
    torch.manual_seed(0)
    q, pos, n1, n2 = (torch.randn(6, 8) for _ in range(4))
    labels = torch.tensor([[i // 2, i, 10 + i, 20 + i, 30 + i] for i in range(6)])
    plain = RelationInfoNCELoss(FixedEmbedder(), temperature=0.05)
    cached = RelationInfoNCELoss(FixedEmbedder(), temperature=0.05, mini_batch_size=2)
    fa, fb = features(q, pos, n1, n2), features(q, pos, n1, n2)
    la, lb = plain(fa, labels), cached(fb, labels)
    la.backward()
    lb.backward()
    assert la.item() == pytest.approx(lb.item(), rel=1e-5)
    for a, b in zip(fa, fb):
        assert torch.allclose(a["x"].grad, b["x"].grad, atol=1e-6)


def test_non_finite_loss_raises():
    q = torch.tensor([[float("nan"), 0.0]])
    with pytest.raises(NonFiniteLossError):
        RelationInfoNCELoss(FixedEmbedder())(features(q, q, q), torch.tensor([[0, 0, 1, 2]]))


class TokenMean(nn.Module):
    """A tokenized-input embedder (mean of token vectors) that counts the rows it encodes."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.emb = nn.Embedding(40, 6)
        self.rows = 0

    def forward(self, features):
        self.rows += features["input_ids"].shape[0]
        mask = features["attention_mask"].unsqueeze(-1).float()
        return {"sentence_embedding": (self.emb(features["input_ids"]) * mask).sum(1) / mask.sum(1)}


def tokens(rows):
    """Right-padded input_ids / attention_mask for lists of token ids."""
    width = max(len(r) for r in rows)
    ids = torch.tensor([r + [0] * (width - len(r)) for r in rows])
    return {
        "input_ids": ids,
        "attention_mask": (
            torch.arange(width)[None, :] < torch.tensor([len(r) for r in rows])[:, None]
        ).long(),
    }


def test_each_document_is_encoded_once_with_the_same_loss_and_gradients():
    # a dual-view pair (docs 10=P+, 11=N*, 12 shared) and one unrelated seed (docs 20, 21, 22)
    texts = {10: [1, 2, 3], 11: [4, 5], 12: [6, 7, 8, 9, 10], 20: [11], 21: [12, 13], 22: [14, 15, 16]}
    labels = torch.tensor([[0, 0, 10, 11, 12], [0, 1, 11, 10, 12], [1, 2, 20, 21, 22]])
    queries = tokens([[30, 31], [30, 32, 33], [34]])
    cols = [queries] + [tokens([texts[int(d)] for d in labels[:, j]]) for j in range(2, 5)]

    model = TokenMean()
    loss = RelationInfoNCELoss(model, temperature=0.1)
    ours = loss(cols, labels)
    assert model.rows == 3 + 6  # three queries, six unique documents (not nine)
    ours.backward()
    grad_ours = model.emb.weight.grad.clone()

    model.emb.weight.grad = None
    every_column = [[model(c)["sentence_embedding"]] for c in cols]
    reference = loss.calculate_loss(every_column, labels)
    reference.backward()
    assert ours.item() == pytest.approx(reference.item(), rel=1e-6)
    assert torch.allclose(grad_ours, model.emb.weight.grad, atol=1e-7)


def test_unique_rows_keeps_left_padding_and_gives_up_on_unmergeable_features():
    from ifir_lib.training.loss import unique_rows

    left = {"input_ids": torch.tensor([[0, 5], [6, 7]]), "attention_mask": torch.tensor([[0, 1], [1, 1]])}
    picked = unique_rows([left], torch.tensor([0]))
    assert picked["input_ids"].tolist() == [[0, 5]]  # not trimmed to [[0]]: that would drop the token
    assert unique_rows([{"x": torch.ones(2, 3)}], torch.tensor([0, 1])) is None


def test_minilm_dedup_matches_every_column(minilm):
    """On the real model (eval mode, so no dropout) the deduplicated forward gives the same loss."""
    minilm.eval()
    labels = torch.tensor([[0, 0, 1, 2], [0, 1, 2, 1]])
    q = minilm.preprocess(["cheap flights, only direct ones", "cheap flights, only with a layover"])
    docs = {
        1: "A direct flight from Oslo to Rome costs 80 euros.",
        2: "Via Munich, the fare to Rome is 60 euros.",
    }
    cols = [q] + [minilm.preprocess([docs[int(d)] for d in labels[:, j]]) for j in (2, 3)]
    loss = RelationInfoNCELoss(minilm, temperature=0.05)
    from ifir_lib.training.loss import unique_rows

    first, _ = loss.relation_matrix(labels[:, 2:])
    assert unique_rows(cols[1:], first)["input_ids"].shape[0] == 2  # the dedup path, not the fallback
    with torch.no_grad():
        ours = loss(cols, labels).item()
        reference = loss.calculate_loss(
            [[minilm(dict(c))["sentence_embedding"]] for c in cols], labels
        ).item()
    assert ours == pytest.approx(reference, rel=1e-5)


def test_cached_dedup_equals_uncached_dedup():
    """With gradient caching the unique documents go through GradCache as one column: same loss
    and gradients as the plain forward, and each document is still encoded once per pass."""
    texts = {10: [1, 2, 3], 11: [4, 5], 12: [6, 7, 8, 9, 10], 20: [11], 21: [12, 13], 22: [14, 15, 16]}
    labels = torch.tensor([[0, 0, 10, 11, 12], [0, 1, 11, 10, 12], [1, 2, 20, 21, 22]])
    cols = [tokens([[30, 31], [30, 32, 33], [34]])] + [
        tokens([texts[int(d)] for d in labels[:, j]]) for j in range(2, 5)
    ]
    grads, values = [], []
    for mini in (None, 2):
        model = TokenMean()
        value = RelationInfoNCELoss(model, temperature=0.1, mini_batch_size=mini)(
            [dict(c) for c in cols], labels
        )
        value.backward()
        values.append(value.item())
        grads.append(model.emb.weight.grad.clone())
        # plain: 3 queries + 6 documents; cached: the same, twice (no-grad pass, then replay)
        assert model.rows == (3 + 6) * (1 if mini is None else 2)
    assert values[0] == pytest.approx(values[1], rel=1e-6)
    assert torch.allclose(grads[0], grads[1], atol=1e-7)
