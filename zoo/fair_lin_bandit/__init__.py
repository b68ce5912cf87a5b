"""FairLinBandit: Nash and p-means regret in linear bandits (arXiv 2601.22969), against LinNash.

Registers FairLinBandit with phased elimination (default) and with OFUL, and the LinNash baseline. A bandit
algorithm has no learned weights: ``zoo.load(name)`` builds one, ``pretrained=True`` raises. Every
reconstruction choice is documented in :mod:`zoo.fair_lin_bandit.module`. This file imports only the registry.
"""

from zoo._registry import PaperRef, PretrainedCfg, register_model

PAPER = PaperRef(
    title="Improved Algorithms for Nash Welfare in Linear Bandits",
    arxiv="2601.22969",
    authors=("Dhruv Sarkar", "Nishant Pandey", "Sayak Ray Chowdhury"),
    code="https://github.com/NP-Hardest/FairLinBandit",
)

_NO_WEIGHTS = (
    "a bandit algorithm has no learned weights: it is built from its arguments and run on an instance; the card's "
    "numbers come from `zoo eval fair_lin_bandit` (instance files in hub_cards/fair_lin_bandit.fair_pe/instances.npz). "
)
_COMMON = (
    "Reconstructed from the abstract and LinNash: Phase 1 length c1 sqrt(T d log(TK)), a Bernstein-type "
    "multiplicative width, PE counts with the Bernoulli noise proxy 1/2; LinNash's constants (3, 16, 6, 2/3, "
    "caps lambda T~/3) checked against two public implementations (dhruv-sarkar/LinNash and the authors' "
    "NP-Hardest/FairLinBandit); c1 and LinNash's Part I multiplier tuned on validation seeds 100-109. Instances are "
    "built from river's tables and a synthetic control as the spec says: the paper's datasets and construction "
    "are not available. See zoo/fair_lin_bandit/module.py for every choice."
)
_MODULE = "zoo.fair_lin_bandit.module:FairLinBanditModule"
_SMOKE = ("--model.init_args.horizon=300", "--model.init_args.replicates=2", "--data.init_args.datasets=[phishing]")
_DATASETS = ("river-shuttle", "river-yeast", "river-phishing", "river-solarflare", "synthetic")


def _cfg(notes: str) -> PretrainedCfg:
    return PretrainedCfg(
        paper=PAPER,
        task="linear-bandit",
        datasets=_DATASETS,
        headline="nash_regret_20k",
        num_params=0,
        notes=_NO_WEIGHTS + notes + " " + _COMMON,
    )


register_model(
    "fair_lin_bandit.fair_pe",
    module=_MODULE,
    default=True,
    description="FairLinBandit-PE: fair Phase 1 exploration, Bernstein elimination, phased elimination",
    model_args={"algorithm": "fair_pe"},
    requires=("river",),
    extra="bandit",
    arm="fair_pe",
    smoke=_SMOKE,
    pretrained_cfg=_cfg("Target p = 0 (Nash); every R_p is reported from that one run."),
)

register_model(
    "fair_lin_bandit.fair_ucb",
    module=_MODULE,
    description="FairLinBandit-UCB: fair Phase 1 exploration, Bernstein elimination, OFUL warm-started",
    model_args={"algorithm": "fair_ucb"},
    requires=("river",),
    extra="bandit",
    arm="fair_ucb",
    smoke=_SMOKE,
    pretrained_cfg=_cfg("OFUL with beta_t for sub-Gaussian proxy 1/2, warm-started with Phase 1's data."),
)

register_model(
    "fair_lin_bandit.linnash",
    module=_MODULE,
    description="LinNash baseline (Sawarni, Pal & Barman 2023): round-robin Part I, Nash-confidence elimination",
    model_args={"algorithm": "linnash"},
    requires=("river",),
    extra="bandit",
    arm="linnash",
    smoke=_SMOKE,
    pretrained_cfg=_cfg("LinNash's published constants (3, 16, 6); its Part I multiplier tuned like c1."),
)
