"""olaf_world validation pilots: does the LAM learn the actions, and does the teacher's tau carry them?

Everything here reads only the training worlds (fit) and the validation worlds 40-49 / 90-99 (probes); the test
worlds are never touched. Two parts, each written to the JSON file as soon as it is done:

* ``teacher``: for each teacher variant, the per-transition feature difference ``normalize(s_{t+1} - s_t)`` (tau
  of a 2-frame clip) of the validation frames is probed for the true action with the same logistic-regression
  probes as the LAM (within a context / across contexts, halves by world seed). Variants: the pooled vector and
  the spatial map (2 x 2 at 64 px, 4 x 4 at 128 px) of EfficientNet-Lite0, and a random EfficientNet-Lite0.
* ``lam``: short fits (plain loop: AdamW, gradient clip 0.3, batch 16, the module's own loss) of LAM variants
  with lambda = 0 (the baseline must learn the actions too), each scored on the validation clips at a few
  step counts: val probes within / cross, val pixel MSE, mean KL.

Run under the shared CPU lock (about 4-5 minutes with the defaults):

    flock /tmp/zoo-cpu.lock .venv/bin/python benchmarks/olaf_world_pilot.py --out benchmarks/olaf_world_pilot.json
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np
import torch

VARIANTS = {
    # name: (module overrides, steps)
    "shift_p16": ({"shift_kernel": 15, "patch": 16}, 300),
    "beta0_p16": ({"beta": 0.0, "patch": 16}, 200),
    "shift_p8": ({"shift_kernel": 15, "patch": 8}, 300),
}
OPTIONAL = {
    "shift_p16_beta0": ({"shift_kernel": 15, "patch": 16, "beta": 0.0}, 300),
    # deterministic start: logvar bias -6 (z ~ mu at init) and beta 1e-6 (2e-4 x ~80 nats would outweigh the MSE)
    "shift_p16_det": ({"shift_kernel": 15, "patch": 16, "beta": 1e-6, "logvar_init": -6.0}, 400),
    "det_p16": ({"patch": 16, "beta": 1e-6, "logvar_init": -6.0}, 300),
    # a narrow latent (4 dims, not 32): less room for frame-t content, the scroll needs ~2
    "shift_p16_det_z4": ({"shift_kernel": 15, "patch": 16, "beta": 1e-6, "logvar_init": -6.0, "latent_dim": 4}, 300),
    "shift_p16_det_motion": (
        {"shift_kernel": 15, "patch": 16, "beta": 1e-6, "logvar_init": -6.0, "motion_tokens": True},
        250,
    ),
    # shift_p16_det + SeqDelta-REPA with tau from the keypoint readout (80-d) of the frozen EfficientNet-Lite0
    "shift_p16_det_align_kp": (
        {"shift_kernel": 15, "patch": 16, "beta": 1e-6, "logvar_init": -6.0, "align_weight": 0.02, "teacher_dim": 80},
        400,
    ),
}
# Diagnostics, not models: the encoder trained *with* the true actions (cross-entropy of a linear head on mu):
# can this encoder learn to see the action at all within the budget? (the unsupervised fits above cannot be
# better than this)
SUPERVISED = {
    "supervised_p16": ({"patch": 16}, 300),
    "supervised_p8": ({"patch": 8}, 200),
    "supervised_p16_motion": ({"patch": 16, "motion_tokens": True}, 200),
}
TAU_READOUT = {"shift_p16_det_align_kp": "keypoints"}


def teacher_probes(val: dict, out: dict, write) -> None:
    from zoo.common import efficientnet
    from zoo.olaf_world.metrics import probe_accuracies

    prev = val["frame_index"][:, :-1].reshape(-1)
    nxt = val["frame_index"][:, 1:].reshape(-1)
    steps = val["actions"].shape[1]
    labels = (
        val["actions"].reshape(-1),
        np.repeat(val["context"], steps),
        np.repeat(val["world_seed"], steps),
    )

    def probe(feats: np.ndarray) -> dict:
        delta = feats[nxt] - feats[prev]
        delta = delta / np.maximum(np.linalg.norm(delta, axis=1, keepdims=True), 1e-12)
        if delta.shape[1] > efficientnet.FEATURE_DIM:  # wide maps: PCA to 256 dims first (unsupervised; keeps it cheap)
            from sklearn.decomposition import PCA

            delta = PCA(min(256, len(delta) - 1), svd_solver="randomized", random_state=0).fit_transform(delta)
        return probe_accuracies(delta, *labels)

    def cells_mean(feats: np.ndarray, grid: int) -> np.ndarray:
        return feats.reshape(len(feats), efficientnet.FEATURE_DIM, grid * grid).mean(axis=2)

    models = {"efficientnet_lite0": None, "random_efficientnet_lite0": efficientnet.random_efficientnet_lite0(0)}
    for teacher, size, grid in (
        ("efficientnet_lite0", 64, 2),
        ("efficientnet_lite0", 128, 4),
        ("random_efficientnet_lite0", 64, 2),
        ("random_efficientnet_lite0", 128, 4),
    ):
        started = time.perf_counter()
        feats = efficientnet.features(val["frames"], size=size, model=models[teacher], grid=grid)
        seconds = time.perf_counter() - started
        out["teacher"][f"{teacher}@{size}px/map{grid}x{grid}"] = {**probe(feats), "features_s": seconds}
        out["teacher"][f"{teacher}@{size}px/pooled"] = probe(cells_mean(feats, grid))
        write()


def keypoint_probes(val: dict, out: dict, write) -> None:
    from zoo.common import efficientnet
    from zoo.olaf_world.metrics import probe_accuracies

    prev = val["frame_index"][:, :-1].reshape(-1)
    nxt = val["frame_index"][:, 1:].reshape(-1)
    steps = val["actions"].shape[1]
    labels = (val["actions"].reshape(-1), np.repeat(val["context"], steps), np.repeat(val["world_seed"], steps))
    models = {"efficientnet_lite0": efficientnet.efficientnet_lite0(), "random_efficientnet_lite0": None}
    models["random_efficientnet_lite0"] = efficientnet.random_efficientnet_lite0(0)
    for teacher, model in models.items():
        started = time.perf_counter()
        feats = keypoint_features(val["frames"], model)
        seconds = time.perf_counter() - started
        for stride, f in feats.items():
            delta = f[nxt] - f[prev]  # not normalised: a no-move transition keeps its ~0 difference
            out["teacher"][f"{teacher}@64px/keypoints_stride{stride}"] = {
                **probe_accuracies(delta, *labels),
                "features_s": seconds,
            }
        write()


@torch.no_grad()
def keypoint_features(frames: np.ndarray, model, strides=(4, 8), size: int = 64) -> dict[int, np.ndarray]:
    """Per-channel centroids (E[x], E[y]) of the positive activations of EfficientNet's last block at each stride.

    A frozen "where" encoder (spatial soft-argmax keypoints of frozen features): when the view scrolls, every
    centroid moves with it, whatever the content.
    """
    from zoo.common.efficientnet import preprocess

    out: dict[int, list] = {s: [] for s in strides}
    for start in range(0, len(frames), 256):
        x = preprocess(frames[start : start + 256], size=size)
        x = model._swish(model._bn0(model._conv_stem(x)))
        maps = {}
        for block in model._blocks:
            x = block(x)
            stride = size // x.shape[-1]
            if stride in out:
                maps[stride] = x
        for stride, a in maps.items():
            m = a.clamp_min(0)
            m = m / m.sum(dim=(2, 3), keepdim=True).clamp_min(1e-6)
            h, w = m.shape[-2:]
            ys = torch.linspace(-1, 1, h)[:, None]
            xs = torch.linspace(-1, 1, w)[None, :]
            centroid = torch.cat([(m * xs).sum(dim=(2, 3)), (m * ys).sum(dim=(2, 3))], dim=1)
            out[stride].append(centroid.numpy())
    return {s: np.concatenate(v) for s, v in out.items()}


def lam_pilot(
    name: str, overrides: dict, steps: int, train: dict, val: dict, out: dict, write, tau: np.ndarray | None = None
) -> None:
    from zoo.olaf_world.metrics import probe_accuracies
    from zoo.olaf_world.module import OlafLAMModule

    kwargs = {"align_weight": 0.0, "beta": 2e-4, "lr": 1e-3, "seed": 0, **overrides}
    module = OlafLAMModule(**kwargs)
    supervised = name in SUPERVISED
    if supervised:
        module.action_head = torch.nn.Linear(module.lam.latent_dim, 6)
    optimiser = module.configure_optimizers()
    rng = np.random.default_rng(0)
    videos = train["videos"]
    record = {"kwargs": kwargs, "evals": []}
    out["lam"][name] = record
    val_videos = torch.as_tensor(val["videos"]).float() / 255.0
    t_steps = val["actions"].shape[1]
    labels = (
        val["actions"].reshape(-1),
        np.repeat(val["context"], t_steps),
        np.repeat(val["world_seed"], t_steps),
    )
    checkpoints = sorted({steps // 2, steps})
    started = time.perf_counter()
    train_s = 0.0
    for step in range(1, steps + 1):
        t0 = time.perf_counter()
        index = rng.integers(0, len(videos), 16)
        batch = {"videos": torch.as_tensor(videos[index]).float() / 255.0}
        if tau is not None:
            batch["tau"] = torch.as_tensor(tau[index])
        module.train()
        if supervised:
            mu = module.lam.encode(batch["videos"])[0]
            ce = torch.nn.functional.cross_entropy(
                module.action_head(mu).reshape(-1, 6), torch.as_tensor(train["actions"][index]).reshape(-1)
            )
            losses = {"loss": ce, "mse": ce.detach()}
        else:
            losses = module.losses(batch)
        optimiser.zero_grad()
        losses["loss"].backward()
        torch.nn.utils.clip_grad_norm_(module.parameters(), 0.3)
        optimiser.step()
        train_s += time.perf_counter() - t0
        if step in checkpoints:
            module.eval()
            with torch.no_grad():
                mus, logvars, se = [], [], 0.0
                for i in range(0, len(val_videos), 128):
                    o = module.lam(val_videos[i : i + 128], sample=False)
                    mus.append(o["mu"])
                    logvars.append(o["logvar"])
                    se += float((val_videos[i : i + 128, 1:] - o["recon"]).pow(2).sum())
                mu, logvar = torch.cat(mus), torch.cat(logvars)
                kl = float((-0.5 * (1 + logvar - mu.pow(2) - logvar.exp()).sum(-1)).mean())
            copy_mse = float((val_videos[:, 1:] - val_videos[:, :-1]).pow(2).mean())
            probes = probe_accuracies(mu.reshape(-1, mu.shape[-1]).numpy(), *labels)
            record["evals"].append(
                {
                    "step": step,
                    **probes,
                    "val_mse": se / val_videos[:, 1:].numel(),
                    "copy_mse": copy_mse,
                    "val_kl": kl,
                    "train_mse": float(losses["mse"]),
                    **({"train_align": float(losses["align"])} if "align" in losses else {}),
                    "train_s_per_step": train_s / step,
                    "wall_s": time.perf_counter() - started,
                }
            )
            print(name, record["evals"][-1], flush=True)
            write()


START = time.perf_counter()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("benchmarks/olaf_world_pilot.json"))
    parser.add_argument("--variants", nargs="*", default=list(VARIANTS), choices=[*VARIANTS, *OPTIONAL, *SUPERVISED])
    parser.add_argument("--steps-scale", type=float, default=1.0, help="multiply every variant's steps (smoke: 0.01)")
    parser.add_argument("--budget-s", type=float, default=200.0, help="start no variant after this")
    parser.add_argument("--no-teacher", action="store_true")
    parser.add_argument("--keypoints", action="store_true", help="only the keypoint teacher probes")
    parser.add_argument("--val-seeds", type=int, default=10)
    args = parser.parse_args()
    torch.set_num_threads(2)
    from zoo.olaf_world.data import LatentActionVideoDataModule

    dm = LatentActionVideoDataModule(split="terrain", eval_seeds_per_context=args.val_seeds)
    val = dm.clips("val")
    out = {"budget_s": args.budget_s, "teacher": {}, "lam": {}, "skipped": []}

    def write() -> None:
        out["elapsed_s"] = time.perf_counter() - START
        args.out.write_text(json.dumps(out, indent=1))

    if args.keypoints:
        keypoint_probes(val, out, write)
        print(json.dumps(out["teacher"], indent=1), flush=True)
    elif not args.no_teacher:
        teacher_probes(val, out, write)
        print(json.dumps(out["teacher"], indent=1), flush=True)
    train = dm.clips("train")
    for name in args.variants:
        overrides, steps = {**VARIANTS, **OPTIONAL, **SUPERVISED}[name]
        steps = max(2, int(steps * args.steps_scale))
        if time.perf_counter() - START > args.budget_s:
            out["skipped"].append(name)
            continue
        tau = None
        if name in TAU_READOUT:
            tau_dm = LatentActionVideoDataModule(split="terrain", teacher_readout=TAU_READOUT[name])
            started = time.perf_counter()
            tau = tau_dm.tau(train)
            out.setdefault("tau_s", {})[name] = time.perf_counter() - started
        lam_pilot(name, overrides, steps, train, val, out, write, tau)
    write()


if __name__ == "__main__":
    main()
