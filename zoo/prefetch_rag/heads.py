"""The three components of the paper, in plain torch: RetrievalPredictor (when), QueryGenerator (what) and
ContextMonitor (is the in-flight query still valid), plus the spike labels the predictor is trained on."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

EMBEDDING_DIM = 384


def check_unit(name: str, value: float) -> None:
    """Raise a one-line ValueError unless ``0 <= value <= 1``."""
    if not 0.0 <= float(value) <= 1.0:
        raise ValueError(f"{name} must be in [0, 1], got {value}")


def check_positive(name: str, value: int) -> None:
    """Raise a one-line ValueError unless ``value > 0``."""
    if value <= 0:
        raise ValueError(f"{name} must be > 0, got {value}")


def spike_labels(spikes: Sequence[bool], k: int) -> np.ndarray:
    """Labels of the retrieval predictor: position ``t`` is positive iff a spike lies in ``(t, t + k]``.

    Args:
        spikes: Per position, whether the synchronous baseline's entropy trigger fired there.
        k: Look-ahead in tokens.
    """
    check_positive("k", k)
    spikes = np.asarray(spikes, dtype=bool)
    labels = np.zeros(len(spikes), dtype=bool)
    for s in np.flatnonzero(spikes):
        labels[max(0, s - k) : s] = True
    return labels


class RetrievalPredictor(nn.Module):
    """MLP ``(d + w + n_heads + 1) -> hidden -> 1``: the logit of "an entropy spike within the next k tokens".

    Args:
        d: LM width.
        w: Window (entropy trajectory length).
        n_heads: Attention heads of the LM's last layer.
        hidden: Hidden width.
    """

    def __init__(self, d: int, w: int, n_heads: int, hidden: int = 128) -> None:
        super().__init__()
        self.net = nn.Sequential(nn.Linear(d + w + n_heads + 1, hidden), nn.ReLU(), nn.Linear(hidden, 1))
        self.register_buffer("mean", torch.zeros(d + w + n_heads + 1))
        self.register_buffer("std", torch.ones(d + w + n_heads + 1))

    def set_normalisation(self, features: torch.Tensor) -> None:
        """Standardise inputs with the training features' mean and std."""
        self.mean.copy_(features.mean(0))
        self.std.copy_(features.std(0).clamp_min(1e-4))

    def forward(self, features: torch.Tensor) -> torch.Tensor:
        return self.net((features - self.mean) / self.std).squeeze(-1)

    @torch.no_grad()
    def probability(self, features: torch.Tensor) -> torch.Tensor:
        return torch.sigmoid(self(features))


class QueryGenerator(nn.Module):
    """Linear head from the window-mean hidden state into the retriever's 384-d space: ``normalize(W h)``.

    The ContextMonitor reads the same head (``c_t``), so it costs one small matmul.
    """

    def __init__(self, d: int, dim: int = EMBEDDING_DIM) -> None:
        super().__init__()
        self.proj = nn.Linear(d, dim)

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        return F.normalize(self.proj(hidden), dim=-1)


def cosine_loss(query: torch.Tensor, gold: torch.Tensor) -> torch.Tensor:
    """Mean ``1 - cos(q_h, e_gold)``."""
    return (1.0 - F.cosine_similarity(query, gold, dim=-1)).mean()


def check_query(vector: np.ndarray | torch.Tensor) -> np.ndarray:
    """A query as float32 ``(384,)``; anything else raises a one-line error naming ``query``."""
    array = np.asarray(vector, dtype=np.float32)
    if array.shape != (EMBEDDING_DIM,):
        raise ValueError(f"query must be a {EMBEDDING_DIM}-d vector, got shape {tuple(array.shape)}")
    return array


def combine(head_query: np.ndarray, text_query: np.ndarray, alpha: float) -> np.ndarray:
    """``normalize(alpha q_h + (1 - alpha) q_text)``."""
    check_unit("alpha", alpha)
    q = alpha * check_query(head_query) + (1.0 - alpha) * check_query(text_query)
    return (q / max(float(np.linalg.norm(q)), 1e-12)).astype(np.float32)


