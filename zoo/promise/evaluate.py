"""``zoo eval promise``: ProMiSE's controls and the learned analogue of decoding bias on AdK (setup: card.md).

Per seed, ``ensembles`` ensembles of ``samples`` structures per context; coverage, success and path fidelity come
from the apo ensembles, the context delta pairs ligand with apo ensembles. The four DDPM arms are one shared pass
per seed (one checkpoint, one validation tuning of (w, T), one pool of test samples); the references need no
learning: the controls and ANM (validity), and ``reference_train_resample`` (raw / ``_reweighted``), which draws
each ensemble from the recipe's own training items of that context (reweighted: ``samples`` of a pool of
``pool_factor x samples`` by ``1 / f(state)``, ``ddpm_debiased``'s decoding), the bar every model claim must
clear. ``ddpm_biased`` also reports ``success_exposure_<pct>`` over refits at each of ``exposures`` (not gated).
"""

from __future__ import annotations

import numpy as np
import torch

from zoo._figures import arm_colour, bar_panel
from zoo.eval import Arm, Claim, Protocol, Setting, Shared, Tuning, beats, per_seed_values
from zoo.promise import ddpm
from zoo.promise.anm import ANMSampler
from zoo.promise.data import TEST_SAMPLE_SEED, VAL_SAMPLE_SEED
from zoo.promise.harness import CONTEXTS, Target, score_ensembles
from zoo.promise.metrics import kabsch_rmsd
from zoo.promise.structures import HELD_OUT_TRAJECTORY, STATE_NAMES, TRAIN_TRAJECTORIES, load_adk

GUIDANCE_GRID = [0.0, 1.0, 3.0]
TEMPERATURE_GRID = [0.5, 0.7, 1.0]
_TRIALS = len(GUIDANCE_GRID) * len(TEMPERATURE_GRID)
METHOD = "ddpm_debiased"
DDPM_ARMS = (METHOD, "ddpm_biased", "ddpm_no_reweight", "ddpm_reweight_only")
REFERENCES = ("positive_control", "negative_control", "anm")  # the controls (validity)
#: No-learning references: resample the recipe's own training items (raw, or 1/f-reweighted like ddpm_debiased).
TRAIN_RESAMPLE = {"reference_train_resample": False, "reference_train_resample_reweighted": True}
RECIPE_EXPOSURE = 0.85
CONTROL_END_FRAMES = 5  # frames from each end of each DIMS run for the positive control


def target() -> Target:
    """The AdK target (states superposed onto the open state, TMD path held out)."""
    adk = load_adk()
    return Target(
        "adk",
        adk["states"],
        STATE_NAMES,
        holo_state=STATE_NAMES.index("closed"),
        apo_state=STATE_NAMES.index("open"),
        mechanism="ligand-induced (emulated)",
        path=adk["trajectories"][HELD_OUT_TRAJECTORY],
    )


def _context_seed(seed: int, context: str, validation: bool) -> int:
    return (VAL_SAMPLE_SEED if validation else TEST_SAMPLE_SEED) + 10 * seed + CONTEXTS.index(context)


class Pools:
    """Sample pools of one checkpoint and seed per context and (w, T); an ensemble is the first ``samples`` of its
    pool, or with reweighting ``samples`` drawn by inverse training-state frequency."""

    def __init__(self, module, seed: int, settings: dict, validation: bool) -> None:
        self.module, self.seed, self.settings, self.validation = module, seed, settings, validation
        self.count = settings["val_ensembles"] if validation else settings["ensembles"]
        self._pools: dict = {}

    def pool(self, context: str, guidance: float, temperature: float) -> tuple[torch.Tensor, torch.Tensor]:
        """``(ensembles, P, L, 3)`` coordinates and their ``(ensembles, P)`` nearest-state indices."""
        key = (context, guidance, temperature)
        if key not in self._pools:
            size = self.settings["samples"] * self.settings["pool_factor"]
            generator = torch.Generator().manual_seed(_context_seed(self.seed, context, self.validation))
            coords = self.module.ensemble(
                context, self.count * size, guidance=guidance, temperature=temperature, reweight=False,
                generator=generator,
            )  # fmt: skip
            rmsd = kabsch_rmsd(coords.unsqueeze(1), self.module.states.unsqueeze(0))  # (E * P, M)
            self._pools[key] = (coords.reshape(self.count, size, *coords.shape[1:]), rmsd.reshape(self.count, size, -1))
        return self._pools[key]

    def picks(self, context: str, guidance: float, temperature: float) -> list[torch.Tensor]:
        """Pool indices of each reweighted ensemble (fixed generator per seed and context)."""
        _, rmsd = self.pool(context, guidance, temperature)
        generator = torch.Generator().manual_seed(_context_seed(self.seed, context, self.validation) + 5)
        frequency, n = self.module.state_frequency, self.settings["samples"]
        return [ddpm.importance_resample(distances.argmin(dim=1), frequency, n, generator) for distances in rmsd]

    def ensembles(self, context: str, guidance: float, temperature: float, reweight: bool) -> list[torch.Tensor]:
        coords, _ = self.pool(context, guidance, temperature)
        if not reweight:
            return [pool[: self.settings["samples"]] for pool in coords]
        return [pool[idx] for pool, idx in zip(coords, self.picks(context, guidance, temperature))]


