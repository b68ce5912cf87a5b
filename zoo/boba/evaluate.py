"""``zoo eval boba``: BOBA-UCB against full-library greedy BO, random screening, the ablations and variants.

Every arm is one screening campaign per seed on the cap-14 amide library with the test oracle and the same oracle
budget: its recall of the exact top 1%, its surrogate inferences and its surrogate's Spearman on held-out molecules.
"""

from __future__ import annotations

import json

import numpy as np

from zoo._errors import ZooError
from zoo.boba.tune import BOBA_GRID, FULL_GREEDY_GRID, SEED_ARGS, TRIALS, TUNING_FILE
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
    ratio = method["recall_top1pct"] / max(full["recall_top1pct"], 1e-12)
    text = "boba_ucb's top-1% recall / full_greedy's (mean over seeds) >= 0.9"
    out.append(Claim.at_least("boba_ucb_recall_vs_full_greedy", text, ratio, 0.9, versus="full_greedy", arm=METHOD))
    ratio = method["surrogate_inferences"] / max(full["surrogate_inferences"], 1.0)
    text = "boba_ucb's surrogate inferences / full_greedy's <= 0.25"
    out.append(Claim.at_most("boba_ucb_inferences_vs_full_greedy", text, ratio, 0.25, versus="full_greedy", arm=METHOD))
    out += [beats(result, "recall_top1pct", METHOD, other, margin=0.05) for other in list(_VARIANTS)[:3]]
    means = [a["oracle_calls"] for a in arms.values()]
    spread = max(means) - min(means) + max(a["oracle_calls_std"] for a in arms.values())
    text = "oracle_calls are equal across arms and seeds (max - min of the means, plus the largest std)"
    out.append(Claim.at_most("oracle_calls_equal", text, spread, 0.0, kind="validity", arm=METHOD))
    recalls = {f"seed {s}": v["recall_top1pct"] for s, v in result["per_seed"]["full_greedy"].items()}
    text = "full_greedy's top-1% recall <= 0.85 (headroom)"
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
    """Recall per arm (mean and seed std), and recall against rounds for the first seed."""
    from zoo._figures import bar_panel

    bar_panel(axes[0], result, "recall_top1pct")
    ax = axes[1]
    curves = result["extras"].get(str(result["seeds"][0]), {}).get("recall_by_round", {})
    for arm, curve in curves.items():
        ax.plot(range(len(curve)), curve, marker="o", ms=3, lw=1.2, label=arm)
    ax.set(xlabel="round (0 = initial design)", ylabel="top-1% recall", title=f"seed {result['seeds'][0]}, test oracle")
    ax.legend(fontsize=6)


PROTOCOL = Protocol(
    method=Arm(METHOD, timed=True),
    baselines=(_arm("full_greedy", *FULL_GREEDY),),
    ablations=tuple(_arm(name, f"--{override}") for name, (override, _) in _VARIANTS.items()),
    references=(_arm("random", "--model.init_args.strategy=random"),),
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
