"""``zoo eval lavid``: LaViD against CE, KD, MaKD (class-level) and text-embedding regression, with ablations.

Per seed, every arm trains its students with the plain loop (:mod:`zoo.lavid.runs`) and scores their few-shot test
accuracy and, on the first ``spurious_seeds`` seeds, their worst-group and average accuracy on the composite set.
"""

from __future__ import annotations

import json
import time

from zoo.eval import Arm, Claim, Protocol, Setting, Step, Tuning, beats, mean_interval, paired_gains, per_seed_values
from zoo.eval.claims import rounded
from zoo.lavid.runs import TUNING_FILE

ARMS_ORDER = (
    "lavid", "ce", "kd", "makd", "text_emb", "shuffled", "lavid_hard", "reference_pixel_logreg", "reference_class_mean"
)  # fmt: skip


def _tuning() -> dict[str, Tuning]:
    """Each tuned arm's record: the few-shot grid and the spurious grid, trials summed over both."""
    if not TUNING_FILE.is_file():
        return {}
    record = json.loads(TUNING_FILE.read_text())
    spurious = record.get("spurious", {}).get("arms", {})
    extra = {
        "lavid": "; few-shot: 6 betas at ce's optimizer settings (zoo/lavid/tune.py); signature temperature by the "
        "entropy rule, not tuned",
        "ce": "; few-shot student (every arm): the 32-64-128 CNN with 2-pixel shifts and flips; composite-set student: "
        "the 16-32-64 CNN without augmentation",
        "makd": "; class-level answers S[y] (no VLM)",
        "reference_pixel_logreg": "; scikit-learn LogisticRegression (lbfgs) on the 784 raw pixels in [0, 1]",
        "reference_class_mean": "; nearest class mean on the raw pixels, means shrunk towards the overall mean",
    }
    out = {}
    for arm, info in record["arms"].items():
        grid = {f"fmnist.{k}": v for k, v in info["grid"].items()}
        trials, note = info["trials"], f"few-shot (10-shot validation accuracy): {info['note']}"
        if arm in spurious:
            grid.update({f"spurious.{k}": v for k, v in spurious[arm]["grid"].items()})
            trials += spurious[arm]["trials"]
            note += f"; spurious set (worst-group accuracy on validation composites): {spurious[arm]['note']}"
        out[arm] = Tuning("validation", grid, trials, note + extra.get(arm, ""))
    return out


def few_shot(arm: str, shots: int, seed: int, settings: dict) -> dict[str, float]:
    """Test accuracy of ``arm`` trained on ``shots`` images per class drawn with ``seed``."""
    from zoo.lavid.data import fmnist_eval, fmnist_few_shot
    from zoo.lavid.runs import train_arm
    from zoo.lavid.student import predict

    x, y = fmnist_few_shot(shots, seed)
    model = train_arm(arm, x, y, "fmnist", seed, settings)
    xt, yt = fmnist_eval("test", settings["test_limit"])
    correct = (predict(model, xt) == yt).float()
    return {"accuracy": float(correct.mean()), "accuracy_test2000": float(correct[:2000].mean())}


def spurious(arm: str, seed: int, settings: dict) -> tuple[float, float, list[float]]:
    """Worst-group accuracy, average accuracy and every group's accuracy of ``arm`` on the composite set."""
    from zoo.lavid.data import spurious_split
    from zoo.lavid.runs import train_arm
    from zoo.lavid.student import group_accuracies

    x, y, _ = spurious_split("train", seed, settings["spurious_size"], settings["correlation"], settings["alpha"])
    override = {"epochs": settings["spurious_epochs"]} if settings["spurious_epochs"] else {}
    model = train_arm(arm, x, y, "spurious", seed, settings, **override)
    xt, yt, gt = spurious_split("test", 0, 2000, alpha=settings["alpha"])
    return group_accuracies(model, xt, yt, gt)


def measure(arm: str, run) -> dict[str, float]:
    """One arm, one seed: its few-shot students, and on the first ``spurious_seeds`` seeds its spurious one."""
    settings, seed = run.settings, run.seed
    started = time.perf_counter()
    units = {shots: few_shot(arm, shots, seed, settings) for shots in settings["shots"]}
    scores = {f"acc_{shots}shot": unit["accuracy"] for shots, unit in units.items()}
    if seed in run.protocol.seeds[: settings["spurious_seeds"]]:
        worst, average, run.extras[f"{arm}_group_accs"] = spurious(arm, seed, settings)
        scores.update(worst_group_acc=worst, avg_acc_spurious=average)
    run.extras[f"{arm}_compute_s"] = round(time.perf_counter() - started, 2)
    if seed == run.protocol.published_seed and 10 in units and arm in ("lavid", "ce"):
        run.extras[f"{arm}_seed{seed}_10shot_acc_test2000"] = units[10]["accuracy_test2000"]
        if run.uses_published(arm):
            run.extras.update(_published_scores(arm, run, settings["test_limit"]))
    return scores


