"""DWP, Diversity-aware Weight Perturbation, for compute-in-memory (CIM) robustness (ICML 2026).

This file only registers the entries (it runs whenever the zoo is listed). The training rule is a reconstruction
from the abstract, in :mod:`zoo.dwp.dwp`; ``zoo.dwp.module`` lists every reconstruction choice and deviation,
``zoo.dwp.evaluate`` is ``zoo eval dwp``, ``zoo.dwp.tune`` the validation tuning (``tuning.json``) and
``card.md`` the card's text.
"""

from zoo._registry import Entry, PaperRef, register_paper
from zoo.common.labels import FASHION_MNIST_CLASSES

PAPER = PaperRef(
    title="Diversity-aware Weight Perturbation Promotes Robust Adaptation",
    arxiv=None,  # no arXiv version exists; the ICML page is the reference
    url="https://icml.cc/virtual/2026/poster/66242",
)

_MODEL_ARGS = {"backbone": "resnet_fmnist", "channels": (16, 32, 64, 128), "stem_width": 16, "norm_groups": 8}
# What the weights take (config.json["pretrained_cfg"]; DWPModule.transform/predict apply it).
INPUT = {
    "input_format": "Fashion-MNIST-like grey images: uint8 pixels 0-255 or floats in [0, 1]",
    "input_size": (1, 28, 28),
    "value_range": (0.0, 1.0),
    "mean": (0.2860,),  # of the Fashion-MNIST training pixels in [0, 1] (zoo/dwp/data.py)
    "std": (0.3530,),
    "label_names": FASHION_MNIST_CLASSES,
}

ENTRIES = {
    "fashion_mnist": Entry(
        arm="dwp",
        default=True,
        model_args={"mode": "dwp", **_MODEL_ARGS},
        description="DWP-trained compact ResNet on Fashion-MNIST, robust to CIM weight mismatch and PCM drift",
        notes="DWP: K = 4 weight-noise draws per step, each sample weighted by its prediction disagreement across "
        "the draws (the rule reconstructed from the abstract), with weight clipping; validation-tuned recipe.",
    ),
    "standard": Entry(
        arm="standard",
        model_args={"mode": "standard", **_MODEL_ARGS},
        description="Baseline for DWP: the same ResNet with standard (noise-free) training on Fashion-MNIST",
        notes="Standard training (the paper's baseline): the same ResNet without weight noise or clipping, its "
        "learning rate tuned on the validation split.",
    ),
    "noise_injection": Entry(
        arm="noise_injection",
        model_args={"mode": "noise_injection", **_MODEL_ARGS},
        description="Baseline for DWP: the same ResNet trained with plain weight-noise injection (K=1, uniform "
        "weights)",
        notes="Plain weight-noise injection: one draw per step, uniform sample weights and DWP's weight clipping; "
        "sigma_train, curriculum and learning rate tuned on the validation split with DWP's budget.",
    ),
}

register_paper(
    "dwp",
    PAPER,
    ENTRIES,
    module="zoo.dwp.module:DWPModule",
    requires=("timm",),
    extra="vision",
    smoke=("--data.init_args.train_limit=256", "--data.init_args.val_size=256"),
    task="image-classification",
    datasets=("fashion_mnist",),
    headline="acc_sigma_0.3",
    num_params=318394,
    **INPUT,
)
