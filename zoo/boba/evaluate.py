"""``zoo eval boba``: BOBA-UCB against full-library greedy BO, random screening, the ablations and variants.

Every arm is one screening campaign per seed on the cap-14 amide library with the test oracle and the same oracle
budget: its recall of the exact top 1%, its surrogate inferences and its surrogate's Spearman on held-out molecules.
Beside the recipe's campaign: BOBA at other arm fractions m (the recall-versus-inference curve, the card's figure),
``full_greedy`` at BOBA's 30 epochs per round (equal training), UCB1 and greedy arm choice over many smaller
rounds (R chosen on validation), and ``reference_tanimoto_expand``, a search without learning from the same design.
"""

from __future__ import annotations

import dataclasses
import json

import numpy as np

from zoo._errors import ZooError
from zoo.boba.tune import (
    BOBA_GRID,
    FULL_GREEDY_GRID,
    MANY_ROUNDS_C,
    MANY_ROUNDS_GRID,
    MANY_ROUNDS_SEEDS,
    SEED_ARGS,
    TANIMOTO_GRID,
    TRIALS,
    TUNING_FILE,
    choose,
    full_greedy_trials,
    many_rounds_overrides,
)
from zoo.eval import Arm, Claim, Protocol, Setting, Step, Tuning, beats

METHOD = "boba_ucb"
HELDOUT_SEED = 2606
HELDOUT_SIZE = 2000
TUNED = json.loads(TUNING_FILE.read_text())
_FULL = TUNED["full_greedy"]
_NOTE = (
    "validation oracle (CDK2 ligands at even file positions), validation seeds "
    f"{TUNED.get('validation_seeds', [100])}; python -m zoo.boba.tune"
)

#: full_greedy's LightningCLI overrides on top of the boba recipe (which holds BOBA's tuned values).
FULL_GREEDY = (
    "--model.init_args.strategy=full_greedy",
    f"--model.init_args.acquisition_beta={_FULL['acquisition_beta']}",
    f"--model.init_args.epochs_per_round={_FULL['epochs_per_round']}",
)
EQUAL_EPOCHS = 30  # BOBA's epochs per round (the recipe's)


def _equal_epochs_beta() -> float:
    """full_greedy's beta at BOBA's epochs: the best validation recall among the grid's 30-epoch trials."""
    trials = full_greedy_trials()
    results = {
        key: runs
        for key, runs in TUNED["results"]["full_greedy"].items()
        if trials[int(key)]["epochs_per_round"] == EQUAL_EPOCHS
    }
    return choose("full_greedy", trials, results)["acquisition_beta"]


EQUAL_EPOCHS_BETA = _equal_epochs_beta()
#: full_greedy trained as long as BOBA (30 epochs per round), for recall and wall time at equal training.
FULL_GREEDY_EQUAL_EPOCHS = (
    "--model.init_args.strategy=full_greedy",
    f"--model.init_args.acquisition_beta={EQUAL_EPOCHS_BETA}",
    f"--model.init_args.epochs_per_round={EQUAL_EPOCHS}",
)
#: The recall-versus-inference curve: BOBA-UCB scoring these fractions m of the arms per round (0.1 is the method).
CURVE = {"boba_ucb_m05": 0.05, METHOD: 0.1, "boba_ucb_m20": 0.2, "boba_ucb_m40": 0.4}
#: The curve's point where "90% of full_greedy's recall at <= 25% of its inferences" is tested: the largest m of
#: the curve within the 25% budget (fixed before any test run; each acid arm holds 198 molecules, so m = 0.2 scores
#: 20% of the library).
CLAIM_ARM, INFERENCE_BUDGET, RECALL_RATIO = "boba_ucb_m20", 0.25, 0.9
#: Many smaller rounds (R chosen on validation, zoo.boba.tune --arm many_rounds): UCB1 against greedy arm choice.
MANY_ROUNDS = int(TUNED.get("many_rounds", {}).get("rounds", 18))
MANY_ROUNDS_EXPLORATION = float(TUNED.get("many_rounds", {}).get("exploration", 0.5))
TANIMOTO = TUNED.get("reference_tanimoto_expand", {"hits": 10, "aggregate": "max"})
#: Each ablation and variant: its override, and how it was tuned (BOBA's values with one component switched).
_VARIANTS = {
    "boba_random_arm": ("model.init_args.arm_rule=random", "boba_ucb's tuned values, arms chosen at random"),
    "boba_greedy_arm": ("model.init_args.arm_rule=greedy", "boba_ucb's tuned values with c = 0"),
    "boba_ucb_random_partition": (
        "data.init_args.partition=random",
        "boba_ucb's tuned values on the shuffled acid arms",
    ),
    "boba_ts": ("model.init_args.arm_rule=ts", "boba_ucb's tuned values; c is Thompson's posterior scale"),
    "boba_ucb_kmeans": ("data.init_args.partition=kmeans", "boba_ucb's tuned values on 50 k-means arms"),
}


