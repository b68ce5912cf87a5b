"""Issue 60's noise-handling study in ``zoo eval fedgr``: its arms, the noise cost, the memorisation regime, claims.

The study asks whether FedGR's noise handling (sieve, refining, distillation) is what wins, not its learning rate:
every arm is tuned over one shared learning-rate grid (``python -m zoo.fedgr.tune_noise``, records in
``tuning_noise.json``, read here: :func:`study_tuning`, :func:`chosen_rate`, :func:`memorisation_regime`), the
recipe without its mechanism (``fedgr_no_noise_handling``) and Co-teaching with estimated forget rates
(``coteaching_estimated``) join the baselines, and the noise cost (clean minus noisy accuracy of the same recipe and
seed) is compared across arms.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path

import numpy as np

from zoo.common.records import read_record
from zoo.eval import Arm, Claim, Tuning, beats
from zoo.eval.grid import extend_past_edge
from zoo.eval.result import summarise
from zoo.fedgr.config import NO_NOISE_HANDLING

STUDY_FILE = Path(__file__).with_name("tuning_noise.json")
#: The shared grid's trials: seed 0, 80 rounds, 10% of each client held out (noisy labels) to score them.
STUDY_TRIAL = {"rounds": 80, "fraction": 0.1, "seed": 0}
#: One learning-rate grid for every arm: the union of the rates the recipes had before the study (0.01, 0.02,
#: 0.05) and 0.1.
LR_GRID = (0.01, 0.02, 0.05, 0.1)
#: Where :func:`planned_rates` stops extending the grid past an edge.
LR_LIMITS = (0.0025, 0.2)
#: The probe arm: FedAvg's recipe in each candidate setting of :data:`MEMORISATION_SETTINGS`.
PROBE = "fedavg_memorisation"
#: Candidate memorisation regimes (protocol ``--set`` keys), in the order they are tried: the paper's 10 local
#: epochs; the spec's pair-flip setting B (client rates U[0.2, 0.4]: at the default U[0.4, 0.7] a flipped class's
#: majority label would be wrong on most clients, which no method can learn past).
MEMORISATION_SETTINGS: tuple[dict, ...] = (
    {"local_epochs": 10},
    {"noise": "pair", "noise_low": 0.2, "noise_high": 0.4},
)
#: A setting is a memorisation regime when FedAvg at its chosen rate there falls this far below its best round
#: on the clients' noisy validation labels (issue 60: 2 points).
MEMORISATION_DROP = 0.02


def read_study(path: Path | None = None) -> dict:
    """The study's record (default :data:`STUDY_FILE`; empty before its first trial)."""
    return read_record(STUDY_FILE if path is None else path)


def study_trials(record: Mapping, arm: str, trial: Mapping = STUDY_TRIAL) -> dict[str, dict[float, dict]]:
    """An arm's finished trials at ``trial``'s rounds, fraction and seed: per setting (``json.dumps(setting,
    sort_keys=True)``, ``"{}"`` for the default one), the record rows by learning rate."""
    out: dict[str, dict[float, dict]] = {}
    for key, row in record.get("trials", {}).get(arm, {}).items():
        values = json.loads(key)
        if any(values.pop(name) != trial[name] for name in STUDY_TRIAL):
            continue
        rate = values.pop("local.lr")
        out.setdefault(json.dumps(values, sort_keys=True), {})[rate] = row
    return out


def best_rate(accuracy: Mapping[float, float]) -> float:
    """The learning rate with the best final validation accuracy (ties: the smaller rate)."""
    return max(accuracy, key=lambda rate: (accuracy[rate], -rate))


def planned_rates(
    accuracy: Mapping[float, float], grid: Sequence[float] = LR_GRID, limits: tuple[float, float] = LR_LIMITS
) -> list[float]:
    """The grid, plus the rate beyond an edge (x / 2 or x 2, within ``limits``) where the best finished trial sits.

    Args:
        accuracy: Validation accuracy by learning rate of the finished trials (ties: the smaller rate wins).
        grid: The shared grid.
        limits: No rate below ``limits[0]`` or above ``limits[1]`` is added.
    """
    return extend_past_edge(grid, accuracy, best_rate(accuracy) if accuracy else None, limits)


def _finished(rows: Mapping[float, dict]) -> bool:
    """Whether a setting's trials are all its grid plans (the rates past an edge included)."""
    return bool(rows) and set(planned_rates(accuracy_by_rate(rows))) <= set(rows)


