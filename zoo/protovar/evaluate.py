"""``zoo eval protovar``: ProtoVAR's distilled sets against real-image and unguided-VAR sets, one student protocol.

Per seed (setup: card.md), each set arm builds a distilled set at every IPC of ``ipcs`` and a fresh soft-label
student (:class:`~zoo.protovar.student.StudentProtocol`) trains on it: ``acc_ipc<N>`` is its accuracy on the first
``test_limit`` test images; ``full_data`` and ``teacher`` report ``acc_full``, ``tokenizer`` ``recon_mse`` and
``codebook_usage``. Generator settings and the student's lr come from validation (``tuning.json``).

``reference_recon_real`` is the ceiling of any generator on the tokenizer: the ``random_real`` draws passed
through it (encode, decode), then the same student. Two arms carry the gates' validation numbers (all 5,000
validation images, never the test split): ``reference_recon_real`` the tokenizer's (``val_teacher_acc_recon``:
the teacher on reconstructed validation images; ``val_acc_ipc10``: its IPC-10 student on validation), and
``reference_val_students`` the real-image IPC-10 students and the full-data student on validation, against which
the tokenizer gate (recon within ``RECON_GAP`` of real) and the student-headroom gate (full data ``HEADROOM``
above the best real IPC-10 set) are checked seed by seed.
"""

from __future__ import annotations

import json
import os
from dataclasses import replace
from functools import partial
from pathlib import Path

import numpy as np

from zoo.eval import Arm, Claim, Protocol, Setting, Step, Tuning, beats, paired_gains

TUNING_FILE = Path(__file__).with_name("tuning.json")
GENERATIVE = ("protovar", "var_unguided", "protovar_noselect", "var_unguided_select")
REAL = ("random_real", "herding")
#: The gates (issue 64), checked on validation: the teacher's accuracy on reconstructed images, a student on the
#: reconstructed random-real IPC-10 set at most RECON_GAP below one on the real images, full data HEADROOM above
#: the better real IPC-10 set.
GATE_IPC, MIN_TEACHER_RECON, RECON_GAP, HEADROOM = 10, 0.85, 0.03, 0.05
#: The generator reaches its tokenizer's ceiling: protovar at most this far below reference_recon_real.
CEILING_GAP = 0.02
#: Validation images the gates' students and the teacher are scored on (None: all 5,000).
VAL_LIMIT = None
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
    protocol = StudentProtocol(**record.get("student", {}).get("best", {}))
    return replace(protocol, steps=steps) if steps else protocol


def _tunings() -> dict[str, Tuning]:
    record = tuning_record()
    student = record.get("student", {})
    shared = f"; student protocol (every arm): {student.get('note', 'the defaults')}, grid {student.get('grid', {})}"
    tuned = record.get("arms", {}).items()
    out = {arm: Tuning("validation", info["grid"], info["trials"], info["note"] + shared) for arm, info in tuned}
    fixed = (*REAL, "full_data", "reference_recon_real", "reference_val_students")
    return out | dict.fromkeys(fixed, Tuning("none", {}, 0, "no generator settings" + shared))


def model(run, arm: str):
    """An entry's model (``protovar``, ``teacher``, ``tokenizer``): the published one for every seed, a fit of its
    recipe with ``--retrain``, the ``--weights`` folder for the generator."""
    import zoo

    if arm == "protovar" and run.weights is not None:
        return zoo.load_folder(run.weights).eval()
    return (run.fit(run.entry(arm).pretrained_cfg.recipe) if run.retrain else run.published(arm)).eval()


def models(run) -> tuple:
    """(generator, teacher CNN) of this run, shared by its arms."""
    return run.memo("models", lambda: (model(run, "protovar"), fast_teacher(model(run, "teacher").net)))


def fast_teacher(teacher):
    """The teacher in eval mode with channels-last weights (~1.6x faster convolutions on CPU, same logits)."""
    import torch

    return teacher.eval().to(memory_format=torch.channels_last)


