"""``zoo eval promise``: ProMiSE's controls and the learned analogue of decoding bias on AdK.

Protocol (``zoo eval promise --settings`` lists the keys; every choice is in :mod:`zoo.promise.module`):

* Target: AdK open/closed (6.91 A apart), contexts apo and ligand (emulated; holo = closed), the held-out TMD
  run for path fidelity. Per seed, ``ensembles`` ensembles of ``samples`` structures per context; coverage,
  success and path fidelity come from the apo ensembles, the context delta pairs ligand with apo ensembles.
* References (no learning, or none of the method): ``positive_control`` (5 frames from each end of the DIMS
  runs), ``negative_control`` (the closed state + 0.3 A Gaussian noise per coordinate) and ``anm`` (numpy
  ANM of the open state, 3 softest modes, mean RMSD 3 A). Context-blind by construction.
* DDPM arms: the checkpoint of this seed (seed 0: the published ``promise.adk``; seeds 1, 2: its recipe with
  that seed), one network and one PCA encoder for all four arms; they differ only in decoding. Guidance w and
  temperature T are tuned per seed on ``val_ensembles`` validation ensembles (sampling seeds from 1,000,000 up,
  disjoint from the test ensembles' seeds below 100,000) over the same grid for both tuned arms:
  ``ddpm_biased`` minimises the median RMSD of samples to their nearest crystal state (sharp decoding),
  ``ddpm_debiased`` maximises multi-state success with importance reweighting. ``ddpm_no_reweight`` decodes with
  the debiased (w, T) without reweighting, ``ddpm_reweight_only`` with the biased (w, T) plus reweighting.
  Within a seed and context every DDPM arm starts from the same noise (common random numbers).
* Dose-response (reported on ``ddpm_biased``, not gated): ``success_exposure_<pct>`` of the biased decoder,
  re-tuned the same way, for checkpoints trained on each of ``exposures`` (the recipe with
  ``--data.init_args.exposure``; 0.85 is the main checkpoint).
"""

from __future__ import annotations

import numpy as np
import torch

from zoo._eval import Claim, Protocol, Setting, Tuning, beats
from zoo._figures import arm_colour, bar_panel
from zoo.promise import ddpm
from zoo.promise.anm import ANMSampler
from zoo.promise.data import TEST_SAMPLE_SEED, VAL_SAMPLE_SEED
from zoo.promise.harness import CONTEXTS, Target, score_ensembles
from zoo.promise.metrics import kabsch_rmsd
from zoo.promise.structures import HELD_OUT_TRAJECTORY, STATE_NAMES, TRAIN_TRAJECTORIES, load_adk

GUIDANCE_GRID = [0.0, 1.0, 3.0]
TEMPERATURE_GRID = [0.5, 0.7, 1.0]
_TRIALS = len(GUIDANCE_GRID) * len(TEMPERATURE_GRID)
_GRID = {"guidance": GUIDANCE_GRID, "temperature": TEMPERATURE_GRID}
DDPM_ARMS = ("ddpm_debiased", "ddpm_biased", "ddpm_no_reweight", "ddpm_reweight_only")
CONTROL_END_FRAMES = 5  # frames from each end of each DIMS run for the positive control

