"""``zoo eval aporia``: APORIA-LP against tuned baselines and label-free references on SOCRATES-mini.

Data: the published SOCRATES-mini artifact (``hub_cards/aporia.socrates_mini/socrates_mini_seed<S>.npz``, sha256
checked on load). ``dataset_seed = -1`` (default): protocol seed s evaluates dataset seed s (0, 1, 2 are
published: three independently sampled datasets from the six published generators); a value >= 0 fixes one
dataset for every seed (an unpublished one is sampled, minutes of CPU). The seed also varies the folds, label
draws and tuning splits.

Folds are answer-grouped (``grouped``, default on; :func:`zoo.aporia.protocol.grouped_folds`): all copies of
one answer string share a test part, so no test answer is a verbatim copy of a labelled one. With stratified
folds (``--set grouped=false``, the first release's protocol) 40 labels cover the whole training part of a
50-answer pair and tuned logistic regression reaches 0.99 F1 by looking the strings up (issue 18's headroom
gate). This was chosen on validation parts of dataset 0 (inside fold 0's training part), before any test
fold was scored.
Only well-formed answers are labelled (parseable, right type; hallucinated = right type, wrong value); the
malformed rate is a separate slice on the ``gen_*`` arms. With ``--retrain`` each seed rebuilds its dataset
from generators trained with that seed.

All classifier arms see the same pairs, folds, class-balanced label draws (from the seed) and test points;
F1 (hallucinated = positive) is the mean over pairs and draws of each pair's cross-validated F1 (grouped
folds; stratified: the mean over folds), with a 95% bootstrap interval
over (model, prompt) pairs (``_ci_low``/``_ci_high``; the card shows the mean over seeds of each seed's
bounds). Each tuned arm (APORIA-LP's lambda and every baseline's hyperparameter, five values each: the same
budget, ``tuning_trials``) is chosen per seed and fold on validation points inside that fold's training part
(``tune_pair``: ``labels`` labels, ``tune_draws`` draws); the choices are in ``extras``. ``aporia_lp`` also carries
the tightness test (within-class cosine spread G < H, pooled permutation p-value).
Ablations: ``centroid`` (no Wasserstein rule), ``aporia_lp_self_training`` (the reconstructed propagation).
References: ``reference_majority_vote`` (no labels: H iff the label-free parsed answer differs from the pair's
most common one), ``reference_nearest_mean`` (nearest labelled class mean of the raw embeddings). ``gen_*`` are
the generator LMs behind the data (listed as ablations: the harness has no role for them).
"""

from __future__ import annotations

import numpy as np

from zoo._eval import Claim, Protocol, Setting, Tuning, beats
from zoo.aporia.data import pair_seed
from zoo.aporia.protocol import (
    TUNED_FIELD,
    ProtocolConfig,
    answer_groups,
    choose_per_fold,
    evaluate_pair,
    tune_pair,
)

