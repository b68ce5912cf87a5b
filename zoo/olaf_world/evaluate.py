"""``zoo eval olaf_world``: SeqDelta-REPA against the plain beta-VAE LAM on held-out Crafter worlds.

Arms (``zoo eval olaf_world --settings`` lists the keys):

* ``lam_align`` (the method, recipe ``recipes/olaf_world/align.yaml``) and ``lam_vae`` (lambda = 0, the
  paper's baseline, ``recipes/olaf_world/vae.yaml``): seed 0 is each published checkpoint, seeds 1 and 2
  train here from the same recipes (``--retrain`` trains seed 0 too);
* ablations, one per component of the target, trained from the ``lam_align`` recipe:
  ``lam_align_static`` (tau = the clip's mean teacher feature, not its temporal difference) and
  ``lam_align_random_teacher`` (tau from a randomly initialised EfficientNet-Lite0);
* reference ``random_encoder``: the LAM architecture with fresh weights (the probe floor; no learning).

Metrics on the test worlds 30-39 (context A) and 80-89 (context B), never used for training or tuning
(:mod:`zoo.olaf_world.metrics` defines them): ``probe_acc_cross``, ``probe_acc_within``,
``proto_diag_minus_offdiag``, ``pixel_mse``, ``transfer_acc``. The inverse-dynamics classifiers of
``transfer_acc`` are trained once per context on the true labels of the training worlds' transitions (seed
0, the same for every arm); their accuracy on true test frame pairs is in ``extras`` (``idm_acc_*``), the
ceiling of ``transfer_acc``.

With ``ZOO_OLAF_WORLD_EVAL_CACHE`` set to a folder, every (arm, seed) result is kept there as JSON, so the
evaluation runs in pieces (``benchmarks/eval_pieces.py``-style) and a later ``--card`` run reads them.
"""

from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path

import numpy as np
import torch

from zoo._eval import Claim, Protocol, Run, Setting, Tuning, beats, cached_piece, piece_file
from zoo._figures import bar_panel
from zoo.olaf_world.metrics import classify, probe_accuracies, prototype_gap, train_inverse_dynamics

CACHE_ENV = "ZOO_OLAF_WORLD_EVAL_CACHE"
SPLIT = "terrain"  # the recipes' data.init_args.split (the world split has no transfer gap: see the card)
TUNING_FILE = Path(__file__).with_name("tuning.json")
LEARNED = ("lam_align", "lam_vae", "lam_align_static", "lam_align_random_teacher")
ABLATION_OVERRIDES = {
    "lam_align_static": ("--data.init_args.target=static",),
    "lam_align_random_teacher": ("--data.init_args.teacher=random_efficientnet_lite0",),
}


def _tuning() -> dict[str, Tuning]:
    """The validation record of ``zoo/olaf_world/tuning.json`` (written by the pilot runs)."""
    record = json.loads(TUNING_FILE.read_text()) if TUNING_FILE.is_file() else {}
    out = {}
    for arm in ("lam_align", "lam_vae"):
        entry = record.get(arm, {})
        out[arm] = Tuning(
            entry.get("split", "validation"), entry.get("grid", {}), int(entry.get("trials", 0)), entry.get("note", "")
        )
    for arm in ABLATION_OVERRIDES:
        out[arm] = Tuning("none", {}, 0, "lam_align's recipe with the one switch of the ablation")
    out["random_encoder"] = Tuning("none", {}, 0, "no learning: fresh weights seeded by the run's seed")
    return out


PROTOCOL = Protocol(
    method="lam_align",
    baselines=("lam_vae",),
    ablations=tuple(ABLATION_OVERRIDES),
    references=("random_encoder",),
    settings={
        "split": Setting(
            SPLIT,
            "what separates the contexts: world seeds, or grass vs cave starts (the harder split)",
            choices=("world", "terrain"),
            recipe_keys=("data.init_args.split",),
        ),
        "test_seeds_per_context": Setting(10, "test worlds per context (30.. and 80..)", minimum=2),
        "idm_steps": Setting(600, "Adam steps of each inverse-dynamics classifier (transfer_acc)", minimum=1),
    },
    tuning=_tuning(),
    seed_args=("seed_everything", "model.init_args.seed"),
    headline=("probe_acc_cross", "proto_diag_minus_offdiag", "transfer_acc"),
    panels=3,
)


