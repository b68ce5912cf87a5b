"""Adaptively robust sketches for resettable streams (Cohen, Gribelyuk, Nelson, Stemmer; arXiv 2601.21989).

Registers the space-bounded robust cardinality sketch (default), its unbounded ablation, the Sum variant
and the hash-threshold baseline. Sketches have no learned weights: ``zoo.load(name)`` builds one,
``pretrained=True`` raises. The algorithm and every reconstruction choice are documented in
:mod:`zoo.resettable_sketch.module`; the card's text is in ``card.md``. This file imports only the registry.
"""

from zoo._registry import Entry, PaperRef, register_paper

PAPER = PaperRef(
    title="Adaptively Robust Resettable Streaming",
    arxiv="2601.21989",
    authors=("Edith Cohen", "Elena Gribelyuk", "Jelani Nelson", "Uri Stemmer"),
)

_NO_WEIGHTS = (
    "A sketch has no learned weights: it is built from its arguments and fed a stream; the card's numbers come "
    "from `zoo eval resettable_sketch`. "
)

# calibrate(alpha=0.1, eps=1, horizon=2**20 - 1, z=2) in zoo/resettable_sketch/calibration.py (a test checks it):
# worst-case noise std 506 in count units, N* = 10,322, k = 2 N* = 20,644, initial rate 1, F_min = 10,322.
CALIBRATED = {"rate": 1.0, "eps": 1.0, "k": 20644, "capacity": 32768, "horizon": (1 << 20) - 1}
#: hash_threshold's sampling rate, chosen on validation seeds (zoo/resettable_sketch/tuning.json; a test checks it).
HASH_RATE = 0.5

ENTRIES = {
    "robust": Entry(
        arm="robust",
        default=True,
        model_args={"sketch": "robust", "stat": "card", **CALIBRATED},
        headline="frac_probes_within_0.15_after_warmup_hide",
        description="Space-bounded robust cardinality sketch: k = 20,644 keys, eps 1, calibrated for alpha = 0.1",
        notes=_NO_WEIGHTS + "The space-bounded robust cardinality sketch stores every key until k = 20,644 are "
        "held, then halves its sampling rate whenever k keys are stored, so it never holds more than k keys "
        "whatever the stream length; its published count is the binary-tree mechanism's noisy count (eps = 1 per "
        "epoch), and k, the initial rate and the warm-up F_min come from calibrate(alpha = 0.1), the target "
        "accuracy chosen on validation seeds.",
    ),
    "robust_unbounded": Entry(
        arm="robust_unbounded",
        model_args={"sketch": "robust", "stat": "card", "rate": 0.2, "eps": 1.0, "k": None, "capacity": 1 << 18},
        headline="rel_err_final_hide",
        description="Ablation: robust cardinality sketch at rate 0.2 without halving (linear space)",
        notes=_NO_WEIGHTS + "The robust cardinality sketch at rate 0.2 throughout, halving only at 3/4 of a "
        "262,144-key table, so its space grows linearly with the active keys: the ablation of the space bound.",
    ),
    "robust_sum": Entry(
        arm="robust_sum",
        model_args={"sketch": "robust", "stat": "sum", "rate": 0.2, "eps": 1.0, "k": None, "capacity": 1 << 18},
        requires=("datasketches", "gensim", "numba"),
        datasets=("gensim-wikipedia-test-data", "procedural-streams"),
        headline="rel_err_final_words",
        description="Robust Sum sketch (unit sampling, rate 0.2, eps 1) on Wikipedia words with unlearning",
        notes=_NO_WEIGHTS + "The robust Sum sketch: every unit of an Inc flips its own coin and a Reset removes the "
        "key's sampled units (sensitivity 2).",
    ),
    "hash_threshold": Entry(
        arm="hash_threshold",
        model_args={"sketch": "hash_threshold", "stat": "card", "rate": HASH_RATE},
        requires=("datasketches",),
        headline="rel_err_final_hide",
        description="Non-robust baseline: fixed-hash threshold sampler (theta / bottom-k style), rate 0.5",
        notes=_NO_WEIGHTS + "The non-robust baseline: a fixed-hash threshold sampler at the validation-tuned rate "
        "0.5, which the adaptive attack breaks by learning which keys the hash samples.",
    ),
}

register_paper(
    "resettable_sketch",
    PAPER,
    ENTRIES,
    module="zoo.resettable_sketch.module:ResettableSketchModule",
    requires=("datasketches", "numba"),
    extra="sketch",
    smoke=("--data.init_args.length=2048", "--data.init_args.chunk_size=1024"),
    datasets=("procedural-streams",),
    num_params=0,
)