def accuracy_by_rate(rows: Mapping[float, dict]) -> dict[float, float]:
    """Each rate's final validation accuracy, from the record's rows by rate."""
    return {rate: row["client_val_accuracy"] for rate, row in rows.items()}


def chosen_rate(arm: str, record: Mapping | None = None) -> float:
    """The learning rate the shared grid chose for ``arm`` in the default setting.

    Raises:
        ValueError: If the arm's grid is not finished (run ``python -m zoo.fedgr.tune_noise``).
    """
    rows = study_trials(read_study() if record is None else record, arm).get("{}", {})
    if not _finished(rows):
        raise ValueError(
            f"{STUDY_FILE.name} lacks trials of {arm!r}: run `python -m zoo.fedgr.tune_noise` to finish them"
        )
    return best_rate(accuracy_by_rate(rows))


def study_tuning(
    arm: str, note: str = "", setting: Mapping | None = None, record: Mapping | None = None, **grid: Sequence
) -> Tuning:
    """The card's tuning record of an arm tuned on the shared grid: its rates, their scores, the choice.

    Args:
        arm: The arm's name in the record (:data:`PROBE` for FedAvg in a candidate regime).
        note: Appended to the generated note (what else was chosen, and how).
        setting: The candidate setting of the trials (default: the published setting).
        record: The study's record (default: :data:`STUDY_FILE`).
        grid: Other hyperparameters' values tried beside the rates (one more trial per extra value).

    Raises:
        ValueError: If the arm's grid in that setting is not finished.
    """
    where = json.dumps(dict(setting or {}), sort_keys=True)
    rows = study_trials(read_study() if record is None else record, arm).get(where, {})
    if not _finished(rows):
        raise ValueError(f"{STUDY_FILE.name} lacks trials of {arm!r} in {where}: run `python -m zoo.fedgr.tune_noise`")
    accuracy = accuracy_by_rate(rows)
    chosen = best_rate(accuracy)
    scores = ", ".join(f"{r:g} -> {a:.3f}{' (chosen)' if r == chosen else ''}" for r, a in sorted(accuracy.items()))
    text = (
        f"shared lr grid, {len(rows)} trials on the clients' noisy validation split (10%, seed 0, 80 rounds"
        f"{', ' + where if setting else ''}), final-round accuracy: {scores}; the ~2-point standard error of 600 "
        f"labels makes the choice the rule's outcome, not evidence"
    )
    extra = sum(len(values) - 1 for values in grid.values())
    return Tuning(
        "validation", {"lr": sorted(accuracy), **grid}, len(rows) + extra, text + (f"; {note}" if note else "")
    )


def probe_drops(record: Mapping | None = None) -> dict[str, tuple[float, float]]:
    """Per candidate setting of :data:`MEMORISATION_SETTINGS` whose trials are all done: FedAvg's chosen rate there
    and its validation drop (best round minus final round) at that rate."""
    trials = study_trials(read_study() if record is None else record, PROBE)
    out = {}
    for setting in MEMORISATION_SETTINGS:
        rows = trials.get(json.dumps(setting, sort_keys=True), {})
        if _finished(rows):
            rate = best_rate(accuracy_by_rate(rows))
            out[json.dumps(setting, sort_keys=True)] = (rate, rows[rate]["val_drop_best_to_final"])
    return out


def memorisation_regime(record: Mapping | None = None) -> tuple[dict, float, float] | None:
    """The first setting of :data:`MEMORISATION_SETTINGS` where FedAvg at its chosen rate memorises.

    Returns:
        ``(setting, FedAvg's chosen rate there, its validation drop best - final)``, or None if no setting makes
        FedAvg fall by :data:`MEMORISATION_DROP` on the clients' validation labels.
    """
    for setting, (rate, drop) in probe_drops(record).items():
        if drop >= MEMORISATION_DROP:
            return json.loads(setting), rate, drop
    return None


def clean_overrides(run) -> list[str]:
    """Clean labels (nothing to add when ``--set noise=none`` already says so: the same fit then serves both)."""
    return [] if run.settings["noise"] == "none" else ["--data.init_args.noise=none"]