GENERATORS = ("gen_gpt2_xs", "gen_qwen2_xs", "gen_gpt2_s", "gen_llama_xs", "gen_neox_s", "gen_llama_s")
GRIDS = {
    "aporia_lp": (0.1, 0.3, 1.2, 3.0, 10.0),  # lambda (the spec's 1.2 in the middle)
    # C (sklearn's): the answers are linearly separable, so the fit wants little regularisation; on the first
    # release 1e5, then the grid's top, won 14 of 15 folds; the grid moved up while its top kept winning: with
    # 1e3-1e7, 1e7 won 11 of 15 folds (F1 0.952 at 40 labels), with 1e5-1e9, 1e9 won 9 of 15 (F1 0.957)
    "logreg": (1e6, 1e7, 1e8, 1e9, 1e10),
    "knn": (1, 3, 5, 7, 9),  # k
    "label_spreading": (10.0, 20.0, 50.0, 100.0, 200.0),  # RBF gamma: the kernel's width
    "self_consistency": (0.8, 0.9, 0.95, 0.975, 0.99),  # cosine threshold
    "semantic_entropy": (0.2, 0.4, 0.6, 0.8, 1.0),  # cluster share (relative to the largest) below which H
}
LABEL_FREE = ("reference_majority_vote",)  # references of the headroom gate: no labels at all
_CHOSEN = "per seed and fold: best mean validation F1 over pairs inside that fold's training part (extras[seed].tuned)"
PROTOCOL = Protocol(
    method="aporia_lp",
    baselines=("logreg", "knn", "label_spreading", "self_consistency", "semantic_entropy"),
    ablations=("centroid", "aporia_lp_self_training", *GENERATORS),
    references=("reference_majority_vote", "reference_nearest_mean"),
    settings={
        "labels": Setting(40, "label budget of the headline f1_at_<labels>_labels and of the tuning", minimum=2),
        "budgets": Setting([10, 20, 40], "label budgets of the F1-vs-budget curve", minimum=2),
        "folds": Setting(5, "stratified folds per pair (test fraction 1/folds)", minimum=2),
        "draws": Setting(1, "random label draws per fold (the folds and 3 seeds give 15 draws per pair)", minimum=1),
        "tune_draws": Setting(1, "label draws per fold on the validation split when tuning", minimum=1),
        "permutations": Setting(2000, "label shuffles of the tightness permutation test", minimum=1),
        "bootstrap": Setting(1000, "bootstrap resamples of the (model, prompt) pairs for the 95% intervals", minimum=1),
        "dataset_seed": Setting(
            -1,
            "SOCRATES-mini sampling seed; -1 = each protocol seed's own (0, 1, 2 are published; others are built)",
            minimum=-1,
        ),
        "grouped": Setting(True, "answer-grouped folds (no test answer copies a labelled one); false = stratified"),
        "max_pairs": Setting(0, "evaluate only the first pairs of each generator (0 = all; quick looks)", minimum=0),
        "workers": Setting(2, "processes the pairs are spread over", minimum=1),
    },
    tuning={
        **{arm: Tuning("validation", {TUNED_FIELD[arm]: grid}, len(grid), _CHOSEN) for arm, grid in GRIDS.items()},
        "centroid": Tuning("validation", {}, 0, "the lambda chosen for aporia_lp"),
        "aporia_lp_self_training": Tuning("validation", {}, 0, "the lambda chosen for aporia_lp; 3 rounds (spec)"),
        "reference_majority_vote": Tuning("none", {}, 0, "no hyperparameters, no labels"),
        "reference_nearest_mean": Tuning("none", {}, 0, "no hyperparameters"),
    },
    headline=("f1_at_40_labels",),
    panels=2,
)
_DATA: dict = {}  # (dataset, generators, greedy accuracies) by seed, built once per process
_GREEDY: dict[str, float] = {}  # greedy accuracy of each published generator (whatever the dataset seed)


def _data(run):
    import zoo
    from zoo.aporia.dataset import PUBLISHED_SEEDS, SocratesConfig, published, socrates_mini

    fixed = run.settings["dataset_seed"]
    data_seed = run.seed if run.retrain or fixed < 0 else fixed
    key = (run.seed if run.retrain else None, data_seed)
    if key not in _DATA:
        names = [f"aporia.{a}" for a in GENERATORS]
        if run.retrain:
            generators = {f"aporia.{a}": run.load(a) for a in GENERATORS}
            dataset = socrates_mini(SocratesConfig(seed=data_seed), generators=generators)
        elif data_seed in PUBLISHED_SEEDS:
            generators, dataset = {}, published(data_seed)
        else:
            generators = {name: zoo.load(name, pretrained=True) for name in names}
            dataset = socrates_mini(SocratesConfig(seed=data_seed), generators=generators)
        _DATA[key] = (dataset, generators, {})
    return _DATA[key]


def _pairs(dataset, max_pairs: int) -> list[int]:
    """Indices of the pairs evaluated: all, or the first ``max_pairs`` of each generator."""
    if not max_pairs:
        return list(range(len(dataset)))
    seen: dict[str, int] = {}
    chosen = []
    for i, pair in enumerate(dataset.pairs):
        seen[pair["model"]] = seen.get(pair["model"], 0) + 1
        if seen[pair["model"]] <= max_pairs:
            chosen.append(i)
    return chosen


def bootstrap_interval(values: np.ndarray, resamples: int, seed: int, level: float = 0.95) -> tuple[float, float]:
    """Percentile bootstrap interval of the mean of ``values`` (one value per (model, prompt) pair).

    Args:
        values: Per-pair scores.
        resamples: Bootstrap resamples.
        seed: Seed of the resampling.
        level: Coverage of the interval.
    """
    values = np.asarray(values, dtype=np.float64)
    rng = np.random.default_rng(seed)
    means = values[rng.integers(0, len(values), (resamples, len(values)))].mean(1)
    low, high = np.quantile(means, [(1 - level) / 2, (1 + level) / 2])
    return float(low), float(high)


