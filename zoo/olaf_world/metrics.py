"""The evaluation suite of latent actions (reconstructed: the paper's evaluation code is unreleased).

Every metric reads ``mu_z`` (one 32-d vector per transition) of held-out clips and the true actions, which
the training step never sees.

* ``probe_acc_cross``: sklearn ``LogisticRegression`` from mu_z to the action, fit on one half (by world seed) of
  one context and tested on the other half of the *other* context; mean over the four (context, half) pairs.
* ``probe_acc_within``: the same with the test half taken from the *same* context (same training and test
  sizes as the cross probe, so the two differ only in the context).
* ``proto_diag_minus_offdiag``: per-action mean mu_z in A and in B, the 6 x 6 cosine matrix, mean(diag) -
  mean(offdiag).
* ``pixel_mse``: next-frame reconstruction MSE from mu_z (mean over pixels).
* ``transfer_acc``: decode the z of a clip from one context onto a frame of the other context, and classify
  the produced motion (previous frame, decoded frame) with an inverse-dynamics CNN trained on true labels of
  the target context's training clips; mean of both directions.
"""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from zoo.olaf_world.clips import NUM_ACTIONS
from zoo.olaf_world.lam import transition_cnn


def _logistic(seed: int = 0):
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    return make_pipeline(StandardScaler(), LogisticRegression(max_iter=2000, C=1.0, random_state=seed))


def halves(world_seed: np.ndarray) -> np.ndarray:
    """0 / 1: the lower / upper half of each context's world seeds (the probes' train / test split)."""
    world_seed = np.asarray(world_seed)
    out = np.zeros(len(world_seed), dtype=np.int64)
    for context_seeds in (world_seed[world_seed < 50], world_seed[world_seed >= 50]):
        unique = np.unique(context_seeds)
        upper = set(unique[len(unique) // 2 :].tolist())
        out[np.isin(world_seed, list(upper))] = 1
    return out


def probe_accuracies(mu: np.ndarray, actions: np.ndarray, context: np.ndarray, world_seed: np.ndarray) -> dict:
    """``probe_acc_within`` and ``probe_acc_cross`` (fractions) from per-transition mu ``(N, d)`` and labels."""
    mu, actions, context = np.asarray(mu), np.asarray(actions), np.asarray(context)
    half = halves(world_seed)
    within, cross = [], []
    for c in (0, 1):
        for h in (0, 1):
            train = (context == c) & (half == h)
            classes = np.unique(actions[train])
            probe = _logistic().fit(mu[train], actions[train]) if len(classes) > 1 else None
            for target_context, scores in ((c, within), (1 - c, cross)):
                test = (context == target_context) & (half == 1 - h)
                # one class only (tiny smoke data): the probe predicts it
                predicted = probe.predict(mu[test]) if probe is not None else np.full(test.sum(), classes[0])
                scores.append(float((predicted == actions[test]).mean()))
    return {"probe_acc_within": float(np.mean(within)), "probe_acc_cross": float(np.mean(cross))}


def prototype_gap(mu: np.ndarray, actions: np.ndarray, context: np.ndarray, num_actions: int | None = None) -> float:
    """mean(diag) - mean(offdiag) of the cosine matrix between per-action mean mu in A (rows) and B (columns).

    Args:
        mu: Latents ``(N, d)``.
        actions: True actions ``(N,)`` in ``0..num_actions-1``.
        context: 0 / 1 per latent.
        num_actions: Classes (default: 6 for Crafter, 5 when no action 5 occurs: ALE has no ``do``).
    """
    if num_actions is None:
        num_actions = NUM_ACTIONS if (np.asarray(actions) == NUM_ACTIONS - 1).any() else NUM_ACTIONS - 1
    protos = []
    for c in (0, 1):
        rows = []
        for a in range(num_actions):
            chosen = mu[(context == c) & (actions == a)]
            if not len(chosen):
                raise ValueError(f"no held-out transition of action {a} in context {c}: use more clips")
            rows.append(chosen.mean(axis=0))
        protos.append(np.stack(rows))
    a, b = (p / np.maximum(np.linalg.norm(p, axis=1, keepdims=True), 1e-12) for p in protos)
    cosine = a @ b.T
    off = ~np.eye(num_actions, dtype=bool)
    return float(np.diag(cosine).mean() - cosine[off].mean())


class InverseDynamics(nn.Module):
    """A small CNN: (previous frame, next frame) at 32 px -> action logits."""

    def __init__(self, num_actions: int = NUM_ACTIONS) -> None:
        super().__init__()
        self.net = transition_cnn(9, 4, num_actions)  # previous, next, next - previous at 32 px

    @staticmethod
    def inputs(previous: torch.Tensor, following: torch.Tensor) -> torch.Tensor:
        """Frames ``(N, H, W, C)`` in [0, 1] -> network input ``(N, 9, 32, 32)``."""
        p = F.avg_pool2d(previous.permute(0, 3, 1, 2), 2)
        f = F.avg_pool2d(following.permute(0, 3, 1, 2), 2)
        return torch.cat([p, f, f - p], dim=1)

    def forward(self, previous: torch.Tensor, following: torch.Tensor) -> torch.Tensor:
        return self.net(self.inputs(previous, following))


def train_inverse_dynamics(
    previous: np.ndarray, following: np.ndarray, actions: np.ndarray, steps: int = 600, seed: int = 0
) -> InverseDynamics:
    """Fit :class:`InverseDynamics` on uint8 frame pairs ``(N, H, W, C)`` with true actions (Adam, batch 128)."""
    generator = torch.Generator().manual_seed(seed)
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        model = InverseDynamics()
    optimiser = torch.optim.Adam(model.parameters(), lr=1e-3)
    prev_t = torch.as_tensor(previous)
    next_t = torch.as_tensor(following)
    labels = torch.as_tensor(actions)
    for _ in range(steps):
        idx = torch.randint(0, len(labels), (128,), generator=generator)
        logits = model(prev_t[idx].float() / 255, next_t[idx].float() / 255)
        loss = F.cross_entropy(logits, labels[idx])
        optimiser.zero_grad()
        loss.backward()
        optimiser.step()
    return model.eval()


@torch.no_grad()
def classify(model: InverseDynamics, previous: torch.Tensor, following: torch.Tensor, batch: int = 512) -> np.ndarray:
    """Predicted actions for float frame pairs in [0, 1]."""
    out = [model(previous[i : i + batch], following[i : i + batch]).argmax(-1) for i in range(0, len(previous), batch)]
    return torch.cat(out).numpy()
