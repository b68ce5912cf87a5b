"""FairLinBandit: Nash and p-means regret in linear bandits (arXiv 2601.22969), against LinNash.

Registers FairLinBandit with phased elimination (default) and with OFUL, and the LinNash baseline. A bandit
algorithm has no learned weights: ``zoo.load(name)`` builds one, ``pretrained=True`` raises. Every
reconstruction choice is documented in :mod:`zoo.fair_lin_bandit.module`; the card's text is in ``card.md``.
This file imports only the registry.
"""

from zoo._registry import Entry, PaperRef, register_paper

PAPER = PaperRef(
    title="Improved Algorithms for Nash Welfare in Linear Bandits",
    arxiv="2601.22969",
    authors=("Dhruv Sarkar", "Nishant Pandey", "Sayak Ray Chowdhury"),
    code="https://github.com/NP-Hardest/FairLinBandit",
)

_NO_WEIGHTS = (
    "A bandit algorithm has no learned weights: it is built from its arguments and run on an instance; the card's "
    "numbers come from `zoo eval fair_lin_bandit` (instance files in hub_cards/fair_lin_bandit.fair_pe/instances.npz). "
)

ENTRIES = {
    "fair_pe": Entry(
        default=True,
        arm="fair_pe",
        model_args={"algorithm": "fair_pe"},
        description="FairLinBandit-PE: fair Phase 1 exploration, Bernstein elimination, phased elimination",
        notes=_NO_WEIGHTS + "FairLinBandit with phased elimination after its fair Phase 1, targeting p = 0 (Nash); "
        "every R_p is reported from that one run.",
    ),
    "fair_ucb": Entry(
        arm="fair_ucb",
        model_args={"algorithm": "fair_ucb"},
        description="FairLinBandit-UCB: fair Phase 1 exploration, Bernstein elimination, OFUL warm-started",
        notes=_NO_WEIGHTS + "FairLinBandit with OFUL (beta_t for sub-Gaussian proxy 1/2) after its fair Phase 1, "
        "warm-started with Phase 1's data.",
    ),
    "linnash": Entry(
        arm="linnash",
        model_args={"algorithm": "linnash"},
        description="LinNash baseline (Sawarni, Pal & Barman 2023): round-robin Part I, Nash-confidence elimination",
        notes=_NO_WEIGHTS + "LinNash with its Part I multiplier (3 published) and a scale of its elimination "
        "constants (16, 6; 1 published) tuned on the validation instances, so that it eliminates arms within T; the "
        "published constants eliminate none by T = 20k (the evaluation's linnash_published arm).",
    ),
}

register_paper(
    "fair_lin_bandit",
    PAPER,
    ENTRIES,
    module="zoo.fair_lin_bandit.module:FairLinBanditModule",
    requires=("river",),
    extra="bandit",
    smoke=("--model.init_args.horizon=300", "--model.init_args.replicates=2", "--data.init_args.datasets=[phishing]"),
    task="linear-bandit",
    datasets=("river-shuttle", "river-yeast", "river-phishing", "river-solarflare", "synthetic"),
    headline="nash_regret_20k",
    num_params=0,
)
