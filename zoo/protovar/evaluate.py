"""``zoo eval protovar``: ProtoVAR's distilled sets against real-image and unguided-VAR sets, one student protocol.

Per seed (seed = sampling generator + student initialisation, batches and augmentation; the published tokenizer,
VAR and teacher are fixed unless ``--retrain``), every arm builds a distilled set at IPC 1 and 10 and a fresh
student (:class:`~zoo.protovar.student.StudentProtocol`, soft labels from the teacher) is trained on it:

* ``acc_ipc1`` / ``acc_ipc10``: test accuracy of the student (the first ``test_limit`` of the 10,000 test images).

Arms: ``protovar`` (prototype-guided VAR samples, pool of r x IPC per class, selector); baseline ``var_unguided``
(unguided class-conditional VAR, IPC samples per class: the stand-in for diffusion distillation); ablations
``protovar_noselect`` (guided, no selector) and ``var_unguided_select`` (selector on unguided samples: no
prototypes); references ``random_real``, ``herding`` (real images, no generator), ``full_data`` (the student
protocol on all 55,000 pool images: ``acc_full``), ``teacher`` (the soft-label teacher's own ``acc_full``) and
``tokenizer`` (``recon_mse`` in [0, 1] units and ``codebook_usage`` on the test images). The four generative arms'
settings were chosen on the validation split by ``python -m zoo.protovar.tune`` with the same number of trials
each (``tuning.json``); the student protocol's learning rate was chosen there once for every arm.
Each (arm, seed) result is cached as JSON in ``cache_dir`` (keyed by the settings, the tuning and the pinned
weights), so the evaluation can run in pieces (``benchmarks/protovar_eval_pieces.py`` runs them in two
single-thread processes); what does not depend on the seed (the herding features of the pool, the VAR's
teacher-forced accuracy) is kept in ``runs/protovar-cache``.
"""

from __future__ import annotations

import json
from dataclasses import asdict, replace
from functools import lru_cache
from pathlib import Path

import numpy as np

from zoo._eval import Claim, Protocol, Setting, Tuning, beats, cached_piece, piece_path
from zoo._serialization import weights_digest

TUNING_FILE = Path(__file__).with_name("tuning.json")
GENERATIVE = ("protovar", "var_unguided", "protovar_noselect", "var_unguided_select")
ARMS_ORDER = ("protovar", "var_unguided", "protovar_noselect", "var_unguided_select", "random_real", "herding")
SPEC_BETA = (5.0, 3.0, 1.5)
#: The spec's generator and selector settings; tuning.json overrides them per arm.
DEFAULTS = {"cfg": 1.5, "temperature": 1.0, "top_k": 32, "beta_scale": 1.0, "gamma": 0.0, "r": 5, "floor": 0.8}
#: What each generative arm is: prototype guidance and / or the selector.
KIND = {
    "protovar": {"guided": True, "select": True},
    "protovar_noselect": {"guided": True, "select": False},
    "var_unguided": {"guided": False, "select": False},
    "var_unguided_select": {"guided": False, "select": True},
}


def tuning_record() -> dict:
    return json.loads(TUNING_FILE.read_text()) if TUNING_FILE.is_file() else {"student": {}, "arms": {}}


def arm_params(arm: str, record: dict | None = None) -> dict:
    """The generator / selector settings of a generative arm: the spec's, with its validation choice on top."""
    record = tuning_record() if record is None else record
    return {**DEFAULTS, **record.get("arms", {}).get(arm, {}).get("best", {}), **KIND[arm]}


def student_protocol(record: dict | None = None, steps: int | None = None):
    from zoo.protovar.student import StudentProtocol

    record = tuning_record() if record is None else record
    protocol = StudentProtocol(**{k: v for k, v in record.get("student", {}).get("best", {}).items()})
    return replace(protocol, steps=steps) if steps else protocol


def _tunings() -> dict[str, Tuning]:
    record = tuning_record()
    student = record.get("student", {})
    shared = f"; student protocol (every arm): {student.get('note', 'the defaults')}, grid {student.get('grid', {})}"
    out = {}
    for arm, info in record.get("arms", {}).items():
        out[arm] = Tuning("validation", info["grid"], info["trials"], info["note"] + shared)
    for arm in ("random_real", "herding", "full_data"):
        out[arm] = Tuning("none", {}, 0, "no generator settings" + shared)
    return out


PROTOCOL = Protocol(
    method="protovar",
    baselines=("var_unguided",),
    ablations=("protovar_noselect", "var_unguided_select"),
    references=("random_real", "herding", "full_data", "teacher", "tokenizer"),
    settings={
        "ipcs": Setting([1, 10], "images per class of the distilled sets", minimum=1),
        "test_limit": Setting(10000, "first Fashion-MNIST test images scored (1 to 10000)", minimum=1),
        "student_steps": Setting(0, "student steps (0: the protocol's, from tuning.json)", minimum=0),
        "cache_dir": Setting("runs/protovar-eval", "folder of the per-arm, per-seed results (resumable)"),
    },
    tuning=_tunings(),
    headline=("acc_ipc1", "acc_ipc10"),
    panels=2,
)


