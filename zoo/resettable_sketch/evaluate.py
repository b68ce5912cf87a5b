"""``zoo eval resettable_sketch``: the robust sketch, its baselines and an exact reference, same streams and seeds.

Per seed ``s`` every arm sees the same streams (stream seed ``s``) with its own randomness seeded by ``s``:

* the adaptive attack (:class:`~zoo.resettable_sketch.streams.Adversary`, ``attack_probes`` fresh keys) against
  the per-update path, with an output read after every update;
* the churn stream (``churn_length`` updates), the bursty stream and the Wikipedia word stream with unlearning
  resets, through the vectorised path in chunks of 4,096 updates;
* throughput on ``throughput_length`` churn updates (one pass per seed; the card reports the mean).

Errors are ``|F_hat - F| / max_{t' <= T} F_{t'}`` at the end of the stream (the prefix-max error the guarantee
bounds). Under the attack the error is also averaged over all probe times (``rel_err_adaptive_mean``) and
maximised over the second half of the probes (``rel_err_adaptive_worst_half``): the guarantee is claimed at every
time. ``max_stored_keys`` is the most keys held at once on the churn stream; ``stored_ratio_*`` divides it by
``rate * max_t F_t``.

Arms by role: the method ``robust``; the non-robust baselines ``hash_threshold`` and ``datasketches_theta``;
``robust_noiseless`` (the binary-tree noise removed) and the variants ``robust_halving`` (space-bounded),
``robust_sum`` / ``robust_lp`` with their hash-threshold counterparts, listed as ablations; and the reference
``reference_exact``, exact counting with unbounded memory (zero error by construction, the space to beat).
"""

from __future__ import annotations

import time
from collections.abc import Callable

import numpy as np

from zoo._eval import Claim, Protocol, Setting, beats
from zoo._figures import bar_panel
from zoo.resettable_sketch.sketches import ExactSketch, HashThresholdSketch, RobustSketch, ThetaSketch
from zoo.resettable_sketch.streams import Adversary, bursty_stream, churn_stream, word_stream

LP_Q = 0.5
LP_CAP = 1024
THETA_LG_K = 12
CHUNK = 4096
THROUGHPUT_CHUNK = 65_536
CAPACITY = 1 << 16
HORIZON = (1 << 15) - 1
TRACED_ARMS = ("hash_threshold", "datasketches_theta", "robust_noiseless", "robust")
BROKEN_BY_THE_ATTACK = ("hash_threshold", "datasketches_theta", "hash_threshold_sum", "robust_noiseless")

PROTOCOL = Protocol(
    method="robust",
    baselines=("hash_threshold", "datasketches_theta"),
    ablations=(
        "robust_noiseless",
        "robust_halving",
        "robust_sum",
        "hash_threshold_sum",
        "robust_lp",
        "hash_threshold_lp",
    ),
    references=("reference_exact",),
    settings={
        "rate": Setting(0.2, "sampling rate of the rate-based sketches", minimum=1e-6),
        "eps": Setting(1.0, "privacy parameter of each binary tree (robust arms)", minimum=1e-6),
        "halving_k": Setting(4096, "stored keys at which robust_halving halves its rate", minimum=2),
        "attack_probes": Setting(20_000, "fresh keys the adaptive attack inserts", minimum=100),
        "churn_length": Setting(100_000, "updates of the churn stream", minimum=1000),
        "throughput_length": Setting(1_000_000, "churn updates of the throughput pass", minimum=10_000),
    },
    seeds=(0, 1, 2, 3, 4),
    headline=("rel_err_adaptive", "rel_err_oblivious", "max_stored_keys"),
    panels=4,
)


def arm_factories(settings: dict) -> dict[str, tuple[str, Callable[[int], object]]]:
    """Every arm: its statistic and a factory ``seed -> sketch``."""
    rate, eps = settings["rate"], settings["eps"]
    robust = dict(rate=rate, capacity=CAPACITY, horizon=HORIZON)
    return {
        "robust": ("card", lambda s: RobustSketch("card", eps=eps, seed=s, **robust)),
        "hash_threshold": ("card", lambda s: HashThresholdSketch("card", rate, seed=s)),
        "datasketches_theta": ("card", lambda s: ThetaSketch(THETA_LG_K, seed=9001 + s)),
        "robust_noiseless": ("card", lambda s: RobustSketch("card", eps=None, seed=s, **robust)),
        "robust_halving": ("card", lambda s: RobustSketch("card", eps=eps, k=settings["halving_k"], seed=s, **robust)),
        "robust_sum": ("sum", lambda s: RobustSketch("sum", eps=eps, seed=s, **robust)),
        "hash_threshold_sum": ("sum", lambda s: HashThresholdSketch("sum", rate, seed=s)),
        "robust_lp": ("lp", lambda s: RobustSketch("lp", eps=eps, q=LP_Q, value_cap=LP_CAP, seed=s, **robust)),
        "hash_threshold_lp": ("lp", lambda s: HashThresholdSketch("lp", rate, q=LP_Q, seed=s)),
        "reference_exact": ("card", lambda s: ExactSketch("card")),
    }