def tune(module, seed: int, settings: dict, pools=None) -> dict[str, dict[str, float]]:
    """Both tuned decoders' (w, T) for one checkpoint on validation ensembles (``pools``: reuse the caller's)."""
    pools = pools or Pools(module, seed, settings, validation=True)
    rows = []
    for guidance in settings["guidance_grid"]:
        for temperature in settings["temperature_grid"]:
            tables = [pools.pool(c, guidance, temperature)[1] for c in CONTEXTS]
            nearest = torch.cat([table.min(dim=-1).values.flatten() for table in tables])
            # Coverage of the reweighted apo ensembles from the pool's RMSD table (no new superpositions).
            table, picks = tables[CONTEXTS.index("apo")], pools.picks("apo", guidance, temperature)
            threshold = settings["coverage_rmsd"]
            covered = torch.stack([table[k, idx].min(dim=0).values <= threshold for k, idx in enumerate(picks)])
            success, coverage = covered.all(dim=1).double().mean().item(), covered.double().mean().item()
            distance = abs(guidance - 0.0) + abs(temperature - 1.0)
            rows.append((guidance, temperature, float(nearest.median()), success, coverage, distance))
    biased = min(rows, key=lambda r: r[2])
    debiased = max(rows, key=lambda r: (r[3], r[4], -r[5]))
    return {
        "biased": {"guidance": biased[0], "temperature": biased[1], "val_median_rmsd": biased[2]},
        "debiased": {"guidance": debiased[0], "temperature": debiased[1], "val_success": debiased[3]},
    }


def ddpm_scores(module, seed: int, settings: dict, decoding: dict[str, float], reweight: bool, pools=None) -> dict:
    """The harness's metrics of one decoding of ``module`` on this seed's test ensembles."""
    pools = pools or Pools(module, seed, settings, validation=False)
    w, t = decoding["guidance"], decoding["temperature"]
    ensembles = {c: pools.ensembles(c, w, t, reweight) for c in CONTEXTS}
    return score_ensembles(target(), ensembles, settings["coverage_rmsd"])


def _decoding_for(arm: str, tuned: dict) -> tuple[dict, bool]:
    return {
        "ddpm_debiased": (tuned["debiased"], True),
        "ddpm_biased": (tuned["biased"], False),
        "ddpm_no_reweight": (tuned["debiased"], False),
        "ddpm_reweight_only": (tuned["biased"], True),
    }[arm]


def ddpm_arms(run) -> dict[str, dict[str, float]]:
    """The shared pass of one seed: one checkpoint, one tuning on validation, one pool of test samples for the
    four DDPM arms, and the biased decoder's dose-response over the exposure fits."""
    settings, module = run.settings, run.load(METHOD).eval()
    tuned = tune(module, run.seed, settings)
    pools = Pools(module, run.seed, settings, validation=False)
    out = {}
    for arm in DDPM_ARMS:
        decoding, reweight = _decoding_for(arm, tuned)
        scores = ddpm_scores(module, run.seed, settings, decoding, reweight, pools)
        out[arm] = scores | {"guidance": decoding["guidance"], "temperature": decoding["temperature"]}
        out[arm]["tuning_trials"] = _TRIALS
    recipe = run.entry(METHOD).pretrained_cfg.recipe
    for exposure in settings["exposures"]:
        success = out["ddpm_biased"]["multistate_success"]
        if abs(exposure - RECIPE_EXPOSURE) >= 1e-9:  # a fit of the recipe at this exposure, re-tuned the same way
            checkpoint = run.fit(recipe, [f"--data.init_args.exposure={exposure}"]).eval()
            chosen = tune(checkpoint, run.seed, settings)["biased"]
            success = ddpm_scores(checkpoint, run.seed, settings, chosen, False)["multistate_success"]
        out["ddpm_biased"][f"success_exposure_{round(100 * exposure)}"] = success
    if run.weights is None and run.uses_published(METHOD):
        run.extras["tuned"] = tuned
    return out