@lru_cache(maxsize=4)
def _datamodule(test_seeds_per_context: int, split: str = SPLIT):
    from zoo.olaf_world.data import LatentActionVideoDataModule

    return LatentActionVideoDataModule(split=split, eval_seeds_per_context=test_seeds_per_context)


@lru_cache(maxsize=2)
def test_clips(test_seeds_per_context: int = 10, split: str = SPLIT) -> dict[str, np.ndarray]:
    """The held-out test clips (non-overlapping, T = 4) of worlds 30.. and 80.."""
    return _datamodule(test_seeds_per_context, split).clips("test")


@lru_cache(maxsize=4)
def inverse_dynamics(context: int, steps: int = 600, split: str = SPLIT):
    """The inverse-dynamics CNN of one context, trained on its training worlds' true transitions (seed 0)."""
    train = _datamodule(10, split).clips("train")
    chosen = train["context"] == context
    videos = train["videos"][chosen]
    return train_inverse_dynamics(videos[:, 0], videos[:, 1], train["actions"][chosen, 0], steps=steps, seed=0)


@torch.no_grad()
def encode(model, videos: np.ndarray, batch: int = 128) -> tuple[np.ndarray, float]:
    """mu_z ``(N, T-1, d)`` of uint8 clips and the mean next-frame reconstruction MSE."""
    mus, squared = [], 0.0
    for start in range(0, len(videos), batch):
        v = torch.as_tensor(videos[start : start + batch]).float() / 255.0
        out = model.lam(v, sample=False)
        mus.append(out["mu"])
        squared += float((v[:, 1:] - out["recon"]).pow(2).sum())
    return torch.cat(mus).numpy(), squared / (len(videos) * (videos.shape[1] - 1) * np.prod(videos.shape[2:]))


@torch.no_grad()
def transfer_accuracy(model, clips: dict[str, np.ndarray], mu: np.ndarray, idms: dict, seed: int = 0) -> dict:
    """Decode each transition's mu from one context onto a random frame of the other; classify with its IDM."""
    rng = np.random.default_rng(seed)
    steps = clips["actions"].shape[1]
    previous = clips["videos"][:, :-1].reshape(-1, *clips["videos"].shape[2:])
    following = clips["videos"][:, 1:].reshape(-1, *clips["videos"].shape[2:])
    actions = clips["actions"].reshape(-1)
    context = np.repeat(clips["context"], steps)
    z = mu.reshape(-1, mu.shape[-1])
    out = {}
    for source in (0, 1):
        target = 1 - source
        src = np.flatnonzero(context == source)
        dst = rng.choice(np.flatnonzero(context == target), size=len(src), replace=True)
        frames = torch.as_tensor(previous[dst]).float() / 255.0
        decoded = torch.cat(
            [
                model.decode(frames[i : i + 256, None], torch.as_tensor(z[src[i : i + 256], None]))[:, 0]
                for i in range(0, len(src), 256)
            ]
        )
        predicted = classify(idms[target], frames, decoded)
        out[f"transfer_acc_{'ab'[source]}_to_{'ab'[target]}"] = float((predicted == actions[src]).mean())
        true_pairs = np.flatnonzero(context == target)
        ceiling = classify(
            idms[target],
            torch.as_tensor(previous[true_pairs]).float() / 255.0,
            torch.as_tensor(following[true_pairs]).float() / 255.0,
        )
        out[f"idm_acc_{'ab'[target]}"] = float((ceiling == actions[true_pairs]).mean())
    out["transfer_acc"] = (out["transfer_acc_a_to_b"] + out["transfer_acc_b_to_a"]) / 2
    return out


def score(
    model, test_seeds_per_context: int = 10, idm_steps: int = 600, seed: int = 0, split: str = SPLIT
) -> dict[str, float]:
    """Every metric of one trained (or untrained) LAM on the test clips."""
    model = model.eval()
    clips = test_clips(test_seeds_per_context, split)
    mu, pixel_mse = encode(model, clips["videos"])
    steps = clips["actions"].shape[1]
    flat = mu.reshape(-1, mu.shape[-1])
    actions = clips["actions"].reshape(-1)
    context = np.repeat(clips["context"], steps)
    world_seed = np.repeat(clips["world_seed"], steps)
    metrics = probe_accuracies(flat, actions, context, world_seed)
    metrics["proto_diag_minus_offdiag"] = prototype_gap(flat, actions, context)
    metrics["pixel_mse"] = pixel_mse
    idms = {c: inverse_dynamics(c, idm_steps, split) for c in (0, 1)}
    transfer = transfer_accuracy(model, clips, mu, idms, seed)
    metrics["transfer_acc"] = transfer.pop("transfer_acc")
    metrics["_extras"] = transfer
    return metrics


