"""One training run of one arm (few-shot or spurious), its KD teachers, and the on-disk cache of results.

The evaluation is CPU-heavy (7 arms x 8 seeds x 2 shot levels plus 7 x 5 spurious runs), so every unit's
metrics and compute seconds are written to ``<cache>/<key>.json`` and read back on a rerun: ``zoo eval lavid``
resumes where a previous (locked, <= 10 minute) piece stopped.
"""

from __future__ import annotations

import json
import time
from functools import lru_cache
from pathlib import Path

import numpy as np
import torch

from zoo.lavid.student import fit_student, logits_of, make_optimizer, make_student, mode_targets, student_loss

ARM_MODES = {
    "ce": "ce",
    "kd": "kd",
    "makd": "makd",
    "text_emb": "text_emb",
    "lavid": "lavid",
    "shuffled": "shuffled",
    "lavid_hard": "lavid_hard",
}
TUNING_FILE = Path(__file__).with_name("tuning.json")
DEFAULTS = {"beta": 40.0, "lr": 0.01, "epochs": 60, "weight_decay": 5e-4, "kd_temperature": 4.0, "kd_alpha": 0.5}


def tuned_settings(arm: str, dataset: str = "fmnist") -> dict:
    """The validation-chosen settings of an arm on ``dataset`` (``tuning.json``: the few-shot choices, or the
    ``spurious`` section's for the composite set); shuffled and lavid_hard use lavid's."""
    record = json.loads(TUNING_FILE.read_text()) if TUNING_FILE.is_file() else {}
    if dataset == "spurious":
        record = record.get("spurious", {})
    chosen = record.get("chosen", {})
    source = "lavid" if arm in ("shuffled", "lavid_hard") else arm
    return {**DEFAULTS, **chosen.get(source, {})}


def settings_tag(arm: str, dataset: str = "fmnist", **override) -> str:
    """A short digest of the settings ``arm`` trains with (keys the cached units, so a retune of one arm
    invalidates only that arm's units)."""
    import hashlib

    hp = {**tuned_settings(arm, dataset), **override}
    text = json.dumps({k: float(v) for k, v in sorted(hp.items())}, sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:8]


def cached(cache: Path | None, key: str, compute) -> dict:
    """``compute()``'s metrics (with ``seconds``) from ``cache/key.json``, computing and storing them if absent."""
    path = cache / f"{key}.json" if cache is not None else None
    if path is not None and path.is_file():
        return json.loads(path.read_text())
    started = time.process_time(), time.perf_counter()
    torch.set_num_threads(min(2, torch.get_num_threads()))
    metrics = compute()
    metrics["seconds"] = round(time.perf_counter() - started[1], 2)
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(metrics))
    return metrics


def _train_teacher(images: torch.Tensor, labels: torch.Tensor, num_classes: int, epochs: int, seed: int = 0):
    """The KD teacher: the student architecture trained with CE on many images (batch 128, lr 0.05)."""
    model = make_student("ce", num_classes, 0, seed)
    optimizer, scheduler = make_optimizer(model, 0.05, 5e-4, epochs)
    generator = torch.Generator().manual_seed(seed)
    model.train()
    for _ in range(epochs):
        order = torch.randperm(len(labels), generator=generator)
        for start in range(0, len(labels), 128):
            idx = order[start : start + 128]
            loss, _ = student_loss("ce", model(images[idx]), None, labels[idx], None, 0.0)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
        scheduler.step()
    return model.eval()


def teacher(dataset: str, cache: Path | None, settings: dict):
    """The KD teacher of a data set, trained once and stored in the cache folder (safetensors)."""
    from safetensors.torch import load_file, save_file

    from zoo.lavid.data import fmnist_splits, spurious_split, to_float

    num_classes = 10 if dataset == "fmnist" else 2
    tag = (
        "fmnist"
        if dataset == "fmnist"
        else f"spurious-{settings['teacher_size']}-{settings['correlation']}-{settings['alpha']}"
    )
    path = cache / f"teacher-{tag}.safetensors" if cache is not None else None
    model = make_student("ce", num_classes, 0, 0)
    if path is not None and path.is_file():
        model.load_state_dict(load_file(str(path)))
        return model.eval()
    if dataset == "fmnist":
        x, y = fmnist_splits()["pool"]
        model = _train_teacher(to_float(x), torch.from_numpy(y).long(), 10, 2)
    else:
        x, y, _ = spurious_split("train", 999, settings["teacher_size"], settings["correlation"], settings["alpha"])
        model = _train_teacher(x, y, 2, 3)
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        save_file({k: v.contiguous() for k, v in model.state_dict().items()}, str(path))
    return model.eval()


@lru_cache(maxsize=2)
def _targets(dataset: str):
    from zoo.lavid.classes import class_targets

    return class_targets(dataset)


def train_arm(
    arm: str, images, labels, dataset: str, seed: int, settings: dict, cache: Path | None, hp=None, **override
):
    """Train ``arm`` on ``(images, labels)`` with its tuned settings on ``dataset`` (``override`` replaces some;
    ``hp`` replaces them all, on top of the defaults: a tuning trial)."""
    sig, names = _targets(dataset)
    mode = ARM_MODES[arm]
    hp = {**DEFAULTS, **hp} if hp is not None else {**tuned_settings(arm, dataset), **override}
    targets = mode_targets(mode, sig.matrix, sig.num_options, names, seed)
    teacher_cache = cache.parent if cache is not None else None  # teachers do not depend on the tuning
    teacher_logits = logits_of(teacher(dataset, teacher_cache, settings), images) if mode == "kd" else None
    return fit_student(
        images, labels, mode, targets, sig.matrix.shape[0], sig.matrix.shape[1],
        beta=hp["beta"], lr=hp["lr"], epochs=int(hp["epochs"]), weight_decay=hp["weight_decay"],
        batch_size=settings.get("batch_size", 16), seed=seed, teacher_logits=teacher_logits,
        kd_temperature=hp["kd_temperature"], kd_alpha=hp["kd_alpha"],
    )  # fmt: skip


def summary_std(values) -> float:
    return float(np.std(values, ddof=1)) if len(values) > 1 else 0.0