def drift(monitor_vector: np.ndarray, inflight_query: np.ndarray) -> float:
    """ContextMonitor drift ``1 - cos(c_t, q_inflight)``."""
    a, b = check_query(monitor_vector), check_query(inflight_query)
    return float(1.0 - a @ b / max(float(np.linalg.norm(a) * np.linalg.norm(b)), 1e-12))


def train_heads(
    predictor: RetrievalPredictor,
    query_head: QueryGenerator,
    x: torch.Tensor,
    y: torch.Tensor,
    hx: torch.Tensor,
    hy: torch.Tensor,
    *,
    seed: int,
    epochs: int,
    lr: float,
    noise: float = 0.0,
    batch_size: int = 256,
) -> dict:
    """Stage 2c in plain torch: train the predictor (BCE, ``pos_weight`` = neg/pos) and the query head (1 - cos)
    jointly with Adam, and score the predictor on held-out positions; no Trainer is needed.

    Positions are split 85/15 by a generator seeded with ``seed`` (which also draws the batches and the noise);
    the predictor standardises its inputs with the training part's mean and std. Each epoch runs
    ``len(train) // batch_size`` steps, each on a predictor batch and an equal share of the query-head pairs.

    Args:
        predictor: The retrieval predictor (its normalisation buffers are set here).
        query_head: The query generator.
        x: Predictor features at every answer position.
        y: Their spike labels (float 0/1).
        hx: Query-head inputs at the positions that lead to a slot.
        hy: The gold documents' embeddings of those positions.
        seed: Seed of the split, the batches and the noise.
        epochs: Passes over the training positions.
        lr: Adam learning rate.
        noise: Std of the Gaussian noise added to the predictor's inputs, in standardised units (0: none).
        batch_size: Predictor positions per step.

    Returns:
        ``positions``, ``positive_rate``, ``heldout_auroc`` (the predictor on the held-out 15%) and
        ``head_cosine`` (mean cosine of the query head's outputs with their targets).
    """
    from sklearn.metrics import roc_auc_score

    generator = torch.Generator().manual_seed(seed)
    n = len(x)
    order = torch.randperm(n, generator=generator)
    cut = int(0.85 * n)
    train, held = order[:cut], order[cut:]
    with torch.enable_grad():
        predictor.requires_grad_(True)
        query_head.requires_grad_(True)
        predictor.set_normalisation(x[train])
        pos = float(y[train].sum())
        pos_weight = torch.tensor((len(train) - pos) / max(pos, 1.0))
        opt = torch.optim.Adam([*predictor.parameters(), *query_head.parameters()], lr=lr)
        hn = len(hx)
        for _ in range(epochs):
            perm = train[torch.randperm(len(train), generator=generator)]
            hperm = torch.randperm(hn, generator=generator)
            batches = max(1, len(perm) // batch_size)
            for b in range(batches):
                idx = perm[b * batch_size : (b + 1) * batch_size]
                hidx = hperm[b * hn // batches : (b + 1) * hn // batches]
                features = x[idx]
                if noise:  # in standardised units: the predictor divides by its std buffer
                    features = features + noise * predictor.std * torch.randn(features.shape, generator=generator)
                loss = F.binary_cross_entropy_with_logits(predictor(features), y[idx], pos_weight=pos_weight)
                loss = loss + cosine_loss(query_head(hx[hidx]), hy[hidx])
                opt.zero_grad()
                loss.backward()
                opt.step()
    predictor.eval()
    query_head.eval()
    with torch.no_grad():
        p = predictor.probability(x[held]).numpy()
        cos = F.cosine_similarity(query_head(hx), hy).mean().item()
    auroc = float(roc_auc_score(y[held].numpy(), p)) if 0 < y[held].sum() < len(held) else float("nan")
    return {"positions": n, "positive_rate": round(float(y.mean()), 4), "heldout_auroc": round(auroc, 4),
            "head_cosine": round(cos, 4)}  # fmt: skip