# ----------------------------------------------------------------------------------------------- resources


@lru_cache(maxsize=4)
def _published(name: str):
    import zoo

    return zoo.load(name, pretrained=True).eval()


def models(run) -> tuple:
    """(generator, teacher CNN) of this run: the published ones, or (``--retrain``) fits of their recipes."""
    if "models" in run.cache:
        return run.cache["models"]
    if run.retrain:
        generator, teacher = run.load("protovar"), run.load("teacher").net
    elif run.weights is not None:
        generator, teacher = run.load("protovar"), _published("protovar.teacher").net
    else:
        generator, teacher = _published("protovar.fmnist"), _published("protovar.teacher").net
    run.cache["models"] = (generator.eval(), fast_teacher(teacher))
    return run.cache["models"]


def fast_teacher(teacher):
    """The teacher in eval mode with channels-last weights (~1.6x faster convolutions on CPU, same logits)."""
    import torch

    return teacher.eval().to(memory_format=torch.channels_last)


#: Folder of what does not depend on the seed: the teacher's penultimate features of the 55,000-image pool
#: (herding) and the VAR's teacher-forced accuracy, one file per digest of the weights.
FEATURE_CACHE = Path("runs/protovar-cache")


@lru_cache(maxsize=2)
def _pool_features(teacher_id: int, teacher) -> np.ndarray:
    """Teacher features of the training pool, kept in ``FEATURE_CACHE`` keyed by a digest of the teacher's weights."""
    from zoo.protovar.data import fmnist_splits
    from zoo.protovar.student import predict_batches

    path = FEATURE_CACHE / f"pool_features-{weights_digest(teacher)[:16]}.npy"
    if path.is_file():
        return np.load(path)
    features = predict_batches(teacher, fmnist_splits()["train"][0], features=True).numpy()
    path.parent.mkdir(parents=True, exist_ok=True)
    np.save(path, features)
    return features


def generated_set(generator, teacher, params: dict, ipc: int, seed: int):
    """A generative arm's distilled set: uint8 images [10 ipc, 28, 28] and labels."""
    import torch

    from zoo.protovar.distill import select
    from zoo.protovar.student import predict_batches

    per_class = params["r"] * ipc if params["select"] else ipc
    class_ids = torch.arange(10).repeat_interleave(per_class)
    index = torch.arange(per_class).repeat(10)
    beta = tuple(b * params["beta_scale"] for b in SPEC_BETA)
    gamma = tuple(g * params["gamma"] for g in (0.8, 0.5, 0.2))
    images = generator.generate(
        class_ids,
        seed=1000 * seed + ipc,
        ipc=ipc if params["guided"] else None,
        index=index,
        beta=beta,
        gamma=gamma,
        top_k=params["top_k"],
        temperature=params["temperature"],
        cfg=params["cfg"],
    )
    labels = class_ids.numpy()
    if not params["select"]:
        return images.numpy(), labels
    logits = predict_batches(teacher, images)
    confidence = logits.softmax(-1)[torch.arange(len(labels)), class_ids].numpy()
    features = predict_batches(teacher, images, features=True).numpy()
    keep = []
    for c in range(10):
        rows = np.flatnonzero(labels == c)
        keep += [int(rows[i]) for i in select(confidence[rows], features[rows], ipc, params["floor"])]
    return images.numpy()[keep], labels[keep]


def real_set(arm: str, teacher, ipc: int, seed: int):
    """``random_real`` or ``herding`` set from the 55,000-image training pool."""
    from zoo.protovar.data import fmnist_splits
    from zoo.protovar.distill import herding

    images, labels = fmnist_splits()["train"]
    rng = np.random.default_rng(seed)
    keep = []
    for c in range(10):
        rows = np.flatnonzero(labels == c)
        if arm == "random_real":
            keep += rng.choice(rows, ipc, replace=False).tolist()
        else:
            features = _pool_features(id(teacher), teacher)[rows]
            keep += [int(rows[i]) for i in herding(features, ipc, seed)]
    return images[keep], labels[keep]


def distilled_set(arm: str, generator, teacher, ipc: int, seed: int, record: dict | None = None):
    if arm in ("random_real", "herding"):
        return real_set(arm, teacher, ipc, seed)
    return generated_set(generator, teacher, arm_params(arm, record), ipc, seed)


