"""``FedGRModule``: one communication round of FedGR (or of a baseline) per Lightning ``training_step``.

Paper: *Learning Locally, Revising Globally: Global Reviser for Federated Learning with Noisy Labels*,
Y. Tian, M. Yang, Y. Zhou, J. Wang, Q. Ye, T. Liu, G. Niu, J. Lv, ICML 2026, arXiv:2412.00452.

The module holds the global model (``self.model``, a :class:`~zoo.fedgr.net.SmallCNN`) and, for FedGR,
the server's sieving state as buffers (per-sample clean posteriors, per-client noise estimates, the GMM),
so a published checkpoint carries what the server learnt about the clients. Training uses manual
optimisation: each step builds the round's tasks with the server strategy, runs the sampled clients'
local SGD with the plain-torch client trainers (:mod:`zoo.fedgr.client`), and aggregates; the same
server and client objects run unchanged on Flower (:mod:`zoo.fedgr.flower`). ``forward`` is the global
model's logits, so a loaded checkpoint is an ordinary Fashion-MNIST classifier.

Faithful to the paper's method as read from the authors' development code: FedAvg aggregation weighted by
client size; server-side 2-component GMM on uploaded running-mean losses of the global model (max_iter 50,
tol 1e-2, reg_covar 5e-4), c_i = posterior of the low-mean component, flagged if c_i < 0.5, ε̂_k = flagged
fraction, frozen after sniffing + warm-up; sniffing / warm-up (∝ 1 − ε̂_k) / uniform client sampling;
pseudo-labels above 0.9 confidence; L_sr with the ε̂_k ≥ 0.8 pseudo-label-only rule; EMA teacher revised as
0.9·EMA + 0.1·global (reset before ``soft_silent_round`` or for ε̂_k > 0.8 with < 50% pseudo-labels),
EMA decay 0.99 over local steps, KL at temperature 0.5; L_reg as a KL between temperature-0.5 softmaxes of
the global and local 128-d embeddings, weight 0.1; SGD momentum 0.5, weight decay 5e-4, batch 32.

Deviations and reconstructed choices (R = the spec leaves it open):

* Scale: Fashion-MNIST (not CIFAR / Clothing1M), a 0.2 M-parameter CNN (not ResNet-18), 10 clients × 600
  images, 5 clients per round, 80 rounds of 5 local epochs (not 100 clients, 500 rounds, 10 epochs; the
  spec's 30 x 2 never let FedAvg memorise the noisy labels, issue 31). The schedule is scaled accordingly:
  10 sniffing rounds (each client visited 5 times), 5 warm-up rounds, ``soft_silent_round`` = 10, GMM frozen
  after round 15.
* Learning rate 0.05 for FedGR instead of the paper's 0.01: with 30 rounds of 2 local epochs (the paper:
  500 x 10) lr 0.01 left the global model too weak at the end of sniffing for the GMM to separate the losses
  (an exploratory seed-0 run, scored on the held-out training images, never on the test set: detection F1
  0.77 at lr 0.01, 0.88 at lr 0.05). The baselines' learning rates are chosen on the clients' validation
  split (python -m zoo.fedgr.tune).
* (R) L_ema's weight after ``soft_silent_round`` is 0.3 (not in the seen code; chosen on the clients'
  validation split from {1.0, 0.3}); the KL is not multiplied by T².
* (R) L_reg is on from round 1; L_sr sieves from the first round after sniffing.
* (R) The uploaded "running mean" loss is an exponential mean over the client's visits with momentum 0.5,
  computed by the global model on the unaugmented image; the GMM is fitted on the current round's uploads.
* (R) After the GMM freezes, clients stop uploading losses and keep their last c_i and ε̂_k.
* (R) L_sr averages over the samples that are not ignored; an unflagged sample's loss is CE on its own
  label, a flagged one with a confident pseudo-label uses c_i·CE(ỹ) + (1 − c_i)·CE(ŷ).
* (R) Teacher logits, pseudo-labels and global embeddings come from one weak view per sample drawn at the
  start of the client round; the student sees a fresh strong view of that weak view each epoch.
* (R) Views: weak = shift ±2 px + horizontal flip; strong = weak + contrast ×[0.7, 1.3] + one erasing box
  of 4-10 px + Gaussian noise σ = 0.1. The baselines train on the weak view.
* Issue 31 changes (the dev-code reading cost FedGR 5-12 points against FedAvg at this scale):
  - L_sr trains on a fresh weak view per epoch, as the baselines do (``supervised_view="weak"``); the strong
    view feeds only L_ema and L_reg. The spec's choice (everything on the strong view) is
    ``supervised_view="strong"``.
  - The sieve's split is used only if it passes a separation test (Ashman's D >= 2 and a high-loss
    component of >= 5% of the samples, :mod:`zoo.fedgr.sieve`); otherwise nothing is flagged. The dev code
    trusted every split and called 30-50% of a clean federation's samples noisy.
  - Refining never relabels a sample the sieve calls clean (c_i >= 0.5), also on clients with ε̂_k >= 0.8.
  - The loss weights (L_ema, L_reg) and the baselines' learning rates are chosen on a validation split of the
    clients' own noisy data (``python -m zoo.fedgr.tune``), never on the test set.
  - Local epochs 5 (spec: 2): with 2, FedAvg was still improving at round 60 and never memorised the noisy
    labels, so the setting could not show what FedGR is for.
* Co-teaching baseline: FedAvg of two networks trained by local Co-teaching with the client's true noise
  rate as forget rate (an oracle, which favours the baseline), ramped in over 5 rounds.
  ``baselines.coteach_forget_rate="estimated"`` forgets the rate each client estimates with FedGR's GMM sieve on
  its own losses instead (the ``coteaching_estimated`` arm of ``python -m zoo.fedgr.tune_noise``).
"""