def _arm(name: str, *overrides: str) -> Arm:
    return Arm(name, base=METHOD, overrides=overrides, timed=True)


def tanimoto_expand_scores(run) -> dict[str, float]:
    """``reference_tanimoto_expand`` for ``run.seed``: BOBA's design and budget, expansion from the best labels."""
    from zoo.boba.bandit import CampaignConfig
    from zoo.boba.evaluate_reference import tanimoto_expand
    from zoo.boba.library import LibrarySpec, load_library, recall

    settings, oracle = run.settings, run.settings["oracle"]
    library = run.memo(("library", 14), lambda: load_library(LibrarySpec(cap=14)))
    budget = CampaignConfig(
        strategy="random", rounds=settings["rounds"], batch_fraction=settings["batch_fraction"],
        initial_fraction=settings["initial_fraction"],
    )  # fmt: skip
    record = tanimoto_expand(library.fps, library.scores[oracle], library.acid, budget, run.seed, **TANIMOTO)
    labelled, batch = record["labelled"], record["batch"]
    rounds = range(budget.rounds, -1, -1)
    curve = [recall(labelled[: len(labelled) - i * batch], library.scores[oracle]) for i in rounds]
    run.extras.setdefault("recall_by_round", {})["reference_tanimoto_expand"] = curve
    return {
        "recall_top1pct": recall(labelled, library.scores[oracle]),
        "surrogate_inferences": 0.0,
        "oracle_calls": float(record["oracle_calls"]),
        "inference_fraction": 0.0,
        "campaign_s": float(record["campaign_seconds"]),
    }


def heldout_indices(size: int, labelled, n: int = HELDOUT_SIZE) -> np.ndarray:
    """A fixed slice of ``n`` molecules the campaign did not label (a seeded permutation, labelled ones skipped)."""
    order = np.random.default_rng(HELDOUT_SEED).permutation(size)
    order = order[~np.isin(order, np.asarray(labelled, dtype=np.int64))]
    return np.sort(order[:n])


def slice_arrays(cap: int, indices: np.ndarray, oracle: str = "test") -> tuple[np.ndarray, np.ndarray]:
    """Packed fingerprints and oracle scores of some products: from the cache when it exists, else enumerated."""
    from zoo.boba.library import AmideLibrary, LibrarySpec, library_folder, load_library, oracle_scores

    spec = LibrarySpec(cap=cap)
    if (library_folder(spec) / "info.json").is_file():
        library = load_library(spec)
        return library.fps[indices], library.scores[oracle][indices]
    products = AmideLibrary(spec).products(indices)
    return products["fps"], oracle_scores(products["fps"], products["heavy_atoms"], oracle)


def surrogate_spearman(module, cap: int, size: int, n: int = HELDOUT_SIZE, oracle: str = "test") -> float:
    """Spearman correlation of the module's ensemble mean with the oracle on the held-out slice."""
    from scipy.stats import spearmanr

    indices = heldout_indices(size, module.campaign_record["labelled"], n)
    fps, scores = slice_arrays(cap, indices, oracle)
    mean, _ = module.predict(fps)
    return float(spearmanr(mean, scores).statistic)