_NO_NOISE_HANDLING = tuple(
    f"--model.init_args.fedgr.{switch}={str(on).lower()}" for switch, on in NO_NOISE_HANDLING.items()
)
NOISE_STUDY_ARMS = (
    Arm(
        "fedgr_no_noise_handling",
        base="fedgr",
        overrides=_NO_NOISE_HANDLING,
        help="FedGR's recipe without sieve, refining and distillation",
    ),
    Arm(
        "fedgr_no_noise_handling_clean",
        base="fedgr",
        overrides=lambda run: [*_NO_NOISE_HANDLING, *clean_overrides(run)],
        help="fedgr_no_noise_handling without label noise",
    ),
    Arm(
        "coteaching_estimated",
        base="coteaching",
        overrides=("--model.init_args.baselines.coteach_forget_rate=estimated",),
        help="Co-teaching forgetting the client's estimated noise rate",
    ),
)


def at_rate(arm: Arm, rate: float) -> Arm:
    """``arm`` trained at learning rate ``rate`` (appended to its overrides, so it wins over the recipe's)."""
    own, lr = arm.overrides, f"--model.init_args.local.lr={rate}"
    return replace(arm, overrides=(lambda run: [*own(run), lr]) if callable(own) else (*own, lr))


#: The arms FedGR must beat under noise by more than the seed spread (issue 60).
NOISE_STUDY_RIVALS = ("fedgr_no_noise_handling", "coteaching_estimated")
#: Each arm whose noise cost is reported, and the arm that trains the same recipe on the true labels.
NOISE_COST_PAIRS = {
    "fedgr": "fedgr_clean",
    "fedavg": "reference_clean_fedavg",
    "fedgr_no_noise_handling": "fedgr_no_noise_handling_clean",
}


def noise_cost(
    noisy: Mapping[str, Mapping[str, float]], clean: Mapping[str, Mapping[str, float]], metric: str = "accuracy"
) -> dict[str, float]:
    """What label noise costs one arm, per seed: the clean-label run's ``metric`` minus the noisy run's.

    Args:
        noisy: Per seed (the result's ``per_seed[arm]``), the arm's scores under noise.
        clean: Per seed, the scores of the same recipe on the true labels.
        metric: The score compared (higher is better).

    Returns:
        ``{seed: clean - noisy}`` over the seeds both runs have, in the order of ``noisy``.

    Raises:
        ValueError: If the two share no seed (a cost needs both runs of the same seed).
    """
    seeds = [seed for seed in noisy if seed in clean]
    if not seeds:
        raise ValueError(f"no seed has both a noisy and a clean run (noisy: {list(noisy)}, clean: {list(clean)})")
    return {seed: float(clean[seed][metric]) - float(noisy[seed][metric]) for seed in seeds}


def noise_costs(
    per_seed: Mapping[str, Mapping[str, Mapping[str, float]]],
    pairs: Mapping[str, str] = NOISE_COST_PAIRS,
    metric: str = "accuracy",
) -> dict[str, dict[str, float]]:
    """``noise_cost`` of every arm of ``pairs`` whose noisy and clean runs are both in ``per_seed``.

    Args:
        per_seed: The result's ``per_seed``: arm -> seed -> scores.
        pairs: Noisy arm -> the arm of the same recipe on clean labels.
        metric: The score compared.

    Returns:
        ``{arm: {"noise_cost": mean, "noise_cost_std": sample std (0 for one seed), "seed <s>": cost, ...}}``.
    """
    out = {}
    for arm, clean_arm in pairs.items():
        if arm not in per_seed or clean_arm not in per_seed:
            continue
        costs = noise_cost(per_seed[arm], per_seed[clean_arm], metric)
        values = np.array(list(costs.values()))
        std = float(values.std(ddof=1)) if len(values) > 1 else 0.0
        out[arm] = {"noise_cost": float(values.mean()), "noise_cost_std": std}
        out[arm].update({f"seed {seed}": cost for seed, cost in costs.items()})
    return out


#: The memorisation regime's arms (issue 60's claim c): FedGR, FedAvg and FedGR without refining trained in the
#: setting where FedAvg at its validation-chosen rate peaks and falls (``python -m zoo.fedgr.tune_noise --arms
#: fedavg_memorisation`` finds it); built by :func:`regime_arms`.
REGIME_BASES = {
    "fedgr_regime": ("fedgr", ()),
    "fedavg_regime": ("fedavg", ()),
    "fedgr_no_refine_regime": ("fedgr", ("--model.init_args.fedgr.refine=false",)),
}


