"""ProMiSE: a protein multi-state benchmark harness, with a learned analogue of decoding bias (ICML 2026).

Registers ``promise.adk``: the conditional PCA-space DDPM of adenylate kinase trained on the biased 85/15
closed/open exposure. The benchmark itself (metrics, harness, PDB ensemble adapter, ANM) has no weights; every
reconstruction choice is listed in :mod:`zoo.promise.module`, the card's text in ``card.md``. This file imports
only the registry.
"""

from zoo._registry import Entry, PaperRef, register_paper

PAPER = PaperRef(
    title="ProMiSE: Protein Multi-state Structure Evaluation Benchmark in Biological Contexts",
    arxiv=None,  # ICML 2026 poster and bioRxiv preprint; no arXiv version, no code or data release
    url="https://icml.cc/virtual/2026/poster/66234",
)

ENTRIES = {
    "adk": Entry(
        arm="ddpm_debiased",
        default=True,
        description="ProMiSE analogue: conditional PCA-space DDPM of adenylate kinase, 85/15 closed/open exposure",
        notes="A conditional DDPM over the top-8 PCA coefficients of AdK's two DIMS transition runs, trained on 85% "
        "closed-half / 15% open-half frames with a context token tagged independently of the state (so it does not "
        "test the paper's context finding). Every DDPM arm of the evaluation samples these weights and this PCA "
        "encoder; the arms differ only in decoding. Debiased decoding lifts the biased decoder's multi-state "
        "success but stays below resampling the training items with the same 1/f reweighting (see the card).",
    ),
}

register_paper(
    "promise",
    PAPER,
    ENTRIES,
    headline="multistate_success",
    datasets=("mdanalysistests_adk",),
    task="other",
    module="zoo.promise.module:ProMiSEModule",
    requires=("MDAnalysis", "MDAnalysisTests", "tmtools"),
    extra="protein",
    smoke=("--data.init_args.n_train=64", "--data.init_args.val_ensembles=1", "--data.init_args.steps_per_epoch=2"),
    num_params=20_768,
    input_format="a context name, 'apo' or 'ligand'; model.ensemble(context, n) returns (n, 214, 3) AdK C-alpha "
    "coordinates in A, superposed onto the centred open state (4AKE)",
    input_size=(214, 3),
)
