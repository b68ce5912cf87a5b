"""REPA-P: physics-residual alignment of intermediate diffusion features (arXiv 2605.20780). Registry entries only.

The reconstruction choices are listed in ``zoo/repa_p/module.py``; the cards' text is ``zoo/repa_p/card.md``.
"""

from zoo._registry import Entry, PaperRef, register_paper

PAPER = PaperRef(
    title=(
        "Learning to Think in Physics: Breaking Shortcut Learning in Scientific Diffusion via Representation Alignment"
    ),
    arxiv="2605.20780",
    authors=(
        "Haozhe Jia",
        "Pengyu Yin",
        "Wenshuo Chen",
        "Shaofeng Liang",
        "Lei Wang",
        "Bowen Tian",
        "Xiucheng Wang",
        "Nanqian Jia",
        "Yutao Yue",
    ),
    code="https://github.com/Hxxxz0/REPA-P",
)

# Shared by both entries: the architecture and loss settings of the recipes (their seed-0 runs are the weights).
# c_res (= c_proj for REPA-P), the late physics boost and its ramp are what each arm chose on validation
# conditions (python -m zoo.repa_p.tune; tuning.json): the same values for both.
_COMMON = {
    "task": "poisson",
    "size": 32,
    "dim": 8,
    "attn_heads": 2,
    "residual_units": "grid",
    "sample_steps": 100,
    "val_sample_steps": 10,
    "lr": 1e-3,
    "lr_schedule": "cosine",
    "ema_start": 2500,
    "c_res": 0.01,
    "late_physics_factor": 100.0,
    "late_physics_from": 0.8,
    "late_physics_ramp": "geometric",
}

ENTRIES = {
    "poisson_32": Entry(
        arm="repa_p",
        default=True,
        description="REPA-P (bottleneck projection head) conditional diffusion for 2-D Poisson, 32x32",
        model_args={**_COMMON, "taps": ["bottleneck"], "c_proj": 0.01},
        notes="REPA-P on 32x32 Poisson: a conditional DDPM whose bottleneck features are aligned, through a "
        "projection head, with the physics residual during training. The weights are the EMA backbone only (same "
        "parameters and FLOPs as PIDM); heads.safetensors holds the trained bottleneck head for resumed training.",
    ),
    "pidm_poisson_32": Entry(
        arm="pidm",
        description="PIDM baseline (output residual loss only) conditional diffusion for 2-D Poisson, 32x32",
        model_args={**_COMMON, "taps": [], "c_proj": 0.0},
        notes="PIDM baseline (Bastek, Sun & Kochmann, ICLR 2025) of REPA-P on 32x32 Poisson: the same network and "
        "recipe with the physics residual on the output only, trained identically without heads.",
    ),
}

register_paper(
    "repa_p",
    PAPER,
    ENTRIES,
    module="zoo.repa_p.module:REPAPModule",
    smoke=(
        "--data.init_args.num_train=8",
        "--data.init_args.num_val=2",
        "--data.init_args.num_test=2",
        "--data.init_args.batch_size=2",
        "--model.init_args.val_sample_steps=2",
        "--model.init_args.size=16",
        "--data.init_args.size=16",
        "--model.init_args.dim=8",
        "--model.init_args.attn_heads=2",
    ),
    datasets=("poisson_point_charges_32",),
    headline="residual_spectral_id",
    num_params=195353,
    # What the weights take (config.json["pretrained_cfg"]; REPAPModule.predict samples a field for a condition).
    input_format="poisson condition [B, 1, 32, 32] in physical units (task.generate gives test pairs); "
    "model.predict(condition) samples the field in physical units",
    input_size=(1, 32, 32),
)
