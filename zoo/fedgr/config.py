"""Every constant of FedGR and of its baselines, as dataclasses (recipe arguments, stored in config.json).

Round numbers are 1-based, as in the paper: round ``r`` is the r-th communication round.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from zoo.fedgr.augment import AugmentConfig

METHODS = ("fedgr", "fedavg", "fedprox", "coteaching")
FORGET_RATES = ("oracle", "estimated")
#: FedGR's switches that make the ``fedgr_no_noise_handling`` arm: no sieve, no refining, no EMA distillation, so L_sr
#: is plain cross-entropy on every observed label. FedGR's views, lr, schedule, client sampling and L_reg stay:
#: the arm isolates what the noise handling adds to the rest of the recipe.
NO_NOISE_HANDLING = {"sieve": False, "refine": False, "distill": False}


@dataclass
class LocalConfig:
    """Local training of every method (the spec's SGD recipe).

    Args:
        epochs: Local epochs per round.
        batch_size: Mini-batch size.
        lr: SGD learning rate.
        momentum: SGD momentum.
        weight_decay: SGD weight decay.
    """

    epochs: int = 2
    batch_size: int = 32
    lr: float = 0.05
    momentum: float = 0.5
    weight_decay: float = 5e-4


@dataclass
class FedGRConfig:
    """FedGR's schedule and its three modules. Defaults are the scaled setting of this zoo (30 rounds).

    Args:
        sniff_rounds: Rounds 1..sniff_rounds are sniffing rounds: systematic client visits, plain CE locally,
            per-sample global-model losses uploaded to the server.
        warmup_rounds: The next rounds sample clients without replacement with probability ∝ 1 - ε̂_k.
        freeze_sniffing: Stop updating the GMM and the per-sample flags after sniffing and warm-up.
        loss_momentum: The uploaded per-sample loss is a running mean ``m·old + (1-m)·new`` over the
            client's visits (the first visit initialises it); 0 uses the latest loss only.
        gmm_max_iter: EM iterations of the server's 2-component GMM.
        gmm_tol: EM convergence tolerance.
        gmm_reg_covar: Variance floor of the GMM.
        clean_threshold: A sample is flagged noisy if its clean posterior c_i is below this.
        pseudo_threshold: A flagged sample gets the global model's pseudo-label only above this confidence.
        high_noise_threshold: Clients with ε̂_k at or above this train on pseudo-labels only.
        sieve: Run the server's GMM sieving (False, the ``fedgr_no_sieve`` ablation: no losses are uploaded,
            nothing is flagged, L_sr is plain CE on the observed labels and the warm-up samples uniformly).
        refine: Replace flagged labels by pseudo-labels (False: drop flagged samples, "sieving only").
        supervised_view: The view L_sr trains on: ``"weak"`` (as the baselines; issue 31) or ``"strong"`` (the
            spec's reading of the dev code). L_ema and L_reg always use the strong view.
        min_separation: The sieve's separation test: the GMM's split is used only if Ashman's D of its two
            components, ``√2·|μ₁ − μ₀| / √(σ₀² + σ₁²)``, is at least this (0 disables the test); otherwise
            every sample counts as clean (c_i = 1, ε̂_k = 0).
        min_noisy_weight: The split is also rejected when its high-loss component holds fewer samples than this.
        distill: Use the globally revised EMA distillation L_ema.
        soft_silent_round: Before this round the EMA teacher is reset to the global model and L_ema is off.
        teacher_revise_rate: At a client round's start, EMA ← (1 - rate)·EMA + rate·global.
        teacher_reset_pseudo_fraction: A client with ε̂_k > high_noise_threshold and fewer pseudo-labelled
            samples than this fraction resets its EMA teacher to the global model.
        ema_decay: EMA update toward the local model after every local step.
        distill_temperature: Temperature of the KL between teacher and student logits.
        distill_weight: Weight of L_ema from ``soft_silent_round`` on (not in the seen code; 1.0).
        regularise: Use the global representation regulariser L_reg.
        reg_weight: Weight of L_reg (``ssl_weight``).
        reg_temperature: Temperature of the softmax over embedding dimensions in L_reg.
        reg_start_round: First round with L_reg.
        client_sieve: Privacy variant (beyond the paper): each client fits the GMM on its own losses and
            keeps its flags; only ε̂_k and the client's two GMM means reach the server, not per-sample losses.
    """

    sniff_rounds: int = 10
    warmup_rounds: int = 5
    freeze_sniffing: bool = True
    loss_momentum: float = 0.5
    gmm_max_iter: int = 50
    gmm_tol: float = 1e-2
    gmm_reg_covar: float = 5e-4
    clean_threshold: float = 0.5
    pseudo_threshold: float = 0.9
    high_noise_threshold: float = 0.8
    sieve: bool = True
    refine: bool = True
    supervised_view: str = "weak"
    min_separation: float = 2.0
    min_noisy_weight: float = 0.05
    distill: bool = True
    soft_silent_round: int = 10
    teacher_revise_rate: float = 0.1
    teacher_reset_pseudo_fraction: float = 0.5
    ema_decay: float = 0.99
    distill_temperature: float = 0.5
    distill_weight: float = 1.0
    regularise: bool = True
    reg_weight: float = 0.1
    reg_temperature: float = 0.5
    reg_start_round: int = 1
    client_sieve: bool = False

    def __post_init__(self) -> None:
        if self.supervised_view not in ("weak", "strong"):
            raise ValueError(f"supervised_view must be 'weak' or 'strong', not {self.supervised_view!r}")
        if self.min_separation < 0:
            raise ValueError(f"min_separation must be >= 0, got {self.min_separation}")

    @property
    def sieve_until(self) -> int:
        """Last round in which the server refits its GMM (every round if not frozen)."""
        return self.sniff_rounds + self.warmup_rounds if self.freeze_sniffing else 2**31 - 1


@dataclass
class BaselineConfig:
    """Constants of the baselines.

    Args:
        prox_mu: FedProx proximal weight μ (loss + μ/2 ‖w − w_global‖²).
        coteach_ramp_rounds: Co-teaching's forget rate grows linearly to the client's noise rate over
            these many rounds.
        coteach_forget_rate: Which noise rate Co-teaching forgets: ``"oracle"`` (the client's true rate, the
            published baseline) or ``"estimated"`` (the ``coteaching_estimated`` arm: the client estimates it the
            way FedGR's sieve does, a 2-component GMM on the running-mean losses of the global model with
            FedGR's constants and separation test, refitted until ``FedGRConfig.sieve_until`` and then kept; fitted
            on the client's own losses as in ``client_sieve``, since Co-teaching uploads no losses to pool).
    """

    prox_mu: float = 0.01
    coteach_ramp_rounds: int = 5
    coteach_forget_rate: str = "oracle"

    def __post_init__(self) -> None:
        if self.coteach_forget_rate not in FORGET_RATES:
            raise ValueError(f"coteach_forget_rate must be one of {FORGET_RATES}, not {self.coteach_forget_rate!r}")


@dataclass
class RunConfig:
    """One federated run of one method: what both the server and the clients need to know.

    Args:
        method: ``"fedgr"``, ``"fedavg"``, ``"fedprox"`` or ``"coteaching"``.
        clients_per_round: Clients sampled per round.
        seed: Seed of the model initialisation, client sampling and local training randomness.
        num_classes: Number of classes.
        local: Local training.
        augment: Weak / strong views.
        fedgr: FedGR's constants (ignored by the baselines).
        baselines: The baselines' constants.
    """

    method: str = "fedgr"
    clients_per_round: int = 5
    seed: int = 0
    num_classes: int = 10
    local: LocalConfig = field(default_factory=LocalConfig)
    augment: AugmentConfig = field(default_factory=AugmentConfig)
    fedgr: FedGRConfig = field(default_factory=FedGRConfig)
    baselines: BaselineConfig = field(default_factory=BaselineConfig)

    def __post_init__(self) -> None:
        if self.method not in METHODS:
            raise ValueError(f"method must be one of {METHODS}, not {self.method!r}")
        if self.clients_per_round < 1:
            raise ValueError(f"clients_per_round must be positive, got {self.clients_per_round}")
