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
    "are not available. See zoo/fair_lin_bandit/module.py for every choice. "
    + "What fails and why (10 test seeds, means over the 5 instances): (1) fair_pe's R_p(20k)/R_p(2k) is 0.59, "
    "0.58, 0.57, 0.57, 0.71 at p = 1, 0.5, 0, -1, -5 (threshold 0.5). Plain PE without Phase 1 has the same "
    "ratios (0.59, 0.58, 0.58, 0.60, 0.81): the phased-elimination schedule (Lattimore-Szepesvari counts, "
    "sigma = 1/2, delta = 1/T) spends 334, 1378, 5675 rounds on its first three phases at T = 20k, so at 2k it is "
    "still exploring (R_1 0.41, uniform 0.46) and at 20k it has only eliminated gaps above ~0.5; the 1/sqrt(T) "
    "decay starts later: on validation seeds 100-109 fair_pe's Nash regret falls from 0.2545 at 20k to 0.1164 at "
    "100k (0.457 over 5x T, the 1/sqrt(T) rate). Phase 1 is not the cause: at c1 = 0.25 it lasts 127 / 436 rounds "
    "at T = 2k / 20k and "
    "its Bernstein width (median 0.94 / 0.57) removed no arm on the validation instance inspected. "
    "(2) fair_ucb passes at p >= -1 (0.37-0.38) but not "
    "at p = -5 (0.555; OFUL alone 0.476): Phase 1's rounds have a mean reward well below mu*, and a fraction "
    "T1/T of such rounds enters M_-5 like (T1/T)^(1/5); with T1 ~ sqrt(T) that term falls only as T^(-1/10) "
    "(10^(-0.1) = 0.79 over 2k -> 20k); on validation shuttle the bound mu* - m1 (T/T1)^(1/5) alone is 0.347 / "
    "0.215 of the measured 0.358 / 0.248. Where OFUL's worst round is low (shuttle, solarflare: E[mu] 0.10-0.11) "
    "Phase 1 does protect p = -5 (shuttle 0.248 vs OFUL 0.339 at 20k). (3) On synthetic, R_-5(20k) is 0.298 "
    "(fair_pe) and 0.073 (fair_ucb) "
    "against OFUL's 0.062: OFUL's early rounds on these instances are not worse than Phase 1's fair mixture "
    "(every synthetic arm has mu >= 0.40 on validation seed 100), so fair exploration costs at p = -5 "
    "instead of protecting it; "
    "fair_pe also pays for PE's slow schedule. The 20%-below-LinNash claim holds on 5 of 5 instances for both, "
    "but LinNash with its published constants eliminates no arm before T = 20k (its Part II width at gamma = 0.9 "
    "is 1.19) and its Nash regret (0.468) is at uniform's (0.461): the win says little. The ablation fair_pe vs "
    "fair_pe_linnash_width holds by 0.007 only."
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
