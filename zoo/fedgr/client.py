"""Client-side local training of FedGR and of the baselines (plain torch, no Lightning, no Flower).

A trainer owns one client's data and turns ``(global weights, task, client state)`` into
``(update, new client state)``. It keeps nothing between rounds itself: the state it returns
(FedGR's EMA teacher and running-mean losses) is stored by whoever runs it: a dict in the in-process
Lightning loop, ``Context.state`` on a Flower SuperNode. Every random number of a round comes from a
generator seeded by the server's task, so a round gives the same result in either engine.

Batches are slices of tensors that hold the client's whole data set (no DataLoader): the views of an
epoch are drawn for all samples at once, then a random permutation is cut into mini-batches.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import torch
import torch.nn.functional as F

from zoo.fedgr.augment import strong_view, weak_view
from zoo.fedgr.config import FedGRConfig, RunConfig
from zoo.fedgr.federation import ClientData
from zoo.fedgr.net import SmallCNN
from zoo.fedgr.revise import lerp_, loss_weights, refine_labels, sieve_refine_loss, softened_kl, teacher_action
from zoo.fedgr.sieve import LossGMM, fit_loss_gmm, noise_estimate

State = dict[str, torch.Tensor]
PEER_PREFIX = "peer."
TEACHER_PREFIX = "teacher."


@dataclass
class ClientTask:
    """What the server asks of one client in one round.

    Args:
        client_id: The client.
        round_idx: Communication round (1-based).
        seed: Seed of every random number the client draws this round.
        upload_losses: Send the running-mean loss of the global model on each sample (FedGR sieving).
        clean_probability: The server's clean posterior c_i of the client's samples (in the order of its
            uploaded ``sample_ids``), or None if the server has not sieved this client.
        noise_estimate: The server's ε̂_k of the client, or None.
    """

    client_id: int
    round_idx: int
    seed: int
    upload_losses: bool = False
    clean_probability: np.ndarray | None = None
    noise_estimate: float | None = None


@dataclass
class ClientUpdate:
    """What a client returns to the server after a round.

    Args:
        client_id: The client.
        state: Local model weights (for co-teaching also the peer network's, prefixed ``peer.``).
        num_examples: Size of the client's data set (the FedAvg weight).
        sample_ids: Federation-wide ids of the samples whose losses are uploaded.
        loss_mean: Their running-mean global-model losses (FedGR sieving rounds only).
        metrics: Scalars for logs (mean local loss, pseudo-label fraction, ...).
    """

    client_id: int
    state: State
    num_examples: int
    sample_ids: np.ndarray | None = None
    loss_mean: np.ndarray | None = None
    metrics: dict[str, float] = field(default_factory=dict)


def task_seed(seed: int, round_idx: int, client_id: int) -> int:
    """A 63-bit seed for one client round, independent of the order in which clients run."""
    return int(np.random.SeedSequence([seed, round_idx, client_id]).generate_state(2, np.uint64)[0] >> np.uint64(1))


class ClientTrainer:
    """FedAvg local training: SGD on the weak view with the observed labels.

    Subclasses change the loss (:class:`FedProxTrainer`), the networks (:class:`CoTeachingTrainer`) or the
    whole round (:class:`FedGRTrainer`).

    Args:
        data: The client's data.
        config: The run.
        device: Where the client trains.
    """

    def __init__(self, data: ClientData, config: RunConfig, device: str | torch.device = "cpu") -> None:
        if len(data) == 0:
            raise ValueError(f"client {data.client_id} has no samples; every client needs at least one")
        self.data = data
        self.config = config
        self.device = torch.device(device)
        self.images = torch.from_numpy(np.ascontiguousarray(data.images)).to(self.device)
        self.labels = torch.from_numpy(np.ascontiguousarray(data.labels)).long().to(self.device)
        self.model = self._new_model()

    def _new_model(self) -> SmallCNN:
        return SmallCNN(num_classes=self.config.num_classes).to(self.device)

    def __len__(self) -> int:
        return len(self.data)

    # -------------------------------------------------------------------------------------------- the round

    def fit(self, global_state: State, task: ClientTask, state: State | None = None) -> tuple[ClientUpdate, State]:
        """Train locally from the global weights; return the update and the client's new state.

        Args:
            global_state: Global weights (a state dict of the server's model).
            task: The server's instructions.
            state: What this client kept from its previous rounds (None on its first round).
        """
        generator = torch.Generator(device=self.device).manual_seed(task.seed)
        self.model.load_state_dict(_model_part(global_state))
        optimizer = self._optimizer(self.model)
        context = self.begin_round(global_state, task, dict(state or {}), generator)
        losses = []
        for _ in range(self.config.local.epochs):
            views = self.epoch_views(context, generator)
            for index in self.batches(generator):
                loss = self.batch_loss(index, views, context)
                optimizer.zero_grad(set_to_none=True)
                loss.backward()
                optimizer.step()
                self.after_step(context)
                losses.append(loss.detach())
        metrics = {"loss": float(torch.stack(losses).mean()) if losses else 0.0, **context.get("metrics", {})}
        update = ClientUpdate(
            client_id=self.data.client_id,
            state=self.local_state(context),
            num_examples=len(self),
            metrics=metrics,
        )
        return self.end_round(update, task, context)

    def _optimizer(self, model: torch.nn.Module) -> torch.optim.Optimizer:
        local = self.config.local
        # foreach: one multi-tensor update instead of a Python loop over the 8 parameters (same numbers)
        return torch.optim.SGD(
            model.parameters(), lr=local.lr, momentum=local.momentum, weight_decay=local.weight_decay, foreach=True
        )

    def batches(self, generator: torch.Generator):
        """Random mini-batches of sample positions (the last one may be smaller)."""
        order = torch.randperm(len(self), generator=generator, device=self.device)
        yield from order.split(self.config.local.batch_size)

    # ------------------------------------------------------------------------------------------------ hooks

    def begin_round(self, global_state: State, task: ClientTask, state: State, generator: torch.Generator) -> dict:
        """Per-round preparation; returns the context the other hooks read (``state`` is the client state)."""
        return {"task": task, "state": state, "global_state": global_state}

    def epoch_views(self, context: dict, generator: torch.Generator) -> dict[str, torch.Tensor]:
        """The inputs of one epoch for all samples: here a fresh weak view."""
        return {"weak": weak_view(self.images, generator, self.config.augment)}

    def batch_loss(self, index: torch.Tensor, views: dict[str, torch.Tensor], context: dict) -> torch.Tensor:
        """The loss of one mini-batch."""
        return F.cross_entropy(self.model(views["weak"][index]), self.labels[index])

    def after_step(self, context: dict) -> None:
        """Runs after each optimiser step."""

    def local_state(self, context: dict) -> State:
        """The weights sent back to the server."""
        return {k: v.detach().clone() for k, v in self.model.state_dict().items()}

    def end_round(self, update: ClientUpdate, task: ClientTask, context: dict) -> tuple[ClientUpdate, State]:
        """Last chance to edit the update; returns it with the client's new state."""
        return update, context["state"]


class FedProxTrainer(ClientTrainer):
    """FedProx: the FedAvg loss plus ``μ/2 ‖w − w_global‖²`` (Li et al., 2020)."""

    def begin_round(self, global_state, task, state, generator):
        context = super().begin_round(global_state, task, state, generator)
        context["anchor"] = [global_state[name].detach() for name, _ in self.model.named_parameters()]
        return context

    def batch_loss(self, index, views, context):
        loss = super().batch_loss(index, views, context)
        drift = sum((p - a).pow(2).sum() for p, a in zip(self.model.parameters(), context["anchor"]))
        return loss + 0.5 * self.config.baselines.prox_mu * drift


class CoTeachingTrainer(ClientTrainer):
    """FedAvg with local Co-teaching (Han et al., 2018): two networks, each trained on its peer's small-loss picks.

    In each mini-batch each network keeps the ``1 − forget`` fraction of samples with its smallest loss and
    its peer is updated on them. ``forget`` grows linearly from 0 to the client's noise rate over
    ``coteach_ramp_rounds`` rounds. Co-teaching assumes the noise rate is known, so by default the client's true
    rate is used (``coteach_forget_rate="oracle"``, an oracle that favours this baseline). With ``"estimated"``
    the client estimates its rate as FedGR's sieve does (:meth:`estimated_noise_rate`). Both networks are
    averaged by the server; the first is the published global model.
    """

    def __init__(self, data, config, device="cpu"):
        super().__init__(data, config, device)
        self.peer = self._new_model()

    def fit(self, global_state, task, state=None):
        self.peer.load_state_dict(_peer_part(global_state))
        return super().fit(global_state, task, state)

    def begin_round(self, global_state, task, state, generator):
        context = super().begin_round(global_state, task, state, generator)
        ramp = min(1.0, task.round_idx / max(1, self.config.baselines.coteach_ramp_rounds))
        metrics = {}
        if self.config.baselines.coteach_forget_rate == "estimated":
            rate = metrics["noise_estimate"] = self.estimated_noise_rate(task, context["state"])
        else:
            rate = self.data.noise_rate
        context["forget"] = rate * ramp
        context["peer_optimizer"] = self._optimizer(self.peer)
        context["metrics"] = {"forget_rate": context["forget"], **metrics}
        return context

    @torch.no_grad()
    def estimated_noise_rate(self, task: ClientTask, state: State) -> float:
        """ε̂_k as FedGR estimates it, without the true labels and without uploading a per-sample loss.

        Until round ``fedgr.sieve_until`` each visit updates the running mean (``fedgr.loss_momentum``) of the
        global model's loss on every unaugmented sample and refits the client's own 2-component GMM on it
        (:func:`sieve_losses`, FedGR's constants and separation test); ε̂_k is the fraction the GMM flags. Later
        visits keep the last estimate, as FedGR's frozen sieve does. The network holds the global weights here
        (``fit`` loads them before ``begin_round``). Kept in the client state (``loss_mean``, ``noise_estimate``).
        """
        cfg = self.config.fedgr
        if task.round_idx > cfg.sieve_until and "noise_estimate" in state:
            return float(state["noise_estimate"])
        fresh = F.cross_entropy(self.model(self.images), self.labels, reduction="none")
        previous = state.get("loss_mean")
        m = cfg.loss_momentum
        state["loss_mean"] = fresh if previous is None else m * previous.to(fresh) + (1.0 - m) * fresh
        _, estimate, _ = sieve_losses(state["loss_mean"], cfg, self.config.seed)
        state["noise_estimate"] = torch.tensor(estimate)
        return float(estimate)

    def batch_loss(self, index, views, context):
        x, y = views["weak"][index], self.labels[index]
        logits, peer_logits = self.model(x), self.peer(x)
        loss = F.cross_entropy(logits, y, reduction="none")
        peer_loss = F.cross_entropy(peer_logits, y, reduction="none")
        keep = max(1, math.ceil((1.0 - context["forget"]) * len(index)))
        mine = loss.detach().argsort()[:keep]  # what this network finds clean: trains the peer
        theirs = peer_loss.detach().argsort()[:keep]
        peer_optimizer = context["peer_optimizer"]
        peer_optimizer.zero_grad(set_to_none=True)
        peer_loss[mine].mean().backward()
        peer_optimizer.step()
        return loss[theirs].mean()

    def local_state(self, context):
        state = super().local_state(context)
        state.update({PEER_PREFIX + k: v.detach().clone() for k, v in self.peer.state_dict().items()})
        return state


class FedGRTrainer(ClientTrainer):
    """FedGR's client: label refining, globally revised EMA distillation and representation regularisation.

    Per round: the global model's outputs on one weak view of every sample give the pseudo-labels and
    the target embeddings of L_reg; the EMA teacher is reset or revised toward the global model and gives
    the distillation targets on the same weak view. The student trains with ``L_sr + w_reg·L_reg + w_ema·L_ema``:
    L_sr on a fresh weak view per epoch (``supervised_view="weak"``, as the baselines train; the spec's
    ``"strong"`` puts it on the strong view), L_reg and L_ema on a fresh strong view of the round's weak view;
    the teacher follows the student by EMA after every step. In sieving rounds the global model's loss on
    each (unaugmented) sample updates a running mean that is uploaded with the sample ids.
    """

    def __init__(self, data, config, device="cpu"):
        super().__init__(data, config, device)
        self.global_model = self._new_model().requires_grad_(False)
        self.teacher = self._new_model().requires_grad_(False) if config.fedgr.distill else None
        self.sample_ids = np.asarray(data.sample_ids, dtype=np.int64)

    @torch.no_grad()
    def begin_round(self, global_state, task, state, generator):
        context = super().begin_round(global_state, task, state, generator)
        cfg = self.config.fedgr
        self.global_model.load_state_dict(_model_part(global_state))
        weights = loss_weights(task.round_idx, cfg)
        weak = weak_view(self.images, generator, self.config.augment)
        global_logits, global_embedding = self.global_model(weak, return_embedding=True)
        if task.upload_losses:
            fresh = F.cross_entropy(self.global_model(self.images), self.labels, reduction="none")
            previous = state.get("loss_mean")
            m = cfg.loss_momentum
            state["loss_mean"] = fresh if previous is None else m * previous.to(fresh) + (1.0 - m) * fresh
            if cfg.client_sieve:
                self._sieve_locally(state)
        clean_probability, estimate = task.clean_probability, task.noise_estimate
        if cfg.client_sieve and "clean_probability" in state:
            clean_probability, estimate = state["clean_probability"], float(state["noise_estimate"])
        sieve = None
        if weights.sieved and clean_probability is not None:
            sieve = torch.as_tensor(clean_probability, dtype=torch.float32, device=self.device)
        refined = refine_labels(global_logits.softmax(dim=1), sieve, estimate or 0.0, cfg)
        context.update(weak=weak, weights=weights, refined=refined, global_embedding=global_embedding)
        metrics = {"kept_fraction": float(refined.keep.float().mean()), "pseudo_fraction": refined.pseudo_fraction}
        if self.teacher is not None:
            teacher_keys = [k for k in state if k.startswith(TEACHER_PREFIX)]
            confident = float((global_logits.softmax(dim=1).max(dim=1).values > cfg.pseudo_threshold).float().mean())
            action = teacher_action(task.round_idx, cfg, estimate, confident, bool(teacher_keys))
            self.teacher.load_state_dict(
                _model_part(global_state)
                if action == "reset"
                else {k[len(TEACHER_PREFIX) :]: state[k].to(self.device) for k in teacher_keys}
            )
            if action == "revise":
                lerp_(self.teacher.parameters(), self.global_model.parameters(), cfg.teacher_revise_rate)
            if weights.distill > 0:
                context["teacher_logits"] = self.teacher(weak)
            metrics["teacher_reset"] = float(action == "reset")
        context["metrics"] = metrics
        return context

    def _sieve_locally(self, state: State) -> None:
        """The privacy variant: this client's own GMM on its own running-mean losses."""
        clean, estimate, gmm = sieve_losses(state["loss_mean"], self.config.fedgr, self.config.seed)
        state["clean_probability"] = torch.as_tensor(clean, dtype=torch.float32)
        state["noise_estimate"] = torch.tensor(estimate)
        state["gmm_means"] = torch.as_tensor(gmm.means, dtype=torch.float32)

    def epoch_views(self, context, generator):
        views = {"strong": strong_view(context["weak"], generator, self.config.augment)}
        if self.config.fedgr.supervised_view == "weak":  # a fresh weak view per epoch, as the baselines get
            views["weak"] = weak_view(self.images, generator, self.config.augment)
        return views

    def batch_loss(self, index, views, context):
        cfg, weights = self.config.fedgr, context["weights"]
        consistency = weights.reg > 0 or weights.distill > 0
        if cfg.supervised_view == "weak":
            # L_sr on the weak view; L_ema and L_reg compare the student's strong view with the targets of the
            # round's weak view. One forward pass over both halves.
            inputs = torch.cat([views["weak"][index], views["strong"][index]]) if consistency else views["weak"][index]
            all_logits, all_embedding = self.model(inputs, return_embedding=True)
            logits = all_logits[: len(index)]
            strong_logits, strong_embedding = all_logits[len(index) :], all_embedding[len(index) :]
        else:  # the spec's choice: every term on the strong view
            logits, embedding = self.model(views["strong"][index], return_embedding=True)
            strong_logits, strong_embedding = logits, embedding
        loss = sieve_refine_loss(logits, self.labels[index], context["refined"], index)
        if weights.reg > 0:
            loss = loss + weights.reg * softened_kl(
                context["global_embedding"][index], strong_embedding, cfg.reg_temperature
            )
        if weights.distill > 0:
            loss = loss + weights.distill * softened_kl(
                context["teacher_logits"][index], strong_logits, cfg.distill_temperature
            )
        return loss

    def after_step(self, context):
        if self.teacher is not None:
            lerp_(self.teacher.parameters(), self.model.parameters(), 1.0 - self.config.fedgr.ema_decay)

    def end_round(self, update, task, context):
        state = context["state"]
        if self.teacher is not None:
            state.update({TEACHER_PREFIX + k: v.detach().clone() for k, v in self.teacher.state_dict().items()})
        if task.upload_losses and self.config.fedgr.client_sieve:
            clean_mean, noisy_mean = state["gmm_means"].tolist()
            update.metrics.update(
                noise_estimate=float(state["noise_estimate"]), gmm_clean_mean=clean_mean, gmm_noisy_mean=noisy_mean
            )
        elif task.upload_losses:
            update.sample_ids = self.sample_ids.copy()
            update.loss_mean = state["loss_mean"].detach().cpu().numpy().astype(np.float64)
        return update, state


def sieve_losses(loss_mean: torch.Tensor, config: FedGRConfig, seed: int) -> tuple[np.ndarray, float, LossGMM]:
    """One client's own sieve: FedGR's 2-component GMM on its per-sample losses, ε̂_k the flagged fraction.

    Args:
        loss_mean: ``[n]`` running-mean losses of the global model on the client's samples.
        config: FedGR's constants (GMM iterations, tolerance, variance floor, separation test, clean threshold).
        seed: Seed of the GMM's initialisation.

    Returns:
        The clean posteriors c_i (all 1 when the split fails the separation test), ε̂_k and the fitted GMM.
    """
    values = loss_mean.detach().cpu().numpy().astype(np.float64)
    gmm = fit_loss_gmm(
        values, max_iter=config.gmm_max_iter, tol=config.gmm_tol, reg_covar=config.gmm_reg_covar, seed=seed
    )
    clean = (
        gmm.clean_probability(values)
        if gmm.is_separated(config.min_separation, config.min_noisy_weight)
        else np.ones(len(values))
    )
    return clean, noise_estimate(clean, config.clean_threshold), gmm


TRAINERS: dict[str, type[ClientTrainer]] = {
    "fedavg": ClientTrainer,
    "fedprox": FedProxTrainer,
    "coteaching": CoTeachingTrainer,
    "fedgr": FedGRTrainer,
}


def make_trainer(data: ClientData, config: RunConfig, device: str | torch.device = "cpu") -> ClientTrainer:
    """The client trainer of ``config.method`` for one client."""
    return TRAINERS[config.method](data, config, device)


def _model_part(state: State) -> State:
    return {k: v for k, v in state.items() if not k.startswith(PEER_PREFIX)}


def _peer_part(state: State) -> State:
    return {k[len(PEER_PREFIX) :]: v for k, v in state.items() if k.startswith(PEER_PREFIX)}
