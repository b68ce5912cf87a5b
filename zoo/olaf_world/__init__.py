"""Olaf-World / SeqDelta-REPA (arXiv:2602.10104): latent actions aligned to a frozen encoder's temporal feature
differences, on Crafter.

This file only registers the entries (it runs whenever the zoo is listed). The code lives in
``zoo.olaf_world.{lam,clips,metrics}`` (plain torch/numpy), ``zoo.olaf_world.module`` / ``zoo.olaf_world.data``
(Lightning; module.py's docstring lists every reconstruction choice and deviation), ``zoo.olaf_world.evaluate``
and ``zoo.olaf_world.tune``; the card's text in ``card.md``.
"""

from zoo._registry import Entry, PaperRef, register_paper

PAPER = PaperRef(
    title="Olaf-World: Orienting Latent Actions for Video World Modeling",
    arxiv="2602.10104",
    authors=("Yuxin Jiang", "Yuchao Gu", "Ivor W. Tsang", "Mike Zheng Shou"),
    code="https://github.com/showlab/Olaf-World",
)

INPUT = {
    "input_format": "videos [B, T, 64, 64, 3] float in [0, 1] (Crafter frames / 255), T >= 2; "
    "model(videos) returns mu_z [B, T-1, 32], model.reconstruct(videos) the predicted frames 1..T-1",
    "input_size": (4, 64, 64, 3),
    "value_range": (0.0, 1.0),
    "label_names": ("noop", "move_left", "move_right", "move_up", "move_down", "do"),
}

# The recipes' model (recipes/olaf_world/{align,vae}.yaml): the published architecture, so zoo.load(name) without
# weights builds what the checkpoints hold.
_RECIPE_ARGS = {"lr": 1e-3, "patch": 16, "residual": True, "shift_kernel": 15, "logvar_init": -6.0, "encoder": "conv",
                "kl_warmup_steps": 200, "teacher_dim": 2}  # fmt: skip

ENTRIES = {
    "align": Entry(
        arm="lam_align",
        default=True,
        model_args={**_RECIPE_ARGS, "align_weight": 0.005, "beta": 1e-6},
        description="SeqDelta-REPA latent action model (beta-VAE LAM aligned to a frozen phase-correlation motion "
        "readout), Crafter with a zoomed context",
        notes="The method: the beta-VAE latent action model with its mean latent aligned to the teacher's temporal "
        "difference, lambda = 0.005 (the authors': 0.02), beta = 1e-6, lr 1e-3 chosen on the zoomed validation "
        "worlds (tuning.json); 800 steps (the CPU budget).",
    ),
    "vae": Entry(
        arm="lam_vae",
        model_args={**_RECIPE_ARGS, "align_weight": 0.0, "beta": 1e-7, "lr": 2e-3},
        description="Plain beta-VAE latent action model (lambda = 0), the paper's baseline, Crafter",
        notes="The paper's baseline: the same LAM, data and budget with lambda = 0; beta = 1e-7, lr 2e-3 chosen on "
        "the zoomed validation worlds with as many trials as lam_align (tuning.json); 800 steps.",
    ),
}

register_paper(
    "olaf_world",
    PAPER,
    ENTRIES,
    **INPUT,
    license="mit",
    module="zoo.olaf_world.module:OlafLAMModule",
    requires=("crafter", "sklearn", "efficientnet_lite_pytorch"),
    extra="games,vision",
    smoke=(
        "--data.init_args.steps_per_seed=6",
        "--data.init_args.train_seeds_per_context=1",
        "--data.init_args.eval_seeds_per_context=2",
        "--data.init_args.batch_size=2",
        "--model.init_args.model_dim=32",
        "--model.init_args.encoder_blocks=1",
        "--model.init_args.decoder_blocks=1",
    ),
    task="latent-action-model",
    datasets=("crafter",),
    headline="probe_acc_cross",
    num_params=806304,
)