def _map(function, jobs: list[tuple], workers: int) -> list:
    """``function(*job)`` per job, in spawned processes (no fork of a torch process) with one BLAS thread each."""
    from concurrent.futures import ProcessPoolExecutor
    from multiprocessing import get_context

    if workers <= 1:
        return [function(*job) for job in jobs]
    with ProcessPoolExecutor(workers, get_context("spawn"), _one_blas_thread) as pool:
        return list(pool.map(function, *zip(*jobs), chunksize=4))


def _one_blas_thread() -> None:
    """The fits are tiny, so BLAS threads only oversubscribe the cores; threadpoolctl limits loaded libraries only."""
    import sklearn.semi_supervised  # noqa: F401  (loads numpy's and scipy's BLAS)
    from threadpoolctl import threadpool_limits

    threadpool_limits(1)


def _classifiers(run) -> dict[str, dict[str, float]]:
    from zoo.aporia.geometry import tightness_test

    dataset, s = _data(run)[0], run.settings
    budgets = sorted({*s["budgets"], s["labels"]})
    config = ProtocolConfig(budgets=tuple(budgets), splits=s["folds"], draws=s["draws"], seed=run.seed)
    chosen = _pairs(dataset, s["max_pairs"])
    answers = {i: dataset.pair_answers(i) for i in chosen}
    groups = {i: answer_groups(dataset.pair_responses(i)) if s["grouped"] else None for i in chosen}
    pairs = {i: (*dataset.pair_arrays(i), config, pair_seed(run.seed, i)) for i in chosen}
    jobs = [(*pairs[i], GRIDS, s["labels"], s["tune_draws"], answers[i], groups[i]) for i in chosen]
    tuned = _map(tune_pair, jobs, s["workers"])
    folds, run.extras["tuned"] = choose_per_fold(config, GRIDS, tuned)
    arms = [arm for arm in PROTOCOL.arms if arm not in GENERATORS]
    f1 = _map(evaluate_pair, [(*pairs[i], arms, answers[i], folds, groups[i]) for i in chosen], s["workers"])
    scored = [p for p in f1 if not np.isnan(p["aporia_lp"]).all()]  # a pair with no F1 at all is left out
    run.extras |= {
        "dataset_seed": run.seed if s["dataset_seed"] < 0 else s["dataset_seed"],
        "pairs_scored": len(scored),
    }
    scores: dict[str, dict[str, float]] = {}
    for a in arms:
        scores[a] = {"tuning_trials": len(GRIDS.get(a, ()))}
        for b, budget in enumerate(budgets):
            per_pair = np.array([np.nanmean(p[a][..., b]) for p in scored])  # mean over folds and draws
            key = f"f1_at_{budget}_labels"
            low, high = bootstrap_interval(per_pair, s["bootstrap"], run.seed)
            scores[a] |= {key: float(per_pair.mean()), f"{key}_ci_low": low, f"{key}_ci_high": high}
    x_all, y_all = zip(*(pairs[i][:2] for i in chosen))
    run.extras["tightness"] = tight = tightness_test(x_all, y_all, s["permutations"], run.seed)
    scores["aporia_lp"] |= {k: tight[k] for k in ("tightness_gap", "tightness_p_value", "tightness_frac_pairs")}
    run.extras["pairs_evaluated"] = len(chosen)
    return scores


def measure(arm: str, run) -> dict[str, float]:
    if arm not in GENERATORS:
        return (run.cache.get("scores") or run.cache.setdefault("scores", _classifiers(run)))[arm]
    dataset, generators, greedy = _data(run)
    greedy = greedy if run.retrain else _GREEDY  # a published generator's greedy accuracy is one number
    name = f"aporia.{arm}"
    stats = dataset.models[name]
    if name not in greedy:
        if name not in generators:  # the published data came without loading the generators
            import zoo

            generators[name] = zoo.load(name, pretrained=True)
        greedy[name] = generators[name].greedy_accuracy()
    return {
        "greedy_accuracy": greedy[name],  # on 600 seeded facts: what the generator "knows"
        "sampled_accuracy": stats["probe_accuracy"],
        "malformed_rate": stats["malformed_rate"],  # the separate slice: answers left out of the pairs
        "probe_malformed_rate": stats["probe_malformed_rate"],
        "pairs_kept": stats["pairs_kept"],
        "kept_pairs_greedy_accuracy": stats["kept_greedy_accuracy"],  # greedy right, samples drift: "unstable"
        "kept_pairs_hallucination_rate": stats["kept_hallucination_rate"],
        "kept_pairs_near_miss_share": stats["kept_near_miss_share"],  # wrong values close to the true one
        "prompts_probed": stats["prompts_probed"],
    }