PROTOCOL = Protocol(
    method="ddpm_debiased",
    baselines=("ddpm_biased",),
    ablations=("ddpm_no_reweight", "ddpm_reweight_only"),
    references=("positive_control", "negative_control", "anm"),
    settings={
        "ensembles": Setting(20, "test ensembles per context and seed", minimum=1),
        "samples": Setting(10, "structures per ensemble", minimum=1),
        "val_ensembles": Setting(20, "validation ensembles per context for tuning w and T", minimum=1),
        "pool_factor": Setting(5, "reweighting keeps `samples` of a pool this many times larger", minimum=1),
        "coverage_rmsd": Setting(2.0, "coverage radius, A (RMSD to a crystal state)", minimum=0.1),
        "guidance_grid": Setting(GUIDANCE_GRID, "classifier-free guidance values tried (both tuned arms)", minimum=0),
        "temperature_grid": Setting(TEMPERATURE_GRID, "noise scales tried (both tuned arms)", minimum=0.01),
        "exposures": Setting([0.85, 0.7, 0.5], "closed-half training fractions of the dose-response; 0.85 = recipe"),
        "negative_noise": Setting(0.3, "negative control: Gaussian noise per coordinate, A", minimum=0.0),
        "anm_rmsd": Setting(3.0, "ANM: mean RMSD of the samples to the open state, A", minimum=0.1),
    },
    tuning={
        "ddpm_debiased": Tuning(
            "validation", _GRID, _TRIALS, "max validation success with reweighting; ties: nearest w = 0, T = 1"
        ),
        "ddpm_biased": Tuning("validation", _GRID, _TRIALS, "min validation median RMSD to the nearest state"),
        "ddpm_no_reweight": Tuning("validation", _GRID, _TRIALS, "ddpm_debiased's w and T, without reweighting"),
        "ddpm_reweight_only": Tuning("validation", _GRID, _TRIALS, "ddpm_biased's w and T, plus reweighting"),
        "positive_control": Tuning("none", {}, 0, "no parameters"),
        "negative_control": Tuning("none", {}, 0, "the spec's 0.3 A noise"),
        "anm": Tuning("none", {}, 0, "the spec's ANM: cutoff 15 A, gamma 1, 3 modes, mean RMSD 3 A"),
    },
    seed_args=("seed_everything",),
    headline=("multistate_success", "coverage_open", "context_delta"),
    panels=4,
)


# ------------------------------------------------------------------------------------------- data


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


# ------------------------------------------------------------------------------------------- DDPM decoding


class Pools:
    """Sample pools of one checkpoint for one seed: ``ensembles x (samples * pool_factor)`` per context and (w, T).

    Ensemble k without reweighting is the first ``samples`` of its pool; with reweighting, ``samples`` of the pool
    drawn by inverse training-state frequency (:func:`zoo.promise.ddpm.importance_resample`).
    """

    def __init__(self, module, seed: int, settings: dict, validation: bool) -> None:
        self.module, self.seed, self.settings, self.validation = module, seed, settings, validation
        self.count = settings["val_ensembles"] if validation else settings["ensembles"]
        self._pools: dict = {}

    def pool(self, context: str, guidance: float, temperature: float) -> tuple[torch.Tensor, torch.Tensor]:
        """``(ensembles, P, L, 3)`` coordinates and their ``(ensembles, P)`` nearest-state indices."""
        key = (context, guidance, temperature)
        if key not in self._pools:
            s = self.settings
            size = s["samples"] * s["pool_factor"]
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
        frequency = self.module.state_frequency
        n = self.settings["samples"]
        return [ddpm.importance_resample(distances.argmin(dim=1), frequency, n, generator) for distances in rmsd]

    def ensembles(self, context: str, guidance: float, temperature: float, reweight: bool) -> list[torch.Tensor]:
        coords, _ = self.pool(context, guidance, temperature)
        if not reweight:
            return [pool[: self.settings["samples"]] for pool in coords]
        return [pool[idx] for pool, idx in zip(coords, self.picks(context, guidance, temperature))]


def tune(module, seed: int, settings: dict, pools=None) -> dict[str, dict[str, float]]:
    """Both tuned decoders' (w, T) for one checkpoint, on validation ensembles (``settings`` grids).

    Args:
        pools: This seed's validation :class:`Pools` when the caller already has them (their samples are reused).

    Returns:
        ``{"biased": {"guidance", "temperature", "val_median_rmsd"}, "debiased": {..., "val_success"}}``.
    """
    pools = pools or Pools(module, seed, settings, validation=True)
    threshold = settings["coverage_rmsd"]
    rows = []
    for guidance in settings["guidance_grid"]:
        for temperature in settings["temperature_grid"]:
            tables = [pools.pool(c, guidance, temperature)[1] for c in CONTEXTS]
            nearest = torch.cat([table.min(dim=-1).values.flatten() for table in tables])
            # Coverage of the reweighted apo ensembles from the pool's RMSD table (no new superpositions).
            _, table = pools.pool("apo", guidance, temperature)
            picks = pools.picks("apo", guidance, temperature)
            covered = torch.stack([table[k, idx].min(dim=0).values <= threshold for k, idx in enumerate(picks)])
            success = covered.all(dim=1).double().mean().item()
            coverage = covered.double().mean().item()
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