def student_accuracy(images, labels, teacher, seed: int, split: str = "test", limit=None, protocol=None) -> float:
    from zoo.protovar.data import fmnist_splits
    from zoo.protovar.student import accuracy, train_student

    student = train_student(images, labels, teacher, protocol or student_protocol(), seed)
    x, y = fmnist_splits()[split]
    return accuracy(student, x[:limit], y[:limit])


def tokenizer_scores(tokenizer_module, limit=None, split: str = "test") -> dict[str, float]:
    """Reconstruction MSE ([0, 1] units, 28x28) on ``split`` images and the fraction of the codebook they use."""
    import torch

    from zoo.protovar.data import fmnist_splits
    from zoo.protovar.tokenizer import to_model_range

    images = fmnist_splits()[split][0][:limit]
    tok = tokenizer_module.tokenizer
    errors, used = [], torch.zeros(tok.codebook.shape[0], dtype=torch.bool)
    with torch.no_grad():
        for start in range(0, len(images), 1000):
            x = to_model_range(torch.from_numpy(images[start : start + 1000]))
            codes = tok.encode(x)
            for c in codes:
                used[c.flatten()] = True
            errors.append((((tok.decode(codes) - x) / 2)[..., 2:30, 2:30] ** 2).mean((1, 2, 3)))
    return {"recon_mse": float(torch.cat(errors).mean()), "codebook_usage": float(used.float().mean())}


def teacher_forced_accuracy(generator, limit=None, split: str = "test") -> float:
    """Teacher-forced code accuracy of the VAR at the finest scale (8x8) on ``split`` images."""
    import torch

    from zoo.protovar.data import fmnist_splits
    from zoo.protovar.tokenizer import to_model_range

    images, labels = fmnist_splits()[split]
    images, labels = images[:limit], labels[:limit]
    hits = []
    with torch.no_grad():
        for start in range(0, len(images), 500):
            codes = generator.tokenizer.encode(to_model_range(torch.from_numpy(images[start : start + 500])))
            logits = generator.var(torch.from_numpy(labels[start : start + 500]), generator.tokenizer.var_inputs(codes))
            hits.append((logits[:, -64:].argmax(-1) == codes[-1].flatten(1)).float().mean(1))
    return float(torch.cat(hits).mean())


# ----------------------------------------------------------------------------------------------- measure


def _cache_file(arm: str, run) -> Path | None:
    folder = run.settings.get("cache_dir")
    if not folder:
        return None
    from zoo._registry import get_entry

    key = {
        "arm": arm,
        "seed": run.seed,
        "settings": {k: v for k, v in run.settings.items() if k != "cache_dir"},
        "tuning": tuning_record(),
        "pins": [  # the weights only: pinning the published distilled sets must not invalidate the results
            {k: v for k, v in get_entry(n).pretrained_cfg.sha256.items() if k in ("config.json", "model.safetensors")}
            for n in ("protovar.fmnist", "protovar.teacher", "protovar.tokenizer")
        ],
        "retrain": run.retrain,
        "weights": str(run.weights),
    }
    return piece_path(folder, f"{arm}-seed{run.seed}", key)


def measure(arm: str, run) -> dict[str, float]:
    return cached_piece(_cache_file(arm, run), lambda: _measure(arm, run))


def _measure(arm: str, run) -> dict[str, float]:
    import torch

    torch.set_num_threads(min(2, torch.get_num_threads()))
    limit = run.settings["test_limit"]
    generator, teacher = models(run)
    if arm == "tokenizer":
        tokenizer = _published("protovar.tokenizer") if not run.retrain else run.load("tokenizer")
        return tokenizer_scores(tokenizer, limit)
    if arm == "teacher":
        from zoo.protovar.data import fmnist_splits
        from zoo.protovar.student import accuracy

        x, y = fmnist_splits()["test"]
        return {"acc_full": accuracy(teacher, x[:limit], y[:limit])}
    protocol = student_protocol(steps=run.settings["student_steps"] or None)
    if arm == "full_data":
        from zoo.protovar.data import fmnist_splits

        images, labels = fmnist_splits()["train"]
        return {"acc_full": student_accuracy(images, labels, teacher, run.seed, limit=limit, protocol=protocol)}
    scores = {}
    for ipc in run.settings["ipcs"]:
        images, labels = distilled_set(arm, generator, teacher, ipc, run.seed)
        scores[f"acc_ipc{ipc}"] = student_accuracy(images, labels, teacher, run.seed, limit=limit, protocol=protocol)
    if arm == "protovar":  # the same for every seed: computed once per generator and test slice
        path = FEATURE_CACHE / f"tf_acc_scale8-{weights_digest(generator)[:16]}-{limit}.json"
        if not path.is_file():
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(json.dumps(teacher_forced_accuracy(generator, limit)))
        scores["tf_acc_scale8"] = json.loads(path.read_text())
    return scores


# ------------------------------------------------------------------------------------------------ claims


