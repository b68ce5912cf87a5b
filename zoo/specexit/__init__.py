"""SpecExit (arXiv 2509.24248): speculative decoding whose draft model also predicts when to stop reasoning.

Registers ``specexit.arith``: a target reasoning LM and its EAGLE-style draft with SpecExit's signal rows, trained
on generated arithmetic reasoning traces. Every reconstruction choice is listed in :mod:`zoo.specexit.module`; the
card's text is in ``card.md``. Imports only the registry (the zoo lists it cheaply).
"""

from zoo._registry import Entry, PaperRef, register_paper

PAPER = PaperRef(
    title="SpecExit: Accelerating Large Reasoning Model via Speculative Exit",
    arxiv="2509.24248",
    authors=("Yang", "Bai", "Liu", "Yu", "others"),  # surnames as given in the spec; last author Chen
    code="https://github.com/Tencent/AngelSlim",
)

# What the weights take (config.json["pretrained_cfg"]; SpecExitModule.predict applies it).
INPUT_FORMAT = (
    "an arithmetic expression such as '23+45-12' (or a Problem), tokenized by the "
    "checkpoint's tokenizer.json; model.predict(expression) returns the integer answer, "
    "model.generate(...) the whole trace"
)

ENTRIES = {
    "arith": Entry(
        default=True,
        description="SpecExit: target LM (1.78M) + EAGLE-style draft with exit signals, on generated arithmetic "
        "reasoning",
        notes="A target reasoning LM (recipes/specexit/arith_target.yaml) and, trained on it frozen, an EAGLE-style "
        "draft whose fc has SpecExit's confidence, progress and remaining-length rows plus the probing baseline's "
        "linear probe (recipes/specexit/arith.yaml); the exit thresholds were calibrated on 100 validation problems "
        "when the draft recipe ended and travel in config.json.",
    ),
}

register_paper(
    "specexit",
    PAPER,
    ENTRIES,
    module="zoo.specexit.module:SpecExitModule",
    model_args={"stage": "draft"},
    requires=("transformers",),
    extra="nlp",
    smoke=(
        "--model.init_args.target_from=null",
        "--data.init_args.n_train=64",
        "--data.init_args.n_val=16",
        "--data.init_args.batch_size=8",
        "--model.init_args.calibrate_problems=0",
    ),
    task="text-generation",
    datasets=("synthetic-arithmetic-traces",),
    headline="tokens_mean",
    num_params=2258113,
    input_format=INPUT_FORMAT,
)