def pool_features(teacher) -> np.ndarray:
    """The teacher's penultimate features of the 55,000-image training pool (herding): computed once per teacher
    and kept in the paper's data cache, keyed by a digest of the teacher's weights."""
    from zoo._paths import cache_dir
    from zoo._serialization import weights_digest
    from zoo.protovar.data import fmnist_splits
    from zoo.protovar.student import predict_batches

    path = cache_dir("protovar") / f"pool_features-{weights_digest(teacher)[:16]}.npy"
    if not path.is_file():
        features = predict_batches(teacher, fmnist_splits()["train"][0], features=True).numpy()
        partial_file = path.with_name(f".{path.stem}.{os.getpid()}.npy")
        np.save(partial_file, features)
        os.replace(partial_file, path)  # a worker never reads half a file
    return np.load(path)


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
    sampler = {key: params[key] for key in ("top_k", "temperature", "cfg")}
    guided = ipc if params["guided"] else None
    images = generator.generate(
        class_ids, seed=1000 * seed + ipc, ipc=guided, index=index, beta=beta, gamma=gamma, **sampler
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
    features = pool_features(teacher) if arm == "herding" else None
    keep = []
    for c in range(10):
        rows = np.flatnonzero(labels == c)
        if arm == "random_real":
            keep += rng.choice(rows, ipc, replace=False).tolist()
        else:
            keep += [int(rows[i]) for i in herding(features[rows], ipc, seed)]
    return images[keep], labels[keep]


def distilled_set(arm: str, generator, teacher, ipc: int, seed: int, record: dict | None = None):
    if arm in REAL:
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

    images, labels = (array[:limit] for array in fmnist_splits()[split])
    hits = []
    with torch.no_grad():
        for start in range(0, len(images), 500):
            codes = generator.tokenizer.encode(to_model_range(torch.from_numpy(images[start : start + 500])))
            logits = generator.var(torch.from_numpy(labels[start : start + 500]), generator.tokenizer.var_inputs(codes))
            hits.append((logits[:, -64:].argmax(-1) == codes[-1].flatten(1)).float().mean(1))
    return float(torch.cat(hits).mean())


def teacher_accuracy(teacher, limit=None) -> dict[str, float]:
    from zoo.protovar.data import fmnist_splits
    from zoo.protovar.student import accuracy

    x, y = fmnist_splits()["test"]
    return {"acc_full": accuracy(teacher, x[:limit], y[:limit])}


def reconstruct(tokenizer_module, images, batch: int = 1000) -> np.ndarray:
    """uint8 images [N, 28, 28] through the tokenizer (encode to codes, decode): uint8 [N, 28, 28]."""
    images = np.asarray(images)
    if len(images) == 0:
        return images.astype(np.uint8)
    return np.concatenate(
        [tokenizer_module.reconstruct(images[i : i + batch]).numpy() for i in range(0, len(images), batch)]
    )


def teacher_on_reconstructions(tokenizer_module, teacher, split: str = "val", limit=None) -> dict[str, float]:
    """The teacher's accuracy on ``split`` images reconstructed by the tokenizer and on the originals."""
    from zoo.protovar.data import fmnist_splits
    from zoo.protovar.student import accuracy

    x, y = (array[:limit] for array in fmnist_splits()[split])
    return {"acc_recon": accuracy(teacher, reconstruct(tokenizer_module, x), y), "acc_real": accuracy(teacher, x, y)}


def recon_real_scores(run) -> dict[str, float]:
    """``reference_recon_real``: per IPC the ``random_real`` draws of this seed, reconstructed by the generator's
    frozen tokenizer, train one student (test accuracy ``acc_ipc<N>``). On validation: the IPC-10 student
    (``val_acc_ipc10``), the teacher on reconstructed and on real validation images (``val_teacher_acc_recon``,
    ``val_teacher_acc_real``)."""
    from zoo.protovar.data import fmnist_splits
    from zoo.protovar.student import accuracy, train_student

    limit, (generator, teacher) = run.settings["test_limit"], models(run)
    protocol = student_protocol(steps=run.settings["student_steps"] or None)
    splits = fmnist_splits()
    test, val = ((x[:lim], y[:lim]) for (x, y), lim in ((splits["test"], limit), (splits["val"], VAL_LIMIT)))
    scores = {}
    for ipc in sorted({*run.settings["ipcs"], GATE_IPC}):
        images, labels = real_set("random_real", teacher, ipc, run.seed)
        student = train_student(reconstruct(generator, images), labels, teacher, protocol, run.seed)
        if ipc in run.settings["ipcs"]:
            scores[f"acc_ipc{ipc}"] = accuracy(student, *test)
        if ipc == GATE_IPC:
            scores[f"val_acc_ipc{ipc}"] = accuracy(student, *val)
    teacher_val = run.memo(
        "teacher_on_val_recon", lambda: teacher_on_reconstructions(generator, teacher, "val", VAL_LIMIT)
    )
    return {
        **scores,
        "val_teacher_acc_recon": teacher_val["acc_recon"],
        "val_teacher_acc_real": teacher_val["acc_real"],
    }


def val_student_scores(run) -> dict[str, float]:
    """``reference_val_students``: the students of the gates on validation: ``random_real`` and ``herding`` at
    IPC 10 (the same sets and students as those arms' at this seed) and ``full_data``."""
    from zoo.protovar.data import fmnist_splits

    _, teacher = models(run)
    protocol = student_protocol(steps=run.settings["student_steps"] or None)
    score = partial(student_accuracy, teacher=teacher, seed=run.seed, split="val", limit=VAL_LIMIT, protocol=protocol)
    scores = {f"val_acc_{arm}_ipc{GATE_IPC}": score(*real_set(arm, teacher, GATE_IPC, run.seed)) for arm in REAL}
    return {**scores, "val_acc_full": score(*fmnist_splits()["train"])}


def gate_claims(per_seed: dict) -> list[Claim]:
    """The three validation gates (kind ``headroom``), each on every seed that measured both of its arms."""
    recon, val = per_seed.get("reference_recon_real", {}), per_seed.get("reference_val_students", {})
    both = [seed for seed in recon if seed in val]
    out = []
    if recon:
        text = f"tokenizer gate: the teacher's accuracy on reconstructed validation images is >= {MIN_TEACHER_RECON}"
        values = {f"seed {s}": scores["val_teacher_acc_recon"] for s, scores in recon.items()}
        out.append(Claim.gate("gate_teacher_on_reconstructions_val", text, values, MIN_TEACHER_RECON,
                              arm="reference_recon_real"))  # fmt: skip
    if both:
        key = f"val_acc_ipc{GATE_IPC}"
        text = (f"tokenizer gate: a student on the reconstructed random-real IPC-{GATE_IPC} set is at most "
                f"{100 * RECON_GAP:.0f} points below one on the real images (validation)")  # fmt: skip
        gaps = {f"seed {s}": recon[s][key] - val[s][f"val_acc_random_real_ipc{GATE_IPC}"] for s in both}
        out.append(Claim.gate("gate_student_on_reconstructions_val", text, gaps, -RECON_GAP,
                              arm="reference_recon_real", versus="random_real"))  # fmt: skip
    if val:
        text = (f"student headroom: full_data is >= {100 * HEADROOM:.0f} points above the better of random_real and "
                f"herding at IPC {GATE_IPC} on validation")  # fmt: skip
        gaps = {f"seed {s}": v["val_acc_full"] - max(v[f"val_acc_{arm}_ipc{GATE_IPC}"] for arm in REAL)
                for s, v in val.items()}  # fmt: skip
        out.append(Claim.gate("headroom_full_data_over_best_real_ipc10_val", text, gaps, HEADROOM, arm="full_data"))
    return out


def set_scores(arm: str, run) -> dict[str, float]:
    """One student per IPC on the arm's distilled set (``full_data``: one on the whole 55,000-image pool);
    ``protovar`` also reports its VAR's teacher-forced scale-8 code accuracy (the same for every seed)."""
    from zoo.protovar.data import fmnist_splits

    limit, (generator, teacher) = run.settings["test_limit"], models(run)
    protocol = student_protocol(steps=run.settings["student_steps"] or None)
    score = partial(student_accuracy, teacher=teacher, seed=run.seed, limit=limit, protocol=protocol)
    if arm == "full_data":
        return {"acc_full": score(*fmnist_splits()["train"])}
    scores = {f"acc_ipc{i}": score(*distilled_set(arm, generator, teacher, i, run.seed)) for i in run.settings["ipcs"]}
    if arm == "protovar":
        scores["tf_acc_scale8"] = teacher_forced_accuracy(generator, limit)
    return scores


def claims(result: dict) -> list[Claim]:
    out = []
    for ipc in result["settings"]["ipcs"]:
        metric = f"acc_ipc{ipc}"
        out.append(beats(result, metric, "protovar", "var_unguided", margin=0.03))
        out.append(beats(result, metric, "protovar", "random_real", margin=0.02))
        out.append(beats(result, metric, "protovar", "herding"))  # the strongest rule without a generator
        # the unguided VAR with the same selector: what the prototypes add, beyond the seed spread
        out.append(beats(result, metric, "protovar", "var_unguided_select"))
        gains = paired_gains(result, metric, "protovar", "protovar_noselect")
        text = f"protovar is not below protovar_noselect on {metric} (mean paired gain >= 0)"
        out.append(Claim.at_least(f"protovar_not_below_protovar_noselect_{metric}", text, sum(gains) / len(gains), 0.0,
                                  versus="protovar_noselect", arm="protovar"))  # fmt: skip
        if "reference_recon_real" in result["per_seed"]:  # the ceiling of any generator on this tokenizer
            gains = paired_gains(result, metric, "protovar", "reference_recon_real")
            text = (f"protovar is within {100 * CEILING_GAP:.0f} points of reference_recon_real on {metric} (mean "
                    f"paired gain >= -{CEILING_GAP})")  # fmt: skip
            out.append(Claim.at_least(f"protovar_reaches_reference_recon_real_{metric}", text, sum(gains) / len(gains),
                                      -CEILING_GAP, versus="reference_recon_real", arm="protovar"))  # fmt: skip
    if 10 in result["settings"]["ipcs"]:
        per_seed = result["per_seed"]
        gaps = {f"seed {s}": scores["acc_full"] - max(per_seed[arm][s]["acc_ipc10"] for arm in REAL)
                for s, scores in per_seed["full_data"].items()}  # fmt: skip
        text = ("full_data acc_full is >= 5 points above the better of random_real and herding at IPC 10 (else the "
                "setting is saturated)")  # fmt: skip
        out.append(Claim.gate("headroom_full_data_over_best_real_ipc10", text, gaps, HEADROOM, arm="full_data"))
    return out + gate_claims(result["per_seed"])


def score_pretrained(module, limit: int | None = None) -> dict[str, float]:
    """The teacher's accuracy, the tokenizer's reconstruction, or the VAR's teacher-forced accuracy at scale 8."""
    from zoo.protovar.module import TeacherModule

    if isinstance(module, TeacherModule):
        return teacher_accuracy(module.net, limit)
    if module.hparams.stage == "tokenizer":
        return tokenizer_scores(module, limit)
    return {"tf_acc_scale8": teacher_forced_accuracy(module, limit)}


def plot(result: dict, axes) -> None:
    """Student accuracy per arm at IPC 1 and 10 (reference_recon_real: the random-real draws through the tokenizer),
    with full_data and the teacher as lines."""
    from zoo._figures import bar_panel

    for ax, ipc in zip(axes, result["settings"]["ipcs"][:2], strict=False):
        metric = f"acc_ipc{ipc}"
        arms = [arm for arm in (*GENERATIVE, *REAL, "reference_recon_real") if arm in result["arms"]]
        bar_panel(ax, result, metric, arms=arms, ylabel=f"test accuracy, IPC {ipc}")
        for arm, style in (("full_data", "--"), ("teacher", ":")):
            ax.axhline(result["arms"][arm]["acc_full"], linestyle=style, color="black")
        ax.set_title("dashed: full_data student, dotted: teacher", fontsize=7)


def _arm(name: str, measure=None) -> Arm:
    return Arm(name, measure=measure or partial(set_scores, name))


PROTOCOL = Protocol(
    method=_arm("protovar"),
    baselines=(_arm("var_unguided"),),
    ablations=(_arm("protovar_noselect"), _arm("var_unguided_select")),
    references=(
        *map(_arm, REAL),
        _arm("full_data"),
        _arm("teacher", lambda run: teacher_accuracy(models(run)[1], run.settings["test_limit"])),
        _arm("tokenizer", lambda run: tokenizer_scores(model(run, "tokenizer"), run.settings["test_limit"])),
        _arm("reference_recon_real", recon_real_scores),
        _arm("reference_val_students", val_student_scores),
    ),
    settings={
        "ipcs": Setting([1, 10], "images per class of the distilled sets", minimum=1),
        "test_limit": Setting(10000, "first Fashion-MNIST test images scored (1 to 10000)", minimum=1),
        "student_steps": Setting(0, "student steps (0: the protocol's, from tuning.json)", minimum=0),
    },
    tuning=_tunings(),
    claims=claims,
    headline=("acc_ipc1", "acc_ipc10"),
    plot=plot,
    panels=2,
    score_pretrained=score_pretrained,
    lower_is_better=("recon_mse",),
    ceilings=("reference_recon_real",),
    steps=(
        Step("gate", ("python", "-m", "zoo.protovar.publish", "gate"), "tokenizer MSE < 0.02, usage >= 50%", "tune"),
        Step("tune", ("python", "-m", "zoo.protovar.tune"), "validation tuning -> zoo/protovar/tuning.json", "tune"),
        Step("distilled", ("python", "-m", "zoo.protovar.publish", "distilled"), "seed-0 sets into the card", "tune"),
    ),
)
