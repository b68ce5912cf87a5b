"""Adaptively robust sketches for resettable streams (Cohen, Gribelyuk, Nelson, Stemmer; arXiv 2601.21989).

Registers the space-bounded robust cardinality sketch (default), its unbounded ablation, the Sum variant
and the hash-threshold baseline. Sketches have no learned weights: ``zoo.load(name)`` builds one,
``pretrained=True`` raises. The algorithm and every reconstruction choice are documented in
:mod:`zoo.resettable_sketch.module`. This file imports only the registry.
"""

from zoo._registry import PaperRef, PretrainedCfg, register_model

PAPER = PaperRef(
    title="Adaptively Robust Resettable Streaming",
    arxiv="2601.21989",
    authors=("Edith Cohen", "Elena Gribelyuk", "Jelani Nelson", "Uri Stemmer"),
)

_NO_WEIGHTS = (
    "a sketch has no learned weights: it is built from its arguments and fed a stream; the card's numbers come "
    "from `zoo eval resettable_sketch`. "
)
_COMMON = (
    "Reconstructed from the abstract (no paper code): sample-and-hold coins stand in for 'one coin per activation' "
    "because a polylog-space sketch cannot tell an activation from an Inc of an active key; the cardinality "
    "sensitivity is therefore 4 - 2 rate, not 2. Errors are relative to the prefix maximum of the true "
    "statistic; see zoo/resettable_sketch/module.py for every choice."
)
_MODULE = "zoo.resettable_sketch.module:ResettableSketchModule"
_SMOKE = ("--data.init_args.length=2048", "--data.init_args.chunk_size=1024")


def _cfg(headline: str, notes: str, datasets=("procedural-streams",)):
    return PretrainedCfg(
        paper=PAPER,
        datasets=datasets,
        headline=headline,
        num_params=0,
        notes=_NO_WEIGHTS + notes + " " + _COMMON,
    )


# calibrate(alpha=0.1, eps=1, horizon=2**20 - 1, z=2) in zoo/resettable_sketch/sketches.py (a test checks it):
# worst-case noise std 506 in count units, N* = 10,322, k = 2 N* = 20,644, initial rate 1, F_min = 10,322.
CALIBRATED = {"rate": 1.0, "eps": 1.0, "k": 20644, "capacity": 32768, "horizon": (1 << 20) - 1}

register_model(
    "resettable_sketch.robust",
    module=_MODULE,
    default=True,
    description="Space-bounded robust cardinality sketch: k = 20,644 keys, eps 1, calibrated for alpha = 0.1",
    model_args={"sketch": "robust", "stat": "card", **CALIBRATED},
    requires=("datasketches", "numba"),
    extra="sketch",
    arm="robust",
    smoke=_SMOKE,
    pretrained_cfg=_cfg(
        "frac_probes_within_0.15_after_warmup_hide",
        "The headline is the space-bounded sketch: it stores every key until k = 20,644 are held, then halves "
        "its rate whenever k keys are stored, so it never holds more than k keys whatever the stream length. "
        "k, the initial rate and the warm-up F_min come from calibrate(alpha) (the noise variance of the binary "
        "tree, worst case over its nodes; see sketches.calibrate); alpha = 0.1 was chosen on validation seeds "
        "100-104. Each epoch (halving) starts a fresh eps = 1 tree, so the privacy loss composes over epochs.",
    ),
)

register_model(
    "resettable_sketch.robust_unbounded",
    module=_MODULE,
    description="Ablation: robust cardinality sketch at rate 0.2 without halving (linear space)",
    model_args={"sketch": "robust", "stat": "card", "rate": 0.2, "eps": 1.0, "k": None, "capacity": 1 << 18},
    requires=("datasketches", "numba"),
    extra="sketch",
    arm="robust_unbounded",
    smoke=_SMOKE,
    pretrained_cfg=_cfg(
        "rel_err_final_hide",
        "The former headline: rate 0.2 throughout, halving only at 3/4 of a 262,144-key table, so its space "
        "grows linearly with the active keys (about 0.2 F0) -- not the paper's polylogarithmic space.",
    ),
)

register_model(
    "resettable_sketch.robust_sum",
    module=_MODULE,
    description="Robust Sum sketch (unit sampling, rate 0.2, eps 1) on Wikipedia words with unlearning",
    model_args={"sketch": "robust", "stat": "sum", "rate": 0.2, "eps": 1.0, "k": None, "capacity": 1 << 18},
    requires=("datasketches", "gensim", "numba"),
    extra="sketch",
    arm="robust_sum",
    smoke=_SMOKE,
    pretrained_cfg=_cfg(
        "rel_err_final_words",
        "Every unit of an Inc flips its own coin; a Reset removes the key's sampled units (sensitivity 2).",
        datasets=("gensim-wikipedia-test-data", "procedural-streams"),
    ),
)

register_model(
    "resettable_sketch.hash_threshold",
    module=_MODULE,
    description="Non-robust baseline: fixed-hash threshold sampler (theta / bottom-k style), rate 0.2",
    model_args={"sketch": "hash_threshold", "stat": "card", "rate": 0.2},
    requires=("datasketches",),
    extra="sketch",
    arm="hash_threshold",
    smoke=_SMOKE,
    pretrained_cfg=_cfg(
        "rel_err_final_hide",
        "The vulnerable baseline: the adaptive attack learns which keys the fixed hash samples and resets them.",
    ),
)
