"""SpecExit (arXiv 2509.24248): speculative decoding whose draft model also predicts when to stop reasoning.

Registers ``specexit.arith``: a target reasoning LM and its EAGLE-style draft with SpecExit's signal rows,
trained on generated arithmetic reasoning traces. Imports only the registry (the zoo lists it cheaply).
"""

from zoo._registry import PaperRef, PretrainedCfg, register_model

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

register_model(
    "specexit.arith",
    module="zoo.specexit.module:SpecExitModule",
    default=True,
    description="SpecExit: target LM (1.78M) + EAGLE-style draft with exit signals, on generated arithmetic reasoning",
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
    pretrained_cfg=PretrainedCfg(
        paper=PAPER,
        sha256={
            "config.json": "58f9954a937c0f54739251f7ee2b206318508522dcabb658b963b7eb51a93e93",
            "model.safetensors": "530d3c24b77077748d0a6c1353190ab39c76adf9cd47fe84ed7eac765dfffe83",
            "tokenizer.json": "1e8c9c204fcbd307ec8e6fe686965040b51ca3b97847fcad250f57d3cd1daec6",
        },
        task="text-generation",
        datasets=("synthetic-arithmetic-traces",),
        headline="token_reduction_vs_spec",
        num_params=2258113,
        input_format=INPUT_FORMAT,
        notes=(
            "Three recipes: recipes/specexit/arith_target.yaml (target LM, stage 1a, curriculum 2->6 operands) and "
            "recipes/specexit/arith_target_more.yaml (stage 1b, continues it), then recipes/specexit/arith.yaml "
            "(draft + signal rows + probe on the frozen target; calibrates the exit thresholds on 100 validation "
            "problems when it ends). zoo eval specexit (3 draft seeds) compares SpecExit with target greedy, "
            "speculative decoding, a calibrated probing exit, an oracle exit at target greedy's own exit label and a "
            "stop at the first Check: line, on 3-6-operand and on longer (7-10-operand) problems; the card's claims "
            "table says which of issue 34's thresholds hold. Deviations: operands 1-9, running values <= 49, "
            "scratchpad traces with 0-4 backward checks, confidence/remain thresholds calibrated (alpha 0.1 as the "
            "paper), chain drafting k=4, exit decision reads the delimiter's own signal (see zoo/specexit/module.py). "
            "Measured cost on 2 shared cores: target 10.4 + 10.3 min (two recipes), draft 3.7 min + calibration; "
            "the 3 eval seeds ran as 3 parallel 1-thread processes under one lock (278, 595, 593 s wall; seeds 1-2 "
            "train their drafts first), so latencies are comparable within a seed, not across seeds. Known failure: "
            "the target does not generalise in length (2.5% on 7-10 operands): its first scratchpad line copies at "
            "most the ~5 remaining operands it saw in training and drops the rest. Held-out 3-6-operand test "
            "problems are mostly 4-6 operands (training covers nearly every 3-operand problem)."
        ),
    ),
)