def control_ensembles(arm: str, seed: int, settings: dict) -> dict[str, list[np.ndarray]]:
    """The references' ensembles per context (context-blind: both contexts drawn the same way)."""
    adk = load_adk()
    open_state, closed_state = adk["states"]
    n = settings["samples"]
    rng = np.random.default_rng([seed, REFERENCES.index(arm)])  # an unknown arm raises here
    runs = [adk["trajectories"][name] for name in TRAIN_TRAJECTORIES]  # closed -> open
    ends = [np.concatenate([run[:CONTROL_END_FRAMES] for run in runs]),
            np.concatenate([run[-CONTROL_END_FRAMES:] for run in runs])]  # fmt: skip
    sampler = ANMSampler(open_state, target_rmsd=settings["anm_rmsd"]) if arm == "anm" else None

    def draw() -> np.ndarray:
        if arm == "positive_control":
            halves = zip(ends, (n // 2, n - n // 2))
            return np.concatenate([end[rng.choice(len(end), k, replace=False)] for end, k in halves])
        if arm == "negative_control":
            return closed_state + rng.normal(0.0, settings["negative_noise"], (n, *closed_state.shape))
        return sampler.sample(n, rng)

    return {context: [draw() for _ in range(settings["ensembles"])] for context in CONTEXTS}


def reference_scores(arm: str, run) -> dict[str, float]:
    """A reference arm's metrics; the positive control also carries the open vs closed RMSD (a data check)."""
    scores = score_ensembles(target(), control_ensembles(arm, run.seed, run.settings), run.settings["coverage_rmsd"])
    if arm == "positive_control":
        scores["rmsd_open_closed"] = float(kabsch_rmsd(*load_adk()["states"]))
    return scores


def train_resample_picks(
    state_index: torch.Tensor, frequency: torch.Tensor, n: int, pool: int | None, generator: torch.Generator
) -> torch.Tensor:
    """Indices of one ensemble of ``n`` of the candidate training items (their nearest states ``state_index``).

    Raw (``pool`` None): ``n`` candidates uniformly without replacement. Reweighted: a pool of ``pool`` candidates
    uniformly without replacement, then ``n`` of the pool by :func:`zoo.promise.ddpm.importance_resample` with
    weights ``1 / frequency[state]``, the decoding of ``ddpm_debiased`` applied to the training items themselves.
    """
    size = n if pool is None else pool
    if not n <= size <= state_index.shape[0]:
        raise ValueError(f"cannot draw {n} of a pool of {size} from {state_index.shape[0]} training items")
    chosen = torch.randperm(state_index.shape[0], generator=generator)[:size]
    if pool is None:
        return chosen
    return chosen[ddpm.importance_resample(state_index[chosen], frequency, n, generator)]


def training_items(recipe: str) -> dict:
    """The recipe's training items: aligned frames ``(I, L, 3)``, context names, nearest-state index and the
    training-state frequency (the data module of the recipe's ``data.init_args``; the data seed is fixed)."""
    import yaml

    from zoo._recipes import resolve_recipe
    from zoo.promise.data import ProMiSEDataModule

    with open(resolve_recipe(recipe)) as handle:
        init_args = yaml.safe_load(handle)["data"]["init_args"]
    data = ProMiSEDataModule(**init_args)
    data.setup()
    frames = data.train_frames[data.items]
    names = {index: name for name, index in ddpm.CONTEXT_IDS.items()}
    return {
        "frames": frames,
        "contexts": [names[int(c)] for c in data.contexts],
        "state_index": kabsch_rmsd(frames.unsqueeze(1), data.states.unsqueeze(0)).argmin(dim=1),
        "state_frequency": data.state_frequency,
    }


def train_resample_ensembles(arm: str, seed: int, settings: dict, items: dict) -> dict[str, list[np.ndarray]]:
    """``ensembles`` ensembles of ``samples`` training items per context, drawn from the items tagged with that
    context (raw, or reweighted from a pool of ``pool_factor * samples``)."""
    n = settings["samples"]
    pool = n * settings["pool_factor"] if TRAIN_RESAMPLE[arm] else None
    out = {}
    for context in CONTEXTS:
        members = torch.as_tensor([k for k, c in enumerate(items["contexts"]) if c == context], dtype=torch.long)
        generator = torch.Generator().manual_seed(_context_seed(seed, context, validation=False) + 7)
        state_index = items["state_index"][members]
        out[context] = [
            items["frames"][
                members[train_resample_picks(state_index, items["state_frequency"], n, pool, generator)]
            ].numpy()
            for _ in range(settings["ensembles"])
        ]
    return out


def train_resample_scores(arm: str, run) -> dict[str, float]:
    """A training-item resampling reference's metrics on this seed (no learning)."""
    items = run.memo("training_items", lambda: training_items(run.entry(METHOD).pretrained_cfg.recipe))
    ensembles = train_resample_ensembles(arm, run.seed, run.settings, items)
    return score_ensembles(target(), ensembles, run.settings["coverage_rmsd"])


def score_pretrained(module, limit: int | None = None, decoding: dict | None = None) -> dict[str, float]:
    """``ddpm_debiased``'s metrics of a loaded checkpoint on seed 0's first ``limit`` test ensembles per context;
    ``decoding`` (``{"guidance", "temperature"}``) defaults to tuning it on validation."""
    settings = PROTOCOL.resolve({} if limit is None else {"ensembles": int(limit)})
    decoding = decoding or tune(module, 0, settings)["debiased"]
    return ddpm_scores(module.eval(), 0, settings, decoding, reweight=True)


def claims(result: dict) -> list[Claim]:
    """The spec's controls, data constant and the biased decoder's context blindness (validity: by construction);
    the biased decoder's collapse (a per-seed gate); the analogue: the debiased decoder against the biased one and
    against resampling its training items, raw and reweighted (paper)."""
    arms = result["arms"]
    positive, negative = arms["positive_control"], arms["negative_control"]
    checks = [  # (id, text, arm, value, threshold, at most)
        ("rmsd_open_closed", "open vs closed C-alpha RMSD is 6.91 +- 0.05 A (|gap| shown)", "positive_control",
         abs(positive["rmsd_open_closed"] - 6.91), 0.05, True),
        ("positive_control_success", "the positive control has multi-state success 1", "positive_control",
         positive["multistate_success"], 1.0, False),
        ("negative_control_success", "the negative control has multi-state success 0", "negative_control",
         negative["multistate_success"], 0.0, True),
        ("negative_control_covers_closed", "the negative control covers the closed state", "negative_control",
         negative["coverage_closed"], 1.0, False),
    ]  # fmt: skip
    out = [(Claim.at_most if most else Claim.at_least)(id, text, value, threshold, kind="validity", arm=arm)
           for id, text, arm, value, threshold, most in checks]  # fmt: skip
    successes = {f"seed {s}": v for s, v in per_seed_values(result, "ddpm_biased", "multistate_success").items()}
    text = "the validation-tuned sharp decoder's success is <= 0.3"
    out.append(Claim.gate("biased_success", text, successes, 0.3, at_most=True, arm="ddpm_biased"))
    # The recipe's tags are independent of the state: the context carries no state information, so context
    # blindness holds by construction (a check of the construction, worst seed), not a finding.
    deltas = per_seed_values(result, "ddpm_biased", "context_delta")
    units = ", ".join(f"seed {seed} {value:.4g}" for seed, value in deltas.items())
    text = f"the biased decoder is context-blind, |context delta| < 0.2 on every seed ({units}; by construction)"
    worst = max(abs(value) for value in deltas.values())
    out.append(Claim("biased_context_delta", text, round(worst, 6), 0.2, worst < 0.2, None, "validity", "ddpm_biased"))
    out.append(beats(result, "multistate_success", METHOD, "ddpm_biased", margin=0.3))
    for reference in TRAIN_RESAMPLE:  # the learned decoder against resampling its own training items
        out.append(beats(result, "multistate_success", METHOD, reference))
    out.append(beats(result, "multistate_success", METHOD, "anm", margin=0.0, kind="validity"))  # ANM: 0 by design
    return out


def plot(result: dict, axes) -> None:
    """Success, coverage of each state, context delta, and the biased decoder's exposure dose-response."""
    for ax, metric in zip(axes, ("multistate_success", "coverage_open", "context_delta")):
        bar_panel(ax, result, metric)
    biased = result["arms"]["ddpm_biased"]
    keys = [k for k in biased if k.startswith("success_exposure_") and not k.endswith("_std")]
    keys.sort(key=lambda k: -int(k.rsplit("_", 1)[1]))
    x = [int(k.rsplit("_", 1)[1]) for k in keys]
    axes[3].errorbar(x, [biased[k] for k in keys], yerr=[biased[f"{k}_std"] for k in keys], marker="o",
                     color=arm_colour(result, "ddpm_biased"), label="ddpm_biased (re-tuned per exposure)")  # fmt: skip
    axes[3].set(xlabel="closed-half share of training frames (%)", ylabel="multi-state success", ylim=(-0.05, 1.05))
    axes[3].invert_xaxis()
    axes[3].legend(fontsize=7)


_GRID = {"guidance": GUIDANCE_GRID, "temperature": TEMPERATURE_GRID}
TUNING = {
    METHOD: Tuning("validation", _GRID, _TRIALS, "max validation success with reweighting; ties: nearest w = 0, T = 1"),
    "ddpm_biased": Tuning("validation", _GRID, _TRIALS, "min validation median RMSD to the nearest state"),
    "ddpm_no_reweight": Tuning("validation", _GRID, _TRIALS, "ddpm_debiased's w and T, without reweighting"),
    "ddpm_reweight_only": Tuning("validation", _GRID, _TRIALS, "ddpm_biased's w and T, plus reweighting"),
    "positive_control": Tuning("none", {}, 0, "no parameters"),
    "negative_control": Tuning("none", {}, 0, "the spec's 0.3 A noise"),
    "anm": Tuning("none", {}, 0, "the spec's ANM: cutoff 15 A, gamma 1, 3 modes, mean RMSD 3 A"),
    "reference_train_resample": Tuning("none", {}, 0, "no parameters: the recipe's training items of the context"),
    "reference_train_resample_reweighted": Tuning(
        "none", {}, 0, "ddpm_debiased's reweighting (1/f, pool_factor x samples); nothing of its own to tune"
    ),
}
PROTOCOL = Protocol(
    method=METHOD,
    baselines=("ddpm_biased",),
    ablations=("ddpm_no_reweight", "ddpm_reweight_only"),
    references=(
        *(Arm.scored(arm, reference_scores) for arm in REFERENCES),
        Arm.scored(
            "reference_train_resample",
            train_resample_scores,
            "`samples` training items of the ensemble's context, drawn uniformly (no learning)",
        ),
        Arm.scored(
            "reference_train_resample_reweighted",
            train_resample_scores,
            "`samples` of a pool of pool_factor x samples training items, 1/f-reweighted as ddpm_debiased",
        ),
    ),  # fmt: skip
    shared=(Shared(DDPM_ARMS, ddpm_arms),),
    ceilings=("positive_control",),  # the crystal structures themselves: an upper bound, not a competitor
    settings={
        "ensembles": Setting(20, "test ensembles per context and seed", minimum=1),
        "samples": Setting(10, "structures per ensemble", minimum=1),
        "guidance_grid": Setting(GUIDANCE_GRID, "classifier-free guidance values tried (both tuned arms)", minimum=0),
        "temperature_grid": Setting(TEMPERATURE_GRID, "noise scales tried (both tuned arms)", minimum=0.01),
        "val_ensembles": Setting(20, "validation ensembles per context for tuning w and T", minimum=1),
        "pool_factor": Setting(5, "reweighting keeps `samples` of a pool this many times larger", minimum=1),
        "exposures": Setting([0.85, 0.7, 0.5], "closed-half training fractions of the dose-response; 0.85 = recipe"),
        "coverage_rmsd": Setting(2.0, "coverage radius, A (RMSD to a crystal state)", minimum=0.1),
        "negative_noise": Setting(0.3, "negative control: Gaussian noise per coordinate, A", minimum=0.0),
        "anm_rmsd": Setting(3.0, "ANM: mean RMSD of the samples to the open state, A", minimum=0.1),
    },
    tuning=TUNING,
    # the recipe's validation ensembles only log (own generators): skipping them leaves the weights unchanged
    fit_args=("--trainer.limit_val_batches=0",),
    claims=claims,
    headline=("multistate_success", "coverage_open", "context_delta"),
    plot=plot,
    panels=4,
    score_pretrained=score_pretrained,
    lower_is_better=("min_rmsd_open", "min_rmsd_closed", "path_fidelity_rmsd"),
)