def _paired_mean(result: dict, metric: str, arm: str, other: str) -> float:
    per_seed = result["per_seed"]
    seeds = [s for s in per_seed[arm] if s in per_seed[other]]
    return float(np.mean([per_seed[arm][s][metric] - per_seed[other][s][metric] for s in seeds]))


def claims(result: dict) -> list[Claim]:
    out = []
    for ipc in result["settings"]["ipcs"]:
        metric = f"acc_ipc{ipc}"
        out.append(beats(result, metric, "protovar", "var_unguided", margin=0.03))
        out.append(beats(result, metric, "protovar", "random_real", margin=0.02))
        for ablation in ("protovar_noselect", "var_unguided_select"):
            out.append(
                Claim.at_least(
                    f"protovar_not_below_{ablation}_{metric}",
                    f"protovar is not below {ablation} on {metric} (mean paired gain >= 0)",
                    _paired_mean(result, metric, "protovar", ablation),
                    0.0,
                    ablation,
                )
            )
    if 10 in result["settings"]["ipcs"]:
        arms = result["arms"]
        best_real = max(arms["random_real"]["acc_ipc10"], arms["herding"]["acc_ipc10"])
        out.append(
            Claim.at_least(
                "headroom_full_data_over_best_real_ipc10",
                "full_data acc_full is >= 5 points above the better of random_real and herding at IPC 10 "
                "(else the setting is saturated)",
                arms["full_data"]["acc_full"] - best_real,
                0.05,
            )  # no `versus`: a check of the setting, not a comparison of the method with full_data
        )
    return out


# --------------------------------------------------------------------------------------- pretrained, plot


def score_pretrained(module, limit: int | None = None) -> dict[str, float]:
    """The teacher's accuracy, the tokenizer's reconstruction, or the VAR's teacher-forced accuracy at scale 8."""
    from zoo.protovar.module import TeacherModule

    if isinstance(module, TeacherModule):
        from zoo.protovar.data import fmnist_splits
        from zoo.protovar.student import accuracy

        x, y = fmnist_splits()["test"]
        return {"acc_full": accuracy(module.net, x[:limit], y[:limit])}
    if module.hparams.stage == "tokenizer":
        return tokenizer_scores(module, limit)
    return {"tf_acc_scale8": teacher_forced_accuracy(module, limit)}


def export_distilled(folder: str | Path, seed: int = 0) -> list[Path]:
    """Write the ``protovar`` arm's IPC 1 and 10 sets of ``seed`` (published models, tuned settings) to ``folder``.

    Each ``distilled_ipc<N>.safetensors`` holds ``images`` (uint8 [10 N, 28, 28]), ``labels`` and ``soft_labels``
    (the teacher's softmax at T = 4 of the un-augmented images); its metadata holds the student protocol (the
    evaluation relabels every augmented batch with the teacher, as written there) and the generator settings.
    """
    import torch
    from safetensors.torch import save_file

    from zoo.protovar.student import predict_batches

    generator, teacher = _published("protovar.fmnist"), _published("protovar.teacher").net
    protocol = student_protocol()
    paths = []
    for ipc in (1, 10):
        images, labels = distilled_set("protovar", generator, teacher, ipc, seed)
        soft = (predict_batches(teacher, images) / protocol.temperature).softmax(-1)
        metadata = {
            "arm": "protovar",
            "seed": str(seed),
            "ipc": str(ipc),
            "generator": json.dumps(arm_params("protovar")),
            "student_protocol": json.dumps(asdict(protocol)),
            "student_note": "train_student(images, labels, teacher, protocol, seed) in zoo/protovar/student.py: "
            "soft labels are the teacher's logits of each augmented batch at T; soft_labels here are of the "
            "un-augmented images",
        }
        tensors = {
            "images": torch.from_numpy(np.ascontiguousarray(images)),
            "labels": torch.from_numpy(np.asarray(labels, dtype=np.int64)),
            "soft_labels": soft.float().contiguous(),
        }
        path = Path(folder) / f"distilled_ipc{ipc}.safetensors"
        save_file(tensors, str(path), metadata=metadata)
        paths.append(path)
    return paths


def plot(result: dict, axes) -> None:
    """Student accuracy per arm at IPC 1 and 10, with full_data and the teacher as lines."""
    from zoo._figures import bar_panel

    for ax, ipc in zip(axes, result["settings"]["ipcs"][:2], strict=False):
        metric = f"acc_ipc{ipc}"
        bar_panel(
            ax, result, metric, arms=[a for a in ARMS_ORDER if a in result["arms"]], ylabel=f"test accuracy, IPC {ipc}"
        )
        for arm, style in (("full_data", "--"), ("teacher", ":")):
            if arm in result["arms"]:
                ax.axhline(result["arms"][arm]["acc_full"], linestyle=style, color="black")
        ax.set_title("dashed: full_data student, dotted: teacher", fontsize=7)