def _stored(sketch) -> int:
    """Most keys the sketch has held (exact for the robust sketch, else its current count)."""
    if isinstance(sketch, RobustSketch):
        return int(sketch.arrays["max_stored"])
    return sketch.stored_keys()


def run_stream(sketch, stat: str, stream, chunk: int = CHUNK) -> dict[str, float]:
    """Feed a stream in chunks; the final prefix-max error, the most stored keys and the cardinality peak."""
    ops, keys, deltas = stream
    truth = ExactSketch(stat, q=LP_Q).update_batch(ops, keys, deltas, trajectory=True)
    card = ExactSketch("card").update_batch(ops, keys, deltas, trajectory=True) if stat != "card" else truth
    stored = 0
    for start in range(0, len(ops), chunk):
        sketch.update_batch(ops[start : start + chunk], keys[start : start + chunk], deltas[start : start + chunk])
        stored = max(stored, _stored(sketch))
    error = abs(sketch.estimate() - truth[-1]) / max(truth.max(), 1.0)
    return {"rel_err": float(error), "stored": float(stored), "card_peak": float(card.max())}


def _feed(sketch, stream, stop_at: int | None = None, start: int = 0) -> int:
    """Feed ``stream[start:stop_at]`` in throughput-sized chunks; return the most stored keys seen."""
    ops, keys, deltas = stream
    peak = 0
    for begin in range(start, stop_at or len(ops), THROUGHPUT_CHUNK):
        end = min(begin + THROUGHPUT_CHUNK, stop_at or len(ops))
        sketch.update_batch(ops[begin:end], keys[begin:end], deltas[begin:end])
        peak = max(peak, _stored(sketch))
    return peak


def _streams(run) -> dict:
    if "streams" not in run.cache:
        seed, settings = run.seed, run.settings
        run.cache["streams"] = {
            "oblivious": churn_stream(settings["churn_length"], seed=seed),
            "bursty": bursty_stream(seed=seed),
            "words": word_stream(seed=seed),
        }
        run.cache["long"] = churn_stream(settings["throughput_length"], seed=seed)
    return run.cache