def score(arm: str, model, run) -> dict[str, float]:
    """One campaign of ``arm`` for ``run.seed``: recall of the exact top 1%, costs, the surrogate's Spearman."""
    from zoo.boba.library import LibrarySpec, load_library, recall

    record, cap, oracle = model.campaign_record, int(model.library_record["cap"]), run.settings["oracle"]
    library = run.memo(("library", cap), lambda: load_library(LibrarySpec(cap=cap)))
    if record["size"] != len(library) or record["oracle"] != oracle:
        raise ZooError(f"{arm}: campaign on {record['size']} / {record['oracle']}, expected {len(library)} / {oracle}")
    n0 = max(1, round(run.settings["initial_fraction"] * record["size"]))
    full = sum(record["size"] - n0 - r * record["batch"] for r in range(len(record["rounds"]) - 1))
    scores = {
        "recall_top1pct": recall(record["labelled"], library.scores[oracle]),
        "surrogate_inferences": float(record["surrogate_inferences"]),
        "oracle_calls": float(record["oracle_calls"]),
        "inference_fraction": record["surrogate_inferences"] / full,
        "campaign_s": float(record["campaign_seconds"]),
    }
    if record["config"]["strategy"] != "random":
        scores["surrogate_spearman"] = surrogate_spearman(model, cap, record["size"], run.settings["heldout"], oracle)
    rounds = range(len(record["rounds"]) - 1, -1, -1)
    curve = [recall(record["labelled"][: len(record["labelled"]) - i * record["batch"]], library.scores[oracle])
             for i in rounds]  # fmt: skip
    run.extras.setdefault("recall_by_round", {})[arm] = curve
    return scores


def claims(result: dict) -> list[Claim]:
    arms = result["arms"]
    method, full = arms[METHOD], arms["full_greedy"]
    out = [beats(result, "recall_top1pct", METHOD, "random", margin=0.05)]
    out.append(beats(result, "recall_top1pct", METHOD, "reference_tanimoto_expand", margin=0.05))
    ratio = method["surrogate_inferences"] / max(full["surrogate_inferences"], 1.0)
    text = "boba_ucb's surrogate inferences / full_greedy's <= 0.25"
    out.append(Claim.at_most("boba_ucb_inferences_vs_full_greedy", text, ratio, 0.25, versus="full_greedy", arm=METHOD))
    if CLAIM_ARM in arms:
        point = arms[CLAIM_ARM]
        ratio = point["recall_top1pct"] / max(full["recall_top1pct"], 1e-12)
        share = point["surrogate_inferences"] / max(full["surrogate_inferences"], 1.0)
        text = (
            f"at m = {CURVE[CLAIM_ARM]:g} ({share:.1%} of full_greedy's surrogate inferences, budget "
            f"{INFERENCE_BUDGET:.0%}), BOBA-UCB's top-1% recall / full_greedy's (means over seeds) >= {RECALL_RATIO}"
        )
        holds_budget = share <= INFERENCE_BUDGET
        claim = Claim.at_least("boba_ucb_90pct_of_full_greedy_at_budget", text, ratio, RECALL_RATIO,
                               versus="full_greedy", arm=CLAIM_ARM)  # fmt: skip
        out.append(claim if holds_budget else dataclasses.replace(claim, holds=False))
    out += [beats(result, "recall_top1pct", METHOD, other, margin=0.05) for other in list(_VARIANTS)[:3]]
    if "boba_ucb_many_rounds" in arms and "boba_greedy_arm_many_rounds" in arms:
        claim = beats(result, "recall_top1pct", "boba_ucb_many_rounds", "boba_greedy_arm_many_rounds", margin=0.05)
        text = f"{MANY_ROUNDS} rounds (c = {MANY_ROUNDS_EXPLORATION:g}): {claim.text}"
        out.append(dataclasses.replace(claim, text=text))
    means = [a["oracle_calls"] for a in arms.values()]
    spread = max(means) - min(means) + max(a["oracle_calls_std"] for a in arms.values())
    text = "oracle_calls are equal across arms and seeds (max - min of the means, plus the largest std)"
    out.append(Claim.at_most("oracle_calls_equal", text, spread, 0.0, kind="validity", arm=METHOD))
    recalls = {
        f"{arm} seed {s}": v["recall_top1pct"]
        for arm in ("full_greedy", "full_greedy_equal_epochs")
        for s, v in result["per_seed"].get(arm, {}).items()
    }
    text = "full_greedy's top-1% recall (15 and 30 epochs per round) <= 0.85 (headroom)"
    out.append(Claim.gate("full_greedy_headroom", text, recalls, 0.85, at_most=True, arm="full_greedy"))
    return out