def measure_reference(arm: str, run) -> dict[str, float]:
    """A pixel reference (:mod:`zoo.lavid.references`), one seed: the students' few-shot draws and composite sets."""
    from zoo.lavid import references
    from zoo.lavid.data import fmnist_eval, fmnist_few_shot, spurious_split

    settings, seed = run.settings, run.seed
    started = time.perf_counter()
    xt, yt = fmnist_eval("test", settings["test_limit"])
    scores = {}
    for shots in settings["shots"]:
        x, y = fmnist_few_shot(shots, seed)
        scores[f"acc_{shots}shot"] = references.accuracy(references.fit_reference(arm, x, y), xt, yt)
    if seed in run.protocol.seeds[: settings["spurious_seeds"]]:
        x, y, _ = spurious_split("train", seed, settings["spurious_size"], settings["correlation"], settings["alpha"])
        rule = references.fit_reference(arm, x, y, "spurious")
        xs, ys, gs = spurious_split("test", 0, 2000, alpha=settings["alpha"])
        worst, average, run.extras[f"{arm}_group_accs"] = references.group_accuracies(rule, xs, ys, gs)
        scores.update(worst_group_acc=worst, avg_acc_spurious=average)
    run.extras[f"{arm}_compute_s"] = round(time.perf_counter() - started, 2)
    return scores


def _published_scores(arm: str, run, test_limit: int) -> dict[str, float]:
    """The published checkpoint of ``arm`` (the recipe's Lightning run of seed 0) on the test images: what the
    shipped weights do (it should equal the seed-0 student's ``<arm>_seed0_10shot_acc_test2000``)."""
    from zoo.lavid.data import fmnist_eval
    from zoo.lavid.student import accuracy

    model = run.published(arm)
    x, y = fmnist_eval("test", test_limit)
    return {
        f"{arm}_published_acc_10shot": accuracy(model.net, x, y),
        f"{arm}_published_acc_test2000": accuracy(model.net, x[:2000], y[:2000]),
    }


def _mean_gain(result: dict, metric: str, other: str) -> float:
    gains = paired_gains(result, metric, "lavid", other)
    return sum(gains) / len(gains)


def interval_claim(result: dict, metric: str, other: str) -> Claim:
    """LaViD's paired gain over ``other`` on ``metric`` has a 95% interval above 0 (value: the interval's low end)."""
    gains = paired_gains(result, metric, "lavid", other)
    if len(gains) < 2:  # a partial result (one seed so far): no interval yet
        text = f"lavid above {other} on {metric}: a 95% interval needs >= 2 seeds, {len(gains)} measured"
        return Claim(f"lavid_above_{other}_{metric}_ci95", text, rounded(gains[0]), 0.0, False, other, "paper", "lavid")
    mean, low, high = mean_interval(gains)
    text = (
        f"lavid above {other} on {metric}: mean paired gain {mean:+.4f}, 95% interval [{low:+.4f}, {high:+.4f}] "
        f"over {len(gains)} seeds, low end above 0"
    )
    return Claim(f"lavid_above_{other}_{metric}_ci95", text, rounded(low), 0.0, low > 0, other, "paper", "lavid")


def claims(result: dict) -> list[Claim]:
    """The spec's thresholds (accuracies in [0, 1]: 1.5 points is 0.015), headroom gates and the CPU budget."""
    settings, found = result["settings"], []
    for shots in settings["shots"]:
        metric = f"acc_{shots}shot"
        text = f"lavid >= makd on {metric} (mean paired difference >= 0)"
        found += [
            beats(result, metric, "lavid", "reference_pixel_logreg"),
            beats(result, metric, "lavid", "ce", margin=0.015),
            beats(result, metric, "lavid", "shuffled", margin=0.005),
            interval_claim(result, metric, "shuffled"),
            Claim.at_least(f"lavid_at_least_makd_{metric}", text, _mean_gain(result, metric, "makd"), 0.0,
                           versus="makd", arm="lavid"),
        ]  # fmt: skip
    ce = result["per_seed"]["ce"]
    if per_seed_values(result, "lavid", "worst_group_acc"):
        gap = {
            f"seed {s}": v["avg_acc_spurious"] - v["worst_group_acc"] for s, v in ce.items() if "worst_group_acc" in v
        }
        text = "lavid's average spurious accuracy at most 1 point below ce's"
        gain = _mean_gain(result, "avg_acc_spurious", "ce")
        found += [
            beats(result, "worst_group_acc", "lavid", "ce", margin=0.03),
            interval_claim(result, "worst_group_acc", "ce"),
            beats(result, "worst_group_acc", "lavid", "reference_pixel_logreg"),
            Claim.at_least("lavid_avg_spurious_within_1_of_ce", text, gain, -0.01, versus="ce", arm="lavid"),
            Claim.gate("headroom_ce_worst_group_gap", "headroom: ce's worst group at least 10 points below its "
                       "average", gap, 0.10, arm="ce"),
        ]  # fmt: skip
    if 10 in settings["shots"]:
        ce10 = {f"seed {s}": v["acc_10shot"] for s, v in ce.items()}
        text = "headroom: ce's 10-shot accuracy at most 85%"
        found.append(Claim.gate("headroom_ce_10shot", text, ce10, 0.85, at_most=True, arm="ce"))
    compute = sum(v for seed in result["seeds"] for k, v in result["extras"].get(str(seed), {}).items()
                  if k.endswith("_compute_s"))  # fmt: skip
    text = "the evaluation's training and scoring take at most 40 minutes on 2 cores (sum of the pieces' seconds)"
    found.append(Claim.at_most("eval_compute_minutes", text, compute / 60, 40.0, kind="validity", arm="lavid"))
    return found


