"""GEMQ (arXiv 2605.23078): registry entries only. This file must stay light: it imports zoo._registry alone.

Two evaluations: v1 (``zoo.gemq.evaluate``) on ``gemq.wiki_fp`` and its three GEMQ-quantized checkpoints, and split
v2 (``zoo.gemq.evaluate_v2``) on a regularised fp base per architecture; the bare name ``gemq`` is v2's Mixtral base.
The card's text is in ``card.md``; every reconstruction choice is listed in :mod:`zoo.gemq.module`.
"""

from zoo._registry import Entry, PaperRef, register_paper

PAPER = PaperRef(
    title="GEMQ: Global Expert-Level Mixed-Precision Quantization for MoE LLMs",
    arxiv="2605.23078",
    authors=("Jianing Deng", "Song Wang", "Dongwei Wang", "Zijie Liu", "Tianlong Chen", "Huanrui Yang", "Jingtong Hu"),
    code="https://github.com/jndeng/GEMQ",
)

INPUT_FORMAT = (
    "English text: token ids of the checkpoint's byte-level BPE (tokenizer.json, "
    "model.tokenizer()); forward(ids [B, T]) gives next-token logits [B, T, vocab]; "
    "model.perplexity(text) scores a text"
)
_ARCH = {
    "kind": "mixtral",
    "vocab_size": 4096,
    "hidden_size": 128,
    "num_layers": 4,
    "num_heads": 4,
    "num_experts": 8,
    "top_k": 2,
    "intermediate_size": 256,
    "max_seq_len": 128,
}
_ARCH_V2 = {
    "mixtral": {**_ARCH, "hidden_size": 160, "intermediate_size": 192, "dropout": 0.1},
    "qwen2_moe": {**_ARCH, "kind": "qwen2_moe", "hidden_size": 160, "intermediate_size": 160,
                  "shared_intermediate_size": 256, "dropout": 0.1},
}  # fmt: skip
_TRAIN_V2 = {"lr": 0.002, "weight_decay": 0.1, "warmup_steps": 100, "embed_dropout": 0.1, "restore_best": True}
_FP_SMOKE = ("--data.init_args.train_limit=16", "--data.init_args.val_sequences=4")
_GEMQ_RECIPE = {"bits": [1, 2, 3], "solver": "ilp", "c2c3": True, "method": "gptq", "group_size": 128}
# The GEMQ-quantized v1 checkpoints: arm slot, budget and the published allocation (bits of each expert, one layer per
# "|"), which rebuilds the packed structure; a retrained checkpoint rewrites its widths here and its pins.
_QUANTIZED = {
    "wiki_2p5bit": ("hi", 2.5, "3,2,3,3,3,3,3,3|3,1,3,1,1,1,2,3|2,2,3,3,3,3,3,2|3,3,3,3,1,3,3,2"),
    "wiki_2bit": ("mid", 2.0, "3,2,3,3,3,3,3,3|3,1,2,1,1,1,1,3|1,1,1,1,3,1,2,1|2,3,2,3,1,2,3,1"),
    "wiki_1p5bit": ("lo", 1.5, "3,1,2,1,2,2,2,2|2,1,1,1,1,1,1,3|1,1,1,1,3,1,2,1|1,3,1,2,1,1,1,1"),
}


def _quantized(slot: str, budget: float, widths: str) -> Entry:
    allocation = {f"model.layers.{i}.mlp": [int(b) for b in row.split(",")] for i, row in enumerate(widths.split("|"))}
    return Entry(
        arm=f"gemq_router_ft_{slot}",
        description=f"GEMQ at {budget:g} bits per expert (global ILP, GPTQ, router tuning) of gemq.wiki_fp",
        model_args={
            "arch": _ARCH,
            "source": "gemq.wiki_fp",
            "gemq": {**_GEMQ_RECIPE, "budget": budget},
            "quantization": {"method": "gptq", "group_size": 128, "allocation": allocation},
        },
        smoke=("--data.init_args.calib_size=4", "--model.init_args.gemq.method=rtn"),
        num_params=1315968,  # the float parameters: the routed experts are packed low-bit buffers
        base_model="gemq.wiki_fp",  # the card's base_model: the float checkpoint these weights quantize
        base_model_relation="quantized",
        notes=f"gemq.wiki_fp quantized by GEMQ at {budget:g} bits per routed expert (global ILP allocation over widths "
        "{1, 2, 3}, GPTQ group 128, router fine-tuning): the calibration-seed-0 run of its recipe, so the seed-0 value "
        "of its arm on the card, whose metrics are means over the seeds.",
    )


def _v2(arch: str, evaluate: str, description: str, num_params: int, **fields) -> Entry:
    return Entry(
        arm="fp16",
        evaluate=evaluate,
        description=description,
        model_args={"arch": _ARCH_V2[arch], **_TRAIN_V2},
        smoke=_FP_SMOKE,
        num_params=num_params,
        notes="A full-precision MoE base trained by us on split v2's train slice (70% of the articles of gensim's "
        "Wikipedia test data) with dropout, weight decay and early stopping on the validation slice; its evaluation "
        "quantizes it with every arm per calibration seed.",
        **fields,
    )


ENTRIES = {
    "wiki_fp": Entry(
        arm="fp16",
        description="Full-precision Mixtral-architecture MoE LM (8 experts, top-2, 4.46 M params) that GEMQ quantizes",
        model_args={"arch": _ARCH},
        smoke=_FP_SMOKE,
        num_params=4461696,
        notes="A 4-layer Mixtral-architecture LM (hidden 128, 8 experts, top-2) trained by us on the 90% train "
        "articles of gensim's Wikipedia test data with a byte-level BPE of 4096 tokens; v1's evaluation quantizes it "
        "with every arm per calibration seed.",
    ),
    **{tag: _quantized(*row) for tag, row in _QUANTIZED.items()},
    "wiki2_mixtral_fp": _v2(
        "mixtral",
        "zoo.gemq.evaluate_v2:MIXTRAL",
        "Split-v2 full-precision Mixtral-architecture MoE base (8 experts, top-2)",
        4676000,
        default=True,
    ),
    "wiki2_qwen2moe_fp": _v2(
        "qwen2_moe",
        "zoo.gemq.evaluate_v2:QWEN2MOE",
        "Split-v2 full-precision Qwen2-MoE base (8 routed experts top-2 + a shared expert)",
        4678560,
    ),
}

register_paper(
    "gemq",
    PAPER,
    ENTRIES,
    module="zoo.gemq.module:GEMQModule",
    requires=("transformers", "tokenizers", "gensim"),
    extra="nlp",
    task="text-generation",
    datasets=("gensim-wikipedia-test-data",),
    headline="ppl",
    input_format=INPUT_FORMAT,
)
