"""ProtoVAR: prototype-guided visual-autoregressive dataset distillation (registry name ``protovar``).

Registers the generator ``protovar.fmnist``, its tokenizer and the soft-label teacher. Every reconstruction choice
and deviation is listed in :mod:`zoo.protovar.module`, the card's text in ``card.md``. This file imports only the
registry and the label names.
"""

from zoo._registry import Entry, PaperRef, register_paper
from zoo.common.labels import FASHION_MNIST_CLASSES, FASHION_MNIST_INPUT

PAPER = PaperRef(
    title="ProtoVAR: Prototype-Guided Visual-Autoregressive Dataset Distillation",  # as the spec names it
    arxiv=None,
    authors=(),  # not given in the spec (abstract only)
)

# What the weights take (config.json["pretrained_cfg"]; module.py reads them).
TEACHER_INPUT = dict(FASHION_MNIST_INPUT)
TOKENIZER_INPUT = {
    "input_format": "Fashion-MNIST-like grey images: reconstruct() takes uint8 [N, 28, 28] (or floats in [0, 1]), "
    "pads them to 32x32 and scales to [-1, 1]; forward takes that [N, 1, 32, 32] tensor",
    "input_size": (1, 32, 32),
    "value_range": (-1.0, 1.0),
}
VAR_INPUT = {
    "input_format": "class ids 0-9 (generate(class_ids, seed, ipc) returns uint8 [N, 28, 28] images); forward "
    "takes class ids [N] and the tokenizer's 84 teacher-forcing input vectors [N, 84, 32]",
    "label_names": FASHION_MNIST_CLASSES,
}

_SMALL = ("--data.init_args.subset=640", "--data.init_args.val_limit=64")

# The tokenizer comes first: `zoo reproduce` fits and pins the entries in this order, and the VAR's recipe loads
# the pinned tokenizer.
ENTRIES = {
    "tokenizer": Entry(
        arm="tokenizer",
        model_args={"stage": "tokenizer", "hidden": 32},
        description="ProtoVAR tokenizer: multi-scale residual VQ-VAE (scales 1-2-4-8, 256 codes x 32) on Fashion-MNIST",
        notes="The multi-scale residual VQ-VAE whose codes the VAR models, with an EMA codebook, a dead-code "
        "restart (codes under 1.0 EMA hits per step move onto residuals of the batch) and a classifier loss (the "
        "frozen teacher's belief on the reconstruction against the image's), so reconstructions keep their class. "
        "A reference arm of the evaluation: its test reconstruction MSE and codebook usage.",
        task="image-to-image",
        headline="recon_mse",
        num_params=292577,
        **TOKENIZER_INPUT,
    ),
    "teacher": Entry(
        arm="teacher",
        module="zoo.protovar.module:TeacherModule",
        description="ProtoVAR teacher: Conv 32-64-128 CNN on 55k Fashion-MNIST images (soft labels and selector)",
        notes="The real-data teacher CNN that gives the selector its confidences and features and every student its "
        "soft labels. A reference arm of the evaluation: its own test accuracy.",
        task="image-classification",
        headline="acc_full",
        num_params=94410,
        **TEACHER_INPUT,
    ),
    "fmnist": Entry(
        arm="protovar",
        default=True,
        model_args={"stage": "var", "hidden": 32, "depth": 3},
        recipe="recipes/protovar/var.yaml",
        smoke=("--model.init_args.tokenizer_from=null", "--model.init_args.proto_per_class=40", *_SMALL),
        description="ProtoVAR generator: block-causal VAR (d 128, 3 blocks) + frozen tokenizer + class prototypes",
        notes="The VAR transformer with its frozen tokenizer and the k-means class prototypes for IPC 1 and 10 in "
        "buffers. distilled_ipc1/10.safetensors are the evaluation's seed-0 protovar sets (images, labels, soft "
        "labels, the exact student protocol in their metadata).",
        task="unconditional-image-generation",
        headline="acc_ipc10",
        num_params=1266273,
        **VAR_INPUT,
    ),
}

register_paper(
    "protovar",
    PAPER,
    ENTRIES,
    module="zoo.protovar.module:ProtoVARModule",
    requires=("torchvision",),
    extra="vision",
    smoke=_SMALL,
    datasets=("fashion_mnist",),
)