def score_pretrained(module, limit: int | None = None) -> dict[str, float]:
    """Test accuracy of a loaded 10-shot student on the first ``limit`` test images."""
    from zoo.lavid.data import fmnist_eval
    from zoo.lavid.student import accuracy

    x, y = fmnist_eval("test", limit)
    return {"acc_10shot": accuracy(module.net, x, y)}


def plot(result: dict, axes) -> None:
    """Mean +- std of every arm on the four headline metrics."""
    import numpy as np

    metrics = [f"acc_{s}shot" for s in result["settings"]["shots"]] + ["worst_group_acc", "avg_acc_spurious"]
    arms = [a for a in ARMS_ORDER if a in result["arms"]]
    width = 0.8 / len(arms)
    ax = axes[0]
    for i, arm in enumerate(arms):
        values = [result["arms"][arm].get(m, np.nan) for m in metrics]
        errors = [result["arms"][arm].get(m + "_std", 0.0) for m in metrics]
        ax.bar(np.arange(len(metrics)) + i * width, values, width, yerr=errors, label=arm, capsize=2)
    ax.set_xticks(np.arange(len(metrics)) + 0.4 - width / 2, metrics, fontsize=7)
    ax.set(ylabel="accuracy (mean ± std over seeds)", xlabel="metric", ylim=(0.0, 1.0))
    ax.legend(fontsize=6, ncol=4)


def _arm(name: str) -> Arm:
    return Arm.scored(name, measure)


PROTOCOL = Protocol(
    method=_arm("lavid"),
    baselines=(_arm("makd"), _arm("text_emb")),
    ablations=(_arm("shuffled"), _arm("lavid_hard")),
    references=(
        _arm("ce"),
        _arm("kd"),
        Arm.scored(
            "reference_pixel_logreg",
            measure_reference,
            "multinomial logistic regression on raw pixels, C tuned on validation",
        ),
        Arm.scored(
            "reference_class_mean",
            measure_reference,
            "nearest class mean on raw pixels, shrinkage towards the overall mean tuned on validation",
        ),
    ),  # fmt: skip
    settings={
        "shots": Setting([5, 10], "few-shot levels (images per class)", minimum=1),
        "spurious_seeds": Setting(16, "the spurious set runs on the first this-many seeds", minimum=0),
        "spurious_size": Setting(1000, "training images of the spurious set", minimum=100),
        "spurious_epochs": Setting(
            0, "epochs on the spurious set (batch 16); 0: each arm's validation-tuned epochs", minimum=0
        ),
        "correlation": Setting(0.95, "P(brick | footwear) = P(grass | top) in the spurious training set"),
        "alpha": Setting(0.6, "garment opacity over the background (set on validation composites so the cue bites)"),
        "teacher_size": Setting(10000, "composites the spurious KD teacher is trained on", minimum=100),
        "test_limit": Setting(
            5000, "first Fashion-MNIST test images scored (1 to 10000; 5000 for the CPU budget)", minimum=1
        ),
    },
    tuning={
        **_tuning(),
        **{
            arm: Tuning("validation", {}, 0, "lavid's validation-chosen settings (an ablation changes one part)")
            for arm in ("shuffled", "lavid_hard")
        },
    },
    claims=claims,
    plot=plot,
    score_pretrained=score_pretrained,
    seeds=tuple(range(16)),
    headline=("acc_5shot", "acc_10shot", "worst_group_acc"),
    steps=(
        Step(
            "tune",
            ("python", "-m", "zoo.lavid.tune"),
            "validation-only tuning of every arm on the few-shot and the spurious validation data: writes tuning.json, "
            "whose choices the recipes copy and the evaluation reads",
        ),
    ),
)