# ------------------------------------------------------------------------------------------- references


def control_ensembles(arm: str, seed: int, settings: dict) -> dict[str, list[np.ndarray]]:
    """The references' ensembles per context (context-blind: both contexts drawn the same way)."""
    adk = load_adk()
    open_state, closed_state = adk["states"]
    n, count = settings["samples"], settings["ensembles"]
    rng = np.random.default_rng([seed, PROTOCOL.references.index(arm)])
    if arm == "positive_control":
        runs = [adk["trajectories"][name] for name in TRAIN_TRAJECTORIES]
        closed_end = np.concatenate([run[:CONTROL_END_FRAMES] for run in runs])  # runs go closed -> open
        open_end = np.concatenate([run[-CONTROL_END_FRAMES:] for run in runs])

        def draw():
            half = n // 2
            return np.concatenate(
                [closed_end[rng.choice(len(closed_end), half, replace=False)],
                 open_end[rng.choice(len(open_end), n - half, replace=False)]]
            )  # fmt: skip
    elif arm == "negative_control":

        def draw():
            return closed_state + rng.normal(0.0, settings["negative_noise"], (n, *closed_state.shape))
    elif arm == "anm":
        sampler = ANMSampler(open_state, target_rmsd=settings["anm_rmsd"])

        def draw():
            return sampler.sample(n, rng)
    else:
        raise ValueError(f"unknown reference arm {arm!r}")
    return {context: [draw() for _ in range(count)] for context in CONTEXTS}


# ------------------------------------------------------------------------------------------- harness


def _checkpoint(run, exposure: float | None = None):
    """This seed's DDPM (published for seed 0 at the recipe's exposure), cached for all arms."""
    key = ("checkpoint", exposure)
    if key not in run.cache:
        overrides = [] if exposure is None else [f"--data.init_args.exposure={exposure}"]
        if not run.uses_published(PROTOCOL.method, overrides):
            # The recipe's validation ensembles only log; they draw from their own generators, so skipping
            # them leaves the trained weights unchanged and saves time.
            overrides.append("--trainer.limit_val_batches=0")
        run.cache[key] = run.load(PROTOCOL.method, overrides=overrides).eval()
    return run.cache[key]


def _tuned(run, exposure: float | None = None) -> dict:
    key = ("tuned", exposure)
    if key not in run.cache:
        run.cache[key] = tune(_checkpoint(run, exposure), run.seed, run.settings)
    return run.cache[key]


def measure(arm: str, run) -> dict[str, float]:
    """One arm, one seed: the harness's metrics (plus the chosen decoding for the DDPM arms)."""
    settings = run.settings
    if arm in PROTOCOL.references:
        scores = score_ensembles(target(), control_ensembles(arm, run.seed, settings), settings["coverage_rmsd"])
        if arm == "positive_control":
            open_state, closed_state = load_adk()["states"]
            scores["rmsd_open_closed"] = float(kabsch_rmsd(open_state, closed_state))
        return scores
    module = _checkpoint(run)
    tuned = _tuned(run)
    pools = run.cache.setdefault("test_pools", Pools(module, run.seed, settings, validation=False))
    decoding, reweight = _decoding_for(arm, tuned)
    scores = ddpm_scores(module, run.seed, settings, decoding, reweight, pools)
    scores |= {"guidance": decoding["guidance"], "temperature": decoding["temperature"], "tuning_trials": _TRIALS}
    if arm == "ddpm_biased":
        for exposure in settings["exposures"]:
            recipe_exposure = abs(exposure - 0.85) < 1e-9
            checkpoint = module if recipe_exposure else _checkpoint(run, exposure)
            chosen = tuned["biased"] if recipe_exposure else _tuned(run, exposure)["biased"]
            dose = scores if recipe_exposure else ddpm_scores(checkpoint, run.seed, settings, chosen, False)
            scores[f"success_exposure_{round(100 * exposure)}"] = dose["multistate_success"]
    if arm == PROTOCOL.method and run.weights is None and run.uses_published(arm):
        run.extras["tuned"] = tuned
    return scores