def _model(arm: str, run: Run):
    if arm == "random_encoder":
        return run.untrained("lam_align", seed=run.seed)  # the module seeds its own weights (default 0)
    if arm in ABLATION_OVERRIDES:
        return run.load(arm, base="lam_align", overrides=list(ABLATION_OVERRIDES[arm]))
    return run.load(arm)


def measure(arm: str, run: Run) -> dict[str, float]:
    settings = run.settings
    path = None
    if arm in LEARNED:
        published = run.uses_published(arm) if arm not in ABLATION_OVERRIDES else False
        path = piece_file(
            CACHE_ENV,
            f"{arm}-seed{run.seed}",
            lambda: {"arm": arm, "seed": run.seed, "settings": settings, "published": published,
                     "pins": _pins(arm) if published else None, "recipes": _recipes()},
        )  # fmt: skip

    def compute() -> dict:
        metrics = score(
            _model(arm, run), settings["test_seeds_per_context"], settings["idm_steps"], split=settings["split"]
        )
        extras = metrics.pop("_extras")
        return {"metrics": metrics, "extras": extras}

    stored = cached_piece(path, compute)
    run.extras[arm] = stored["extras"]
    return stored["metrics"]


def _pins(arm: str) -> dict:
    from zoo._eval import paper_arms

    return dict(paper_arms("olaf_world")[arm].pretrained_cfg.sha256)


def _recipes() -> dict:
    root = Path(__file__).resolve().parents[2] / "recipes" / "olaf_world"
    return {p.name: p.read_text() for p in sorted(root.glob("*.yaml"))} if root.is_dir() else {}


def claims(result: dict) -> list[Claim]:
    arms = result["arms"]
    vae = arms["lam_vae"]
    out = [
        beats(result, "probe_acc_cross", "lam_align", "random_encoder", margin=0.1),
        Claim.at_least(
            "headroom_within_minus_cross_lam_vae",
            "headroom gate: lam_vae's within-context probe is >= 10 points above its cross-context probe",
            vae["probe_acc_within"] - vae["probe_acc_cross"],
            0.10,
            "lam_vae",
        ),
        Claim.at_most(
            "headroom_cross_lam_vae",
            "headroom gate: lam_vae's cross-context probe is at most 85%",
            vae["probe_acc_cross"],
            0.85,
            "lam_vae",
        ),
        beats(result, "probe_acc_cross", "lam_align", "lam_vae", margin=0.10),
        beats(result, "proto_diag_minus_offdiag", "lam_align", "lam_vae", margin=0.2),
        _mse_claim(result),
        beats(result, "transfer_acc", "lam_align", "lam_vae", margin=0.0),
    ]
    return out


def _mse_claim(result: dict) -> Claim:
    ratio = result["arms"]["lam_align"]["pixel_mse"] / max(result["arms"]["lam_vae"]["pixel_mse"], 1e-12)
    return Claim.at_most(
        "lam_align_pixel_mse_ratio_lam_vae",
        "lam_align's pixel MSE is no more than 10% worse than lam_vae's (ratio of the seed means)",
        ratio,
        1.10,
        "lam_vae",
    )


def plot(result: dict, axes) -> None:
    bar_panel(axes[0], result, "probe_acc_cross", ylabel="cross-context probe accuracy")
    bar_panel(axes[1], result, "proto_diag_minus_offdiag", ylabel="prototype cosine: diag - offdiag")
    bar_panel(axes[2], result, "transfer_acc", ylabel="zero-shot transfer accuracy (IDM)")


def score_pretrained(module, limit: int | None = None, split: str = SPLIT) -> dict[str, float]:
    """The cross- and within-context probes of a loaded checkpoint on the test clips.

    Args:
        module: A loaded :class:`~zoo.olaf_world.module.OlafLAMModule`.
        limit: Test worlds per context (default 10, the card's; the probes need at least 2).
        split: The contexts (the recipes').
    """
    clips = test_clips(limit or 10, split)
    mu, pixel_mse = encode(module.eval(), clips["videos"])
    steps = clips["actions"].shape[1]
    out = probe_accuracies(
        mu.reshape(-1, mu.shape[-1]),
        clips["actions"].reshape(-1),
        np.repeat(clips["context"], steps),
        np.repeat(clips["world_seed"], steps),
    )
    out["pixel_mse"] = pixel_mse
    return out