def score_pretrained(module, limit: int | None = None) -> dict[str, float]:
    """The published surrogate's Spearman correlation with the test oracle on the held-out slice.

    Args:
        module: A :class:`~zoo.boba.module.BOBAModule` with its campaign record (a published or exported folder).
        limit: Size of the held-out slice (default 2,000, the card's).
    """
    if module.campaign_record is None or module.library_record is None:
        raise ValueError("this module has no campaign record: load a published or exported folder")
    record, cap = module.campaign_record, int(module.library_record["cap"])
    return {"surrogate_spearman": surrogate_spearman(module, cap, record["size"], limit or HELDOUT_SIZE)}


def plot(result: dict, axes) -> None:
    """The recall-versus-inference curve over m (the figure's claim), and recall per arm (mean and seed std)."""
    from zoo._figures import bar_panel

    arms, ax = result["arms"], axes[0]
    points = [(arm, m) for arm, m in CURVE.items() if arm in arms]
    if points:
        x = [arms[arm]["inference_fraction"] for arm, _ in points]
        y = [arms[arm]["recall_top1pct"] for arm, _ in points]
        err = [arms[arm].get("recall_top1pct_std", 0.0) for arm, _ in points]
        ax.errorbar(x, y, yerr=err, marker="o", color="tab:red", capsize=3, label="BOBA-UCB (mean, seed std)")
        for (_, m), xi, yi in zip(points, x, y, strict=True):
            ax.annotate(f"m={m:g}", (xi, yi), textcoords="offset points", xytext=(4, -10), fontsize=7)
    lines = (
        ("full_greedy", "black", "-", "full_greedy (100% inference)"),
        ("reference_tanimoto_expand", "tab:green", ":", "Tanimoto expansion (no learning)"),
        ("random", "grey", ":", "random screening"),
    )
    for arm, colour, style, label in lines:
        if arm in arms:
            ax.axhline(arms[arm]["recall_top1pct"], color=colour, ls=style, lw=1.2, label=label)
    if "full_greedy" in arms:
        ax.axhline(RECALL_RATIO * arms["full_greedy"]["recall_top1pct"], color="black", ls="--", lw=0.8,
                   label=f"{RECALL_RATIO:.0%} of full_greedy")  # fmt: skip
    ax.axvline(INFERENCE_BUDGET, color="tab:blue", ls="--", lw=0.8, label=f"{INFERENCE_BUDGET:.0%} inference budget")
    ax.set(xlabel="surrogate inferences / full-library inference", ylabel="top-1% recall (test oracle)",
           title="BOBA-UCB over the arm fraction m", xlim=(0, 0.45), ylim=(0, 0.85))  # fmt: skip
    ax.legend(fontsize=6, loc="upper center", bbox_to_anchor=(0.5, -0.4), ncol=2, frameon=False)
    bar_panel(axes[1], result, "recall_top1pct")


