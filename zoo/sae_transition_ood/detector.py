"""The detector's pieces shared by the LightningModule and the evaluation (plain torch / numpy).

* :func:`sample_tokens`: the SAE training subsample (at most ``train_tokens`` token states of the ID train texts).
* :func:`train_stack`: per-layer TopK SAEs on that sample.
* :func:`raw_top_indices`: the ``raw_transition`` ablation's discretisation (top-K normalised hidden units).
* :func:`auroc` / :func:`fpr_at_95_tpr`: OOD is the positive class, higher score = more OOD.
"""

from __future__ import annotations

import numpy as np
import torch

from zoo.sae_transition_ood.sae import SAEStack, train_saes


def sample_tokens(tokens: np.ndarray, train_tokens: int, seed: int) -> torch.Tensor:
    """At most ``train_tokens`` rows of ``tokens (N, layers, d)``, drawn without replacement, as float32."""
    if len(tokens) > train_tokens:
        rows = np.sort(np.random.default_rng(seed).choice(len(tokens), train_tokens, replace=False))
        tokens = tokens[rows]
    return torch.from_numpy(np.ascontiguousarray(tokens, dtype=np.float32))


def train_stack(
    tokens: np.ndarray, features: int = 1024, k_sae: int = 32, train_tokens: int = 40_000, seed: int = 0,
    tied: bool = True, **train_args,
) -> tuple[SAEStack, dict]:  # fmt: skip
    """Train the per-layer SAEs on a subsample of ID train token states ``(N, layers, d)``."""
    torch.manual_seed(seed)
    sample = sample_tokens(tokens, train_tokens, seed)
    stack = SAEStack(sample.shape[1], sample.shape[2], features, k_sae, tied)
    quality = train_saes(stack, sample, seed=seed, **train_args)
    return stack.eval(), quality


def cached_stack(tokens: np.ndarray, key: str, cache_dir, **train_args) -> tuple[SAEStack, dict]:
    """:func:`train_stack`, memoised on disk under ``cache_dir`` by ``key`` and the training arguments.

    The tuning run and the evaluation's seed 0 train the same SAEs (same tokens, seed and arguments); the
    evaluation reads them back instead of training them twice.
    """
    import hashlib
    import json
    from pathlib import Path

    from safetensors.torch import load_file, save_file

    spec = json.dumps({"key": key, "shape": list(tokens.shape), **train_args}, sort_keys=True, default=str)
    path = Path(cache_dir) / f"sae-{hashlib.sha256(spec.encode()).hexdigest()[:16]}.safetensors"
    if path.is_file():
        state = load_file(str(path))
        stack = SAEStack(
            tokens.shape[1], tokens.shape[2], train_args.get("features", 1024), train_args["k_sae"],
            train_args.get("tied", True),
        )  # fmt: skip
        stack.load_state_dict(state)
        quality = json.loads(path.with_suffix(".json").read_text())
        return stack.eval(), quality
    stack, quality = train_stack(tokens, **train_args)
    path.parent.mkdir(parents=True, exist_ok=True)
    save_file({k: v.contiguous() for k, v in stack.state_dict().items()}, str(path))
    path.with_suffix(".json").write_text(json.dumps(quality))
    return stack, quality


def raw_top_indices(tokens: np.ndarray, mean: np.ndarray, scale: np.ndarray, top: int) -> np.ndarray:
    """Top-``top`` hidden units (by normalised value) per token and layer: int16 ``(N, layers, top)``."""
    x = (np.asarray(tokens, dtype=np.float32) - mean) / scale[:, None]
    part = np.argpartition(-x, top - 1, axis=-1)[..., :top]
    order = np.argsort(-np.take_along_axis(x, part, -1), axis=-1)
    return np.take_along_axis(part, order, -1).astype(np.int16)


def auroc(id_scores: np.ndarray, ood_scores: np.ndarray) -> float:
    """Area under the ROC curve with OOD as positives (ties count one half)."""
    from sklearn.metrics import roc_auc_score

    labels = np.r_[np.zeros(len(id_scores)), np.ones(len(ood_scores))]
    return float(roc_auc_score(labels, np.r_[id_scores, ood_scores]))


def fpr_at_95_tpr(id_scores: np.ndarray, ood_scores: np.ndarray) -> float:
    """Fraction of ID texts flagged when the threshold flags 95% of the OOD texts."""
    threshold = np.quantile(np.asarray(ood_scores, dtype=np.float64), 0.05)
    return float(np.mean(np.asarray(id_scores) >= threshold))