from __future__ import annotations

import json
import time
import warnings
from pathlib import Path

import lightning.pytorch as pl
import numpy as np
import torch

from zoo._distributed import refuse_distributed
from zoo._errors import ZooError
from zoo._inference import ImageClassifierMixin
from zoo.fedgr import INPUT
from zoo.fedgr.augment import AugmentConfig
from zoo.fedgr.config import BaselineConfig, FedGRConfig, LocalConfig, RunConfig
from zoo.fedgr.data import RoundInput
from zoo.fedgr.federation import Federation
from zoo.fedgr.net import seeded_model
from zoo.fedgr.server import FedAvgServer, FedGRServer, make_server, run_round
from zoo.fedgr.sieve import LossGMM, detection_f1

#: Images per forward pass when scoring (the per-round test curve, ``zoo eval``'s accuracy). Small chunks stay
#: in the CPU caches: 10,000 test images score ~4x faster in chunks of 250 than of 2,500 on one thread, with
#: bit-identical logits (each image's logits do not depend on the chunk it is in).
SCORE_CHUNK = 250

# The local SGD optimisers live in the client trainers (fresh per client round, as in FL), so the module
# has no optimiser of its own for Lightning to manage.
warnings.filterwarnings("ignore", message=r".*configure_optimizers` returned `None`.*")