def claims(result: dict) -> list[Claim]:
    arms, labels = result["arms"], result["settings"]["labels"]
    key, lp = f"f1_at_{labels}_labels", result["arms"]["aporia_lp"]
    best = max((b for b in PROTOCOL.baselines if b in arms), key=lambda b: arms[b][key], default=None)
    free = max((r for r in LABEL_FREE if r in arms), key=lambda r: arms[r][key], default=None)
    out = [
        beats(result, key, "aporia_lp", "reference_majority_vote", margin=0.02),
        beats(result, key, "aporia_lp", "reference_nearest_mean", margin=0.02),
    ]
    if free:
        out.append(
            Claim.at_most(
                "headroom_label_free",
                f"headroom gate: the best label-free reference ({free}) scores at most 0.80 F1 with {labels} labels",
                arms[free][key],
                0.80,
                versus=free,
            )
        )
    if best:
        out.append(
            Claim.at_most(
                "headroom_tuned_baseline",
                f"headroom gate: the best tuned baseline ({best}) scores below 0.95 F1 with {labels} labels",
                arms[best][key],
                0.95 - 1e-9,
                versus=best,
            )
        )
        gap = lp[key] - arms[best][key]
        separate = lp[f"{key}_ci_low"] > arms[best][f"{key}_ci_high"]
        out.append(
            Claim(
                "aporia_lp_ahead_of_best_baseline",
                f"APORIA-LP >= 0.02 F1 above the best tuned baseline "
                f"({best}) with {labels} labels, 95% bootstrap intervals over pairs not overlapping "
                f"({lp[f'{key}_ci_low']:.3f}-{lp[f'{key}_ci_high']:.3f} vs "
                f"{arms[best][f'{key}_ci_low']:.3f}-{arms[best][f'{key}_ci_high']:.3f})",
                round(gap, 6),
                0.02,
                bool(gap >= 0.02 and separate),
                best,
            )
        )
    return out + [
        Claim.at_least("f1_at_labels", f"APORIA-LP mean F1 with {labels} labels per pair >= 0.90", lp[key], 0.90),
        Claim.at_most("tightness_p_value", "genuine answers tighter than hallucinated ones: permutation p < 0.01",
                      lp["tightness_p_value"], 0.01),
        Claim.at_least("tightness_frac_pairs", "genuine answers tighter in >= 70% of pairs",
                       lp["tightness_frac_pairs"], 0.70),
    ]  # fmt: skip


def plot(result: dict, axes) -> None:
    """F1 against the label budget per classifier arm (references dashed); the headline F1 per arm and seed."""
    from zoo._figures import bar_panel

    key, (curve, bars) = f"f1_at_{result['settings']['labels']}_labels", axes
    from itertools import cycle

    colours = cycle(
        ["tab:blue", "tab:orange", "tab:green", "tab:purple", "tab:brown", "tab:pink", "tab:gray", "tab:cyan",
         "tab:olive", "black"]
    )  # fmt: skip
    for arm, metrics in result["arms"].items():
        points = sorted(
            (int(k.split("_")[2]), v) for k, v in metrics.items() if k.startswith("f1_") and k.endswith("_labels")
        )
        if points:
            method = arm == result["settings"]["method"]
            style = {"lw": 2.5, "color": "tab:red", "zorder": 3} if method else {"lw": 1, "color": next(colours)}
            curve.plot(*zip(*points), marker="o", ms=3, ls="--" if arm.startswith("ref") else "-", label=arm, **style)
    curve.set(xlabel="labels per (model, prompt) pair", ylabel="F1 (hallucinated = positive)")
    curve.legend(fontsize=6, loc="lower right", ncol=2)
    bar_panel(bars, result, key, arms=[arm for arm in result["arms"] if key in result["arms"][arm]])
    bars.set_ylim(0.0, 1.0)


def score_pretrained(module, limit: int | None = None) -> dict[str, float]:
    """Detector: F1 of the published fits on the held-out answers of the first ``limit`` pairs; generator: greedy
    accuracy on the first ``limit`` (default 600) seeded facts."""
    if hasattr(module, "greedy_accuracy"):
        return {"greedy_accuracy": module.greedy_accuracy(limit or 600)}
    return {"f1_at_40_labels": module.heldout_f1(limit)}