def regime_arms(recipe_args: Sequence[str], lrs: Mapping[str, float] | None = None) -> tuple[Arm, ...]:
    """The arms of :data:`REGIME_BASES` in a memorisation regime.

    Args:
        recipe_args: LightningCLI arguments that make the regime, e.g. ``["--model.init_args.local.epochs=10"]``.
        lrs: Arm -> the learning rate it trains at there (FedAvg's as the probe chose it in the regime); arms not
            listed keep their recipe's rate.
    """
    arms = []
    for name, (base, own) in REGIME_BASES.items():
        rate = (f"--model.init_args.local.lr={(lrs or {})[name]}",) if name in (lrs or {}) else ()
        what = base if name != "fedgr_no_refine_regime" else "FedGR without refining"
        arms.append(Arm(name, base=base, overrides=(*own, *recipe_args, *rate), help=f"{what} in the regime"))
    return tuple(arms)


def noise_study_claims(result: dict, regime_found: bool = True) -> list[Claim]:
    """Issue 60's claims, for the arms of the study that ``result`` has (kind ``paper`` unless stated).

    * FedGR's noise cost (clean minus noisy accuracy, :func:`noise_costs`, also written to
      ``result["extras"]["noise_cost"]``) is at least 0.02 below FedAvg's and below ``fedgr_no_noise_handling``'s,
      and the paired gap exceeds its seed spread;
    * FedGR beats ``fedgr_no_noise_handling`` and ``coteaching_estimated`` under noise by more than the seed spread;
    * in the memorisation regime (:func:`regime_arms`): FedAvg falls from its best round by >= 0.02 on every seed
      (kind ``headroom``), FedGR beats FedAvg there by >= 0.05, and removing refining costs more than the spread.

    Args:
        result: The eval result (its ``per_seed`` and ``extras`` are read; ``extras`` gains ``noise_cost``).
        regime_found: False when the probe found no memorisation regime: a failing ``headroom`` claim then states
            the largest validation drop it measured, and the regime's claims are not made.
    """
    per_seed = result["per_seed"]
    result.setdefault("extras", {})["noise_cost"] = noise_costs(per_seed)
    costs = _noise_cost_result(result)
    others = [other for other in ("fedavg", "fedgr_no_noise_handling") if {"fedgr", other} <= set(costs["arms"])]
    out = [beats(costs, "noise_cost", "fedgr", other, 0.02, higher_is_better=False) for other in others]
    out += [beats(result, "accuracy", "fedgr", other, 0.0) for other in NOISE_STUDY_RIVALS if other in per_seed]
    if "fedavg_regime" in per_seed:
        runs = per_seed["fedavg_regime"]
        drops = {f"seed {seed}": s["accuracy_best"] - s["accuracy_final"] for seed, s in runs.items()}
        text = "in the memorisation regime FedAvg's final accuracy is >= 0.02 below its best round's"
        out.append(Claim.gate("fedavg_regime_memorises", text, drops, 0.02, arm="fedavg_regime"))
        out.append(beats(result, "accuracy", "fedgr_regime", "fedavg_regime", 0.05))
        out.append(beats(result, "accuracy", "fedgr_regime", "fedgr_no_refine_regime", 0.0))
    elif not regime_found:
        drops = probe_drops()
        largest = max((drop for _, drop in drops.values()), default=0.0)
        text = (
            f"a candidate setting ({len(drops)} probed) makes tuned FedAvg fall >= {MEMORISATION_DROP} below its best "
            "round on the clients' validation labels (else FedGR's lead in a memorisation regime is not measured)"
        )
        out.append(Claim.at_least("memorisation_regime_found", text, largest, MEMORISATION_DROP, kind="headroom"))
    return out


def _noise_cost_result(result: dict) -> dict:
    """``result`` with ``noise_cost`` as the metric of each arm of :data:`NOISE_COST_PAIRS` that has both runs."""
    per_seed = result["per_seed"]
    paired = {arm: clean for arm, clean in NOISE_COST_PAIRS.items() if arm in per_seed and clean in per_seed}
    costs = {arm: noise_cost(per_seed[arm], per_seed[clean]) for arm, clean in paired.items()}
    runs = {arm: {seed: {"noise_cost": value} for seed, value in cost.items()} for arm, cost in costs.items()}
    return {**result, "per_seed": runs, "arms": {arm: summarise(seeds) for arm, seeds in runs.items()}}


def noise_cost_panel(ax, result: dict) -> None:
    """Bars of each arm's noise cost (clean minus noisy accuracy): mean, seed std, one dot per seed."""
    from zoo._figures import bar_panel

    bar_panel(ax, _noise_cost_result(result), "noise_cost", ylabel="noise cost (clean - noisy accuracy)")