def score_pretrained(module, limit: int | None = None, decoding: dict | None = None) -> dict[str, float]:
    """``ddpm_debiased``'s metrics of a loaded checkpoint on seed 0's test ensembles (the first ``limit``).

    Args:
        module: A ProMiSE module.
        limit: Test ensembles per context (default: the protocol's 20).
        decoding: ``{"guidance", "temperature"}`` of the debiased decoder; None tunes it on validation (seed 0).
    """
    settings = {key: setting.default for key, setting in PROTOCOL.settings.items()}
    if limit is not None:
        settings["ensembles"] = int(limit)
    decoding = decoding or tune(module, 0, settings)["debiased"]
    return ddpm_scores(module.eval(), 0, settings, decoding, reweight=True)


# ------------------------------------------------------------------------------------------- claims, plot


def claims(result: dict) -> list[Claim]:
    """The spec's sanity checks and its claim analogue (thresholds from issue 21)."""
    arms, out = result["arms"], []
    if "positive_control" in arms:
        positive = arms["positive_control"]
        gap = abs(positive["rmsd_open_closed"] - 6.91)
        out.append(Claim.at_most("rmsd_open_closed", "open vs closed C-alpha RMSD is 6.91 +- 0.05 A (|gap| shown)",
                                 gap, 0.05, versus="positive_control"))  # fmt: skip
        out.append(Claim.at_least("positive_control_success", "the positive control has multi-state success 1",
                                  positive["multistate_success"], 1.0, versus="positive_control"))  # fmt: skip
    if "negative_control" in arms:
        negative = arms["negative_control"]
        out.append(Claim.at_most("negative_control_success", "the negative control has multi-state success 0",
                                 negative["multistate_success"], 0.0, versus="negative_control"))  # fmt: skip
        out.append(Claim.at_least("negative_control_covers_closed", "the negative control covers the closed state",
                                  negative["coverage_closed"], 1.0, versus="negative_control"))  # fmt: skip
    if "ddpm_biased" in arms:
        biased = arms["ddpm_biased"]
        out.append(Claim.at_most("biased_success", "the validation-tuned sharp decoder's success is <= 0.3",
                                 biased["multistate_success"], 0.3, versus="ddpm_biased"))  # fmt: skip
        delta = biased["context_delta"]
        out.append(Claim("biased_context_delta", "the biased decoder is context-insensitive: context delta < 0.2",
                         round(delta, 6), 0.2, bool(delta < 0.2), "ddpm_biased"))  # fmt: skip
    if "ddpm_biased" in arms and PROTOCOL.method in arms:
        out.append(beats(result, "multistate_success", PROTOCOL.method, "ddpm_biased", margin=0.3))
    if "anm" in arms and PROTOCOL.method in arms:
        out.append(beats(result, "multistate_success", PROTOCOL.method, "anm", margin=0.0))
    return out


def plot(result: dict, axes) -> None:
    """Success, coverage of each state, context delta, and the biased decoder's exposure dose-response."""
    bar_panel(axes[0], result, "multistate_success")
    bar_panel(axes[1], result, "coverage_open")
    bar_panel(axes[2], result, "context_delta")
    biased = result["arms"].get("ddpm_biased", {})
    keys = sorted((k for k in biased if k.startswith("success_exposure_") and not k.endswith("_std")),
                  key=lambda k: -int(k.rsplit("_", 1)[1]))  # fmt: skip
    if keys:
        x = [int(k.rsplit("_", 1)[1]) for k in keys]
        axes[3].errorbar(
            x,
            [biased[k] for k in keys],
            yerr=[biased[f"{k}_std"] for k in keys],
            marker="o",
            color=arm_colour(result, "ddpm_biased"),
            label="ddpm_biased (re-tuned per exposure)",
        )
        axes[3].set(xlabel="closed-half share of training frames (%)", ylabel="multi-state success", ylim=(-0.05, 1.05))
        axes[3].invert_xaxis()
        axes[3].legend(fontsize=7)