def measure(arm: str, run) -> dict[str, float]:
    """One arm on the attack, the three streams and the throughput pass, for ``run.seed``."""
    settings, seed = run.settings, run.seed
    stat, factory = arm_factories(settings)[arm]
    streams = _streams(run)
    scores: dict[str, float] = {}
    if arm != "reference_exact":  # exact counting cannot be attacked: its error is zero by construction
        sketch = factory(seed)
        attack = Adversary().run(sketch, settings["attack_probes"])
        over_time = np.abs(attack.estimates - attack.truth) / attack.prefix_max
        scores["rel_err_adaptive"] = attack.final_error()
        scores["rel_err_adaptive_mean"] = float(over_time.mean())
        scores["rel_err_adaptive_worst_half"] = float(over_time[len(over_time) // 2 :].max())
        if not arm.startswith("datasketches"):
            scores["stored_ratio_adaptive"] = _stored(sketch) / (settings["rate"] * attack.prefix_max[-1])
        if seed == run.protocol.seeds[0] and arm in TRACED_ARMS:
            idx = np.unique(np.linspace(0, len(attack.truth) - 1, 40).astype(int))
            run.extras.setdefault("attack_trace", {})[arm] = {
                "probe": (idx + 1).tolist(),
                "truth": attack.truth[idx].tolist(),
                "estimate": attack.estimates[idx].round(1).tolist(),
            }
    for kind, stream in streams["streams"].items():
        if arm == "datasketches_theta" and kind == "words":
            continue  # words are re-activated after unlearning resets: A-not-B cannot express that
        outcome = run_stream(factory(seed), stat, stream)
        scores[f"rel_err_{kind}"] = outcome["rel_err"]
        if kind == "oblivious":
            scores["max_stored_keys"] = outcome["stored"]
            if not arm.startswith(("datasketches", "reference")):
                scores["stored_ratio_oblivious"] = outcome["stored"] / (settings["rate"] * outcome["card_peak"])
    started = time.perf_counter()
    sketch = factory(0)
    _feed(sketch, streams["long"])
    sketch.estimate()
    scores["updates_per_s"] = len(streams["long"][0]) / (time.perf_counter() - started)
    if arm in ("reference_exact", "hash_threshold", "robust", "robust_halving") and seed == run.protocol.seeds[0]:
        run.extras.setdefault("memory_curve", {})[arm] = _memory_curve(factory(seed), streams["long"])
    return scores


def _memory_curve(sketch, stream) -> dict[str, list[int]]:
    """Most stored keys within the first ``n`` updates, for ``n`` doubling from 1,024 to the stream length."""
    total = len(stream[0])
    lengths = [1 << j for j in range(10, 40) if (1 << j) < total] + [total]
    peaks, peak, start = [], 0, 0
    for n in lengths:
        peak = max(peak, _feed(sketch, stream, stop_at=n, start=start))
        peaks.append(peak)
        start = n
    return {"stream_length": lengths, "stored": peaks}


def claims(result: dict) -> list[Claim]:
    arms, per_seed, settings = result["arms"], result["per_seed"], result["settings"]
    out = [
        beats(result, "rel_err_adaptive", "robust", "hash_threshold", margin=0.5, higher_is_better=False),
        beats(result, "max_stored_keys", "robust", "reference_exact", 0.5, higher_is_better=False, relative=True),
        Claim.at_most(
            "robust_attack_error", "robust: error under the attack <= 0.15 (mean over seeds)",
            arms["robust"]["rel_err_adaptive"], 0.15,
        ),
        Claim.at_most(
            "robust_attack_error_worst_seed", "robust: error under the attack <= 0.15 on the worst seed",
            max(run["rel_err_adaptive"] for run in per_seed["robust"].values()), 0.15,
        ),
        Claim.at_most(
            "robust_oblivious_error", "robust: error on the churn stream <= 0.15",
            arms["robust"]["rel_err_oblivious"], 0.15,
        ),
        Claim.at_most(
            "robust_sum_words_error", "robust_sum: error on Wikipedia words with unlearning <= 0.1",
            arms["robust_sum"]["rel_err_words"], 0.1,
        ),
        Claim.at_most(
            "robust_stored_ratio", "robust: stored keys <= 1.5 x rate x prefix-max active keys (worst seed)",
            max(run["stored_ratio_adaptive"] for run in per_seed["robust"].values()), 1.5,
        ),
        Claim.at_most(
            "robust_halving_space", f"robust_halving: most stored keys <= k + 1 = {settings['halving_k'] + 1}",
            max(run["max_stored_keys"] for run in per_seed["robust_halving"].values()), settings["halving_k"] + 1,
        ),
        Claim.at_least(
            "robust_throughput_vs_theta", "robust: throughput >= 0.25 x DataSketches theta",
            arms["robust"]["updates_per_s"] / arms["datasketches_theta"]["updates_per_s"], 0.25,
        ),
    ]  # fmt: skip
    for arm in BROKEN_BY_THE_ATTACK:
        worst_case = min(run["rel_err_adaptive"] for run in per_seed[arm].values())
        text = f"{arm}: the attack drives its error to >= 0.9 on every seed"
        out.append(Claim.at_least(f"{arm}_broken", text, worst_case, 0.9))
    return out


def score_pretrained(module, limit: int | None = None) -> dict[str, float]:
    """A built module's prefix-max error on churn seed 0 (the eval's seed-0 ``rel_err_oblivious``).

    Sketches have no pretrained weights: this scores the registry's configuration from scratch.

    Args:
        module: A :class:`~zoo.resettable_sketch.module.ResettableSketchModule` (fresh).
        limit: Use only the first ``limit`` updates of the stream.
    """
    stream = churn_stream(PROTOCOL.settings["churn_length"].default, seed=0)
    if limit is not None:
        stream = tuple(part[:limit] for part in stream)
    return {"rel_err_oblivious": run_stream(module.sketch(), module.hparams.stat, stream)["rel_err"]}


def plot(result: dict, axes) -> None:
    """The attack trace, the errors, the memory curve and the throughput."""
    extras = result["extras"].get(str(result["seeds"][0]), {})
    ax = axes[0]
    for i, (arm, trace) in enumerate(extras.get("attack_trace", {}).items()):
        ax.plot(trace["probe"], trace["estimate"], color=f"C{i}", lw=2.2 if arm == "robust" else 1.2, label=arm)
        ax.plot(trace["probe"], trace["truth"], color=f"C{i}", lw=0.8, ls="--")
    ax.set(xlabel="probes (dashed: true active keys)", ylabel="estimated active keys", title="adaptive attack")
    ax.legend(fontsize=7)
    bar_panel(axes[1], result, "rel_err_adaptive", ylabel="error at the end of the attack")
    ax = axes[2]
    for arm, curve in extras.get("memory_curve", {}).items():
        ax.loglog(curve["stream_length"], np.maximum(curve["stored"], 1), marker="o", ms=3, label=arm)
    ax.axhline(result["settings"]["halving_k"], color="gray", ls=":", lw=1, label="k")
    ax.set(xlabel="stream length (churn updates)", ylabel="most stored keys", title="memory")
    ax.legend(fontsize=7)
    bar_panel(axes[3], result, "updates_per_s", ylabel="updates per second")
