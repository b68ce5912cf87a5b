"""BOBA: bandit-guided surrogate optimisation over partitions of a molecule library (arXiv 2606.26657).

Registers BOBA-UCB on the 45,540-molecule amide library (acid arms, O1 oracle). The published weights are the
surrogate ensemble of seed 0's campaign, with its round logs and the library spec. Every reconstruction choice
is documented in :mod:`zoo.boba.module`; the card's text is in ``card.md``. This file imports only the registry.
"""

from zoo._registry import Entry, PaperRef, register_paper

PAPER = PaperRef(
    title="Target-Aware Bandit Allocation for Scalable Surrogate Optimization in Chemical Space",
    arxiv="2606.26657",
    authors=("Haddadnia", "Strieth-Kalthoff", "Arthanari"),
)

#: What the weights take (config.json["pretrained_cfg"]; BOBAModule uses the same).
INPUT = {
    "input_format": "Morgan radius-2 2048-bit fingerprints (rdFingerprintGenerator) packed to 256 uint8 bytes "
    "(np.packbits); predict() returns the ensemble mean and std of the O1 oracle score",
    "input_size": (256,),
}

ENTRIES = {
    "amide_cap14": Entry(
        arm="boba_ucb",
        default=True,
        description="BOBA-UCB over the acid arms of a 45,540-molecule amide library: seed 0's surrogate ensemble",
        notes="BOBA-UCB (reconstructed; no code was published): UCB1 over the acid building blocks picks which arms "
        "a 5-MLP surrogate ensemble scores each round, on an RDKit-enumerated amide library with the O1 oracle "
        "(max Tanimoto to CDK2 ligands) in place of docking. The published folder is seed 0's campaign on the test "
        "oracle: the final ensemble, its round logs and acquired molecules (campaign.json) and the library spec "
        "(library.json).",
    ),
}

register_paper(
    "boba",
    PAPER,
    ENTRIES,
    module="zoo.boba.module:BOBAModule",
    requires=("rdkit", "datamol"),
    extra="chem",
    smoke=(
        "--data.init_args.cap=7",
        "--model.init_args.epochs_per_round=1",
        "--model.init_args.rounds=1",
    ),
    task="molecular-screening",
    datasets=("amide_cap14_o1",),
    headline="recall_top1pct",
    num_params=5 * (2048 * 128 + 128 + 128 + 1),
    **INPUT,
)