PROTOCOL = Protocol(
    method=Arm(METHOD, timed=True),
    baselines=(_arm("full_greedy", *FULL_GREEDY), _arm("full_greedy_equal_epochs", *FULL_GREEDY_EQUAL_EPOCHS)),
    ablations=(
        *(_arm(name, f"--{override}") for name, (override, _) in _VARIANTS.items()),
        *(_arm(arm, f"--model.init_args.arm_fraction={m}") for arm, m in CURVE.items() if arm != METHOD),
        _arm("boba_ucb_many_rounds", f"--model.init_args.exploration={MANY_ROUNDS_EXPLORATION}",
             *many_rounds_overrides(MANY_ROUNDS)),  # fmt: skip
        _arm("boba_greedy_arm_many_rounds", "--model.init_args.arm_rule=greedy", *many_rounds_overrides(MANY_ROUNDS)),
    ),
    references=(
        _arm("random", "--model.init_args.strategy=random"),
        Arm("reference_tanimoto_expand", measure=tanimoto_expand_scores, timed=True,
            help="no learning: expand from the best labelled molecules by Tanimoto similarity (same design, budget)"),
    ),  # fmt: skip
    method_variants=(*(arm for arm in CURVE if arm != METHOD), "boba_ucb_many_rounds"),
    settings={
        "oracle": Setting(
            "test", "the oracle of the campaigns and of recall (validation only for tuning)",
            choices=("test", "validation"), recipe_keys=("data.init_args.oracle",),
        ),
        "rounds": Setting(6, "rounds R after the initial design", minimum=1, recipe_keys=("model.init_args.rounds",)),
        "batch_fraction": Setting(
            0.0035, "oracle batch per round, fraction of the library", minimum=1e-4,
            recipe_keys=("model.init_args.batch_fraction",),
        ),
        "initial_fraction": Setting(
            0.01, "random initial design, fraction of the library", minimum=1e-4,
            recipe_keys=("model.init_args.initial_fraction",),
        ),
        "heldout": Setting(HELDOUT_SIZE, "held-out molecules for the surrogate's Spearman correlation", minimum=10),
    },
    tuning={
        "boba_ucb": Tuning(
            "validation", BOBA_GRID, int(TUNED["trials"].get("boba_ucb", TRIALS)),
            _NOTE + "; a seeded sample of the grid (the spec's defaults first); criterion: validation recall among "
            "configurations with at most 25% of full-library inference",
        ),
        "full_greedy": Tuning(
            "validation", FULL_GREEDY_GRID, int(TUNED["trials"].get("full_greedy", TRIALS)),
            _NOTE + "; the full grid; criterion: validation recall",
        ),
        "full_greedy_equal_epochs": Tuning(
            "validation", FULL_GREEDY_GRID, int(TUNED["trials"].get("full_greedy", TRIALS)),
            _NOTE + f"; full_greedy's grid; criterion: validation recall among the {EQUAL_EPOCHS}-epoch trials "
            f"(beta = {EQUAL_EPOCHS_BETA})",
        ),
        "reference_tanimoto_expand": Tuning(
            "validation", TANIMOTO_GRID, int(TUNED["trials"].get("reference_tanimoto_expand", TRIALS)),
            f"validation oracle, seed 100, the full grid (the method's {TRIALS} trials); criterion: validation "
            f"recall; chose {TANIMOTO}; python -m zoo.boba.tune --arm reference_tanimoto_expand",
        ),
        **{arm: Tuning("none", {}, 0, f"boba_ucb's tuned values with m = {m}") for arm, m in CURVE.items()
           if arm != METHOD},
        "boba_ucb_many_rounds": Tuning(
            "validation", MANY_ROUNDS_GRID, int(TUNED["trials"].get("many_rounds", 4)),
            f"R = {MANY_ROUNDS}, c = {MANY_ROUNDS_EXPLORATION:g} chosen on the validation oracle (seeds "
            f"{MANY_ROUNDS_SEEDS}): UCB1 and greedy at R in {MANY_ROUNDS_GRID['rounds']} with c = 0.5, UCB1 with c in "
            f"{MANY_ROUNDS_C} at the largest R; criterion: the largest mean validation gap UCB1 - greedy arm choice "
            f"({TUNED.get('many_rounds', {}).get('validation_gap', 'n/a')}); the same 954 oracle calls after the "
            "design in R equal batches, 180 / R epochs per round; boba_ucb's other tuned values",
        ),
        "boba_greedy_arm_many_rounds": Tuning("none", {}, 0, "boba_ucb_many_rounds with c = 0"),
        **{name: Tuning("none", {}, 0, note) for name, (_, note) in _VARIANTS.items()},
        "random": Tuning("none", {}, 0, "no parameter"),
    },
    score=score,
    claims=claims,
    plot=plot,
    score_pretrained=score_pretrained,
    seed_args=SEED_ARGS,
    headline=("recall_top1pct",),
    lower_is_better=("surrogate_inferences", "inference_fraction", "campaign_s"),
    panels=2,
    steps=(
        Step("tune", ("python", "-m", "zoo.boba.tune"), "choose BOBA's and full_greedy's values on the validation "
             "oracle (zoo/boba/tuning.json; BOBA's winners are copied into the recipe)", stage="prepare"),
    ),
)  # fmt: skip