class FedGRModule(ImageClassifierMixin, pl.LightningModule):
    """Federated training under label noise; ``training_step`` is one communication round.

    Inference: ``model.predict(raw)`` takes Fashion-MNIST pixels (uint8, or floats in [0, 1]; the network
    normalises them itself) and returns class ids, named by ``model.label_names``.

    Args:
        method: ``"fedgr"`` or a baseline: ``"fedavg"``, ``"fedprox"``, ``"coteaching"``.
        num_clients: Number of clients K (must match the datamodule).
        samples_per_client: Images per client (must match the datamodule; sizes FedGR's sieving buffers).
        clients_per_round: Clients sampled per round.
        seed: Seed of the initial weights, the client sampling and every client's local randomness.
        num_classes: Number of classes.
        local: Local SGD settings.
        augment: Weak and strong views.
        fedgr: FedGR's schedule and modules (ignored by the baselines).
        baselines: FedProx's μ and co-teaching's ramp.
        curve_test_limit: Record the global model's accuracy on the first N test images after every round
            (``test_curve``; monitoring for ``zoo eval``'s ``accuracy_best``, never used in training). None: off.
    """

    HEAD = "model.head"  # zoo.load(name, pretrained=True, num_classes=K) replaces it
    DEFAULT_PRETRAINED_CFG = INPUT

    def __init__(
        self,
        method: str = "fedgr",
        num_clients: int = 10,
        samples_per_client: int = 600,
        clients_per_round: int = 5,
        seed: int = 0,
        num_classes: int = 10,
        local: LocalConfig | None = None,
        augment: AugmentConfig | None = None,
        fedgr: FedGRConfig | None = None,
        baselines: BaselineConfig | None = None,
        curve_test_limit: int | None = None,
    ) -> None:
        super().__init__()
        local, augment = local or LocalConfig(), augment or AugmentConfig()
        fedgr, baselines = fedgr or FedGRConfig(), baselines or BaselineConfig()
        self.save_hyperparameters()
        self.run_config = RunConfig(
            method=method,
            clients_per_round=clients_per_round,
            seed=seed,
            num_classes=num_classes,
            local=local,
            augment=augment,
            fedgr=fedgr,
            baselines=baselines,
        )
        self.automatic_optimization = False
        self.model = seeded_model(seed, num_classes)
        if method == "fedgr":
            self.register_buffer("clean_probability", torch.ones(num_clients * samples_per_client))
            self.register_buffer("noise_estimate", torch.zeros(num_clients))
            self.register_buffer("gmm_means", torch.zeros(2))
            self.register_buffer("gmm_variances", torch.zeros(2))
            self.register_buffer("gmm_weights", torch.zeros(2))
        self.example_input_array = torch.zeros(2, 1, 28, 28)
        self.server: FedAvgServer | None = None
        self.trainers: dict = {}
        self.client_states: dict = {}
        self._federation_summary: dict | None = None
        self._local_steps = 0
        self.test_curve: list[float] = []  # per round, with curve_test_limit
        self.client_val_curve: list[float] = []  # per round, with the datamodule's client_val_fraction

    # ---------------------------------------------------------------------------------------- inference

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        """Class logits of the global model for ``[B, 1, 28, 28]`` images in [0, 1] (or uint8 ``[B, 28, 28]``)."""
        return self.model(images)

    # ------------------------------------------------------------------------------------------ training

    def configure_optimizers(self) -> None:
        return None

    def setup(self, stage: str) -> None:
        refuse_distributed(self, "each process would run the whole federation; scale FedGR out with Flower", stage)

    def _start(self, federation: Federation) -> None:
        spec = federation.spec
        expected = (self.hparams.num_clients, self.hparams.samples_per_client)
        if (spec.num_clients, spec.samples_per_client) != expected:
            raise ZooError(
                f"the data has {spec.num_clients} clients x {spec.samples_per_client} samples but the model was built "
                f"for {expected[0]} x {expected[1]}; set model.init_args.num_clients / samples_per_client to match"
            )
        from zoo.fedgr.client import make_trainer

        self.server = make_server(self.run_config, federation.num_clients, self.device)
        # Start from the module's weights, so a loaded checkpoint can be trained further.
        self.server.global_state.update({k: v.detach().clone() for k, v in self.model.state_dict().items()})
        self.trainers = {
            k: make_trainer(federation.client(k), self.run_config, self.device) for k in range(spec.num_clients)
        }
        self.client_states = {}
        self._federation_summary = federation.summary()

    def training_step(self, batch: RoundInput, batch_idx: int) -> None:
        """One communication round: the server's tasks, the sampled clients' local training, aggregation."""
        federation = batch.federation
        if self.server is None:
            self._start(federation)
        round_idx = self.current_epoch + 1
        started = time.perf_counter()
        updates = run_round(self.server, self.trainers, self.client_states, round_idx)
        self.model.load_state_dict({k: v for k, v in self.server.global_state.items() if k in self.model.state_dict()})
        local = self.run_config.local
        self._local_steps += sum(local.epochs * -(-u.num_examples // local.batch_size) for u in updates)
        logs = {
            "train/loss": float(
                np.average([u.metrics["loss"] for u in updates], weights=[u.num_examples for u in updates])
            ),
            "train/round_s": time.perf_counter() - started,
        }
        if isinstance(self.server, FedGRServer):
            logs.update(self._sync_sieve(federation))
            logs["train/kept_fraction"] = float(np.mean([u.metrics["kept_fraction"] for u in updates]))
            logs["train/pseudo_fraction"] = float(np.mean([u.metrics["pseudo_fraction"] for u in updates]))
        logs.update(self._curves(federation))
        self.log_dict(logs, on_step=False, on_epoch=True, batch_size=1)

    @torch.no_grad()
    def _curves(self, federation: Federation) -> dict[str, float]:
        """Accuracy after this round on the test slice and on the clients' own held-out (noisy) labels."""
        logs = {}
        if self.hparams.curve_test_limit:
            from zoo.fedgr.data import fashion_mnist_test

            images, labels = fashion_mnist_test(self.hparams.curve_test_limit)
            self.test_curve.append(self._score(images, labels))
            logs["curve/test_acc"] = self.test_curve[-1]
        if federation.client_val_samples:
            self.client_val_curve.append(self._score(*federation.client_validation()))
            logs["curve/client_val_acc"] = self.client_val_curve[-1]
        return logs

    def _score(self, images: np.ndarray, labels: np.ndarray) -> float:
        """Accuracy of the global model on raw images, by the same path as :meth:`predict` (and the evaluation)."""
        return float((self.predict(images, batch_size=SCORE_CHUNK).numpy() == labels).mean())

    def _sync_sieve(self, federation: Federation) -> dict[str, float]:
        """Copy the server's sieving state into the buffers; return detection scores (monitoring only)."""
        server = self.server
        flat = server.flat_clean_probability(len(federation.true_labels))
        for client, state in self.client_states.items():  # the privacy variant keeps the flags on the clients
            if "clean_probability" in state:
                flat[self.trainers[client].sample_ids] = state["clean_probability"].cpu().numpy()
        self.clean_probability.copy_(torch.as_tensor(flat, dtype=torch.float32))
        estimates = np.array([server.noise_estimates.get(k, 0.0) for k in range(federation.num_clients)])
        self.noise_estimate.copy_(torch.as_tensor(estimates, dtype=torch.float32))
        if server.gmm is not None:
            for name in ("means", "variances", "weights"):
                getattr(self, f"gmm_{name}").copy_(torch.as_tensor(getattr(server.gmm, name), dtype=torch.float32))
        sieved = [self.trainers[k].sample_ids for k in server.noise_estimates]
        if not sieved:
            return {}
        seen = np.concatenate(sieved)
        visited = sorted(server.noise_estimates)
        return {
            "sieve/noise_f1": detection_f1(
                flat[seen] < self.run_config.fedgr.clean_threshold, federation.is_noisy[seen]
            ),
            "sieve/noise_rate_mae": float(np.mean(np.abs(estimates[visited] - federation.noise_rates[visited]))),
        }

    # -------------------------------------------------------------------------------------- evaluation

    def _accuracy(self, batch, name: str) -> None:
        images, labels = batch
        accuracy = (self(images).argmax(1) == labels).float().mean()
        self.log(name, accuracy, prog_bar=True, batch_size=len(labels))

    def validation_step(self, batch, batch_idx: int) -> None:
        self._accuracy(batch, "val/acc")

    def test_step(self, batch, batch_idx: int) -> None:
        self._accuracy(batch, "test/acc")

    def predict_step(self, batch, batch_idx: int) -> torch.Tensor:
        images = batch[0] if isinstance(batch, list | tuple) else batch
        return self(images).argmax(1)

    # ---------------------------------------------------------------------------------------- publishing

    def import_files(self, folder) -> None:
        """Read the per-round curves back from config.json's metadata (what :meth:`export_metadata` wrote)."""
        metadata = json.loads((Path(folder) / "config.json").read_text()).get("metadata", {})
        self.test_curve = list(metadata.get("test_curve", []))
        self.client_val_curve = list(metadata.get("client_val_curve", []))

    def export_metadata(self) -> dict:
        """Facts stored in config.json: the data, the server's estimates, the schedule."""
        fedgr = self.run_config.fedgr
        metadata: dict = {"method": self.hparams.method, "local_sgd_steps": self._local_steps}
        if self.test_curve:
            metadata["test_curve"] = [round(v, 4) for v in self.test_curve]
        if self.client_val_curve:
            metadata["client_val_curve"] = [round(v, 4) for v in self.client_val_curve]
        if self._federation_summary is not None:
            metadata["federation"] = self._federation_summary
        if self.hparams.method == "fedgr":
            metadata["noise_estimates"] = [round(float(v), 4) for v in self.noise_estimate]
            metadata["gmm"] = {
                "means": self.gmm_means.tolist(),
                "variances": self.gmm_variances.tolist(),
                "weights": self.gmm_weights.tolist(),
            }
            if self.gmm_variances.sum() > 0:
                gmm = LossGMM(*(getattr(self, f"gmm_{k}").double().numpy() for k in ("means", "variances", "weights")))
                metadata["gmm"]["separation"] = round(gmm.separation, 4)
                metadata["gmm"]["separated"] = gmm.is_separated(fedgr.min_separation, fedgr.min_noisy_weight)
            metadata["schedule"] = {
                "sniffing_rounds": [1, fedgr.sniff_rounds],
                "warmup_rounds": [fedgr.sniff_rounds + 1, fedgr.sniff_rounds + fedgr.warmup_rounds],
                "gmm_frozen_after_round": fedgr.sieve_until if fedgr.freeze_sniffing else None,
                "ema_distillation_from_round": fedgr.soft_silent_round,
            }
        return metadata
