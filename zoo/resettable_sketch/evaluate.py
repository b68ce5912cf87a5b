"""``zoo eval resettable_sketch``: the robust sketch and its baselines side by side, same streams, same seeds.

Per seed ``s`` every arm sees the same streams (stream seed ``s``) with its own randomness seeded by ``s``:

* the adaptive attack (:class:`~zoo.resettable_sketch.streams.Adversary`, ``ATTACK_PROBES`` fresh keys),
  against the per-update path, with an output read after every update;
* the churn stream (``CHURN_LENGTH`` updates), the bursty stream, and the Wikipedia word stream with
  unlearning resets, through the vectorised path in chunks of ``CHUNK`` updates.

Errors are ``|F_hat - F| / max_{t' <= T} F_{t'}`` at the end of the stream (the prefix-max error the paper's
guarantee bounds), averaged over seeds (``*_max``: the worst seed). Under the attack the error is also
averaged over all probe times (``rel_err_adaptive_mean``) and maximised over the second half of the probes
(``rel_err_adaptive_worst_half``), since the guarantee is claimed at every time, not only at the end.
``max_stored_keys`` is the most keys held at once on the churn stream (worst seed); ``stored_ratio_*``
divides it by ``rate * max_t F_t`` of cardinality. Throughput is measured on ``THROUGHPUT_LENGTH`` churn
updates (best of ``REPEATS``), every arm in this process, DataSketches through its fastest Python path. The
memory curve records the stored keys against the stream length on that long stream.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

from zoo.progress import track
from zoo.resettable_sketch.sketches import ExactSketch, HashThresholdSketch, RobustSketch, ThetaSketch
from zoo.resettable_sketch.streams import Adversary, bursty_stream, churn_stream, word_stream

SEEDS = [0, 1, 2, 3, 4]
RATE = 0.2
EPS = 1.0
HALVING_K = 4096
LP_Q = 0.5
LP_CAP = 1024
THETA_LG_K = 12
ATTACK_PROBES = 20_000
CHURN_LENGTH = 100_000
THROUGHPUT_LENGTH = 1_000_000
CHUNK = 4096
THROUGHPUT_CHUNK = 65_536
REPEATS = 3
#: Arms that sample at ``RATE`` (stored keys are compared with ``RATE * max_t F_t``).
RATE_ARMS = (
    "hash_threshold",
    "robust",
    "robust_noiseless",
    "robust_halving",
    "hash_threshold_sum",
    "robust_sum",
    "hash_threshold_lp",
    "robust_lp",
)
#: Arms whose seed-0 attack is drawn in the card figure.
TRACED_ARMS = ("hash_threshold", "datasketches_theta", "robust_noiseless", "robust")
CAPACITY = 1 << 16
HORIZON = (1 << 15) - 1


def arm_factories() -> dict[str, tuple[str, Callable[[int], object]]]:
    """Every arm: its statistic and a factory ``seed -> sketch``."""
    robust = dict(rate=RATE, capacity=CAPACITY, horizon=HORIZON)
    return {
        "hash_threshold": ("card", lambda s: HashThresholdSketch("card", RATE, seed=s)),
        "datasketches_theta": ("card", lambda s: ThetaSketch(THETA_LG_K, seed=9001 + s)),
        "robust": ("card", lambda s: RobustSketch("card", eps=EPS, seed=s, **robust)),
        "robust_noiseless": ("card", lambda s: RobustSketch("card", eps=None, seed=s, **robust)),
        "robust_halving": ("card", lambda s: RobustSketch("card", eps=EPS, k=HALVING_K, seed=s, **robust)),
        "exact": ("card", lambda s: ExactSketch("card")),
        "hash_threshold_sum": ("sum", lambda s: HashThresholdSketch("sum", RATE, seed=s)),
        "robust_sum": ("sum", lambda s: RobustSketch("sum", eps=EPS, seed=s, **robust)),
        "hash_threshold_lp": ("lp", lambda s: HashThresholdSketch("lp", RATE, q=LP_Q, seed=s)),
        "robust_lp": ("lp", lambda s: RobustSketch("lp", eps=EPS, q=LP_Q, value_cap=LP_CAP, seed=s, **robust)),
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


def throughput(factory: Callable[[int], object], stream, repeats: int = REPEATS) -> float:
    """Updates per second of the vectorised path (best of ``repeats`` fresh sketches)."""
    ops, keys, deltas = stream
    best = float("inf")
    for _ in range(repeats):
        sketch = factory(0)
        started = time.perf_counter()
        for start in range(0, len(ops), THROUGHPUT_CHUNK):
            stop = start + THROUGHPUT_CHUNK
            sketch.update_batch(ops[start:stop], keys[start:stop], deltas[start:stop])
        sketch.estimate()
        best = min(best, time.perf_counter() - started)
    return len(ops) / best


def memory_curve(sketch, stream, lengths: list[int]) -> list[int]:
    """Most stored keys within the first ``n`` updates, for each ``n`` in ``lengths`` (ascending)."""
    ops, keys, deltas = stream
    peaks, peak, start = [], 0, 0
    for n in lengths:
        while start < n:
            stop = min(n, start + THROUGHPUT_CHUNK)
            sketch.update_batch(ops[start:stop], keys[start:stop], deltas[start:stop])
            peak = max(peak, _stored(sketch))
            start = stop
        peaks.append(peak)
    return peaks


def _trace(result, points: int = 40) -> dict[str, list[float]]:
    idx = np.unique(np.linspace(0, len(result.truth) - 1, points).astype(int))
    return {
        "probe": (idx + 1).tolist(),
        "truth": result.truth[idx].tolist(),
        "estimate": result.estimates[idx].round(1).tolist(),
    }


def evaluate(name: str, *, seeds: list[int] | None = None, retrain: bool = False) -> dict:
    """Run every arm on the attack, churn, bursty and word streams; see the module docstring.

    Args:
        name: Registry name (every entry of the paper shares this evaluation).
        seeds: Seeds (default ``SEEDS``).
        retrain: Ignored: sketches have nothing to train.
    """
    seeds = list(SEEDS if seeds is None else seeds)
    arms = arm_factories()
    per_seed: dict[str, dict[str, list[float]]] = {arm: {} for arm in arms}
    traces: dict[str, dict] = {}
    timings: dict[str, float] = {}

    def record(arm: str, metric: str, value: float) -> None:
        per_seed[arm].setdefault(metric, []).append(float(value))

    started = time.perf_counter()
    for seed in track(seeds, desc="resettable_sketch: seeds"):
        streams = {"oblivious": churn_stream(CHURN_LENGTH, seed=seed), "bursty": bursty_stream(seed=seed)}
        streams["words"] = word_stream(seed=seed)
        for arm, (stat, factory) in arms.items():
            if arm != "exact":
                sketch = factory(seed)
                attack = Adversary().run(sketch, ATTACK_PROBES)
                record(arm, "rel_err_adaptive", attack.final_error())
                over_time = np.abs(attack.estimates - attack.truth) / attack.prefix_max
                record(arm, "rel_err_adaptive_mean", over_time.mean())
                record(arm, "rel_err_adaptive_worst_half", over_time[len(over_time) // 2 :].max())
                if arm in RATE_ARMS:
                    record(arm, "stored_ratio_adaptive", _stored(sketch) / (RATE * attack.prefix_max[-1]))
                if seed == seeds[0] and arm in TRACED_ARMS:
                    traces[arm] = _trace(attack)
            for kind, stream in streams.items():
                if arm == "datasketches_theta" and kind == "words":
                    continue  # words are re-activated after unlearning resets: A-not-B cannot express that
                outcome = run_stream(factory(seed), stat, stream)
                record(arm, f"rel_err_{kind}", outcome["rel_err"])
                if kind == "oblivious":
                    record(arm, "max_stored_keys", outcome["stored"])
                    if arm in RATE_ARMS:
                        record(arm, "stored_ratio_oblivious", outcome["stored"] / (RATE * outcome["card_peak"]))
    timings["accuracy_s"] = round(time.perf_counter() - started, 2)

    started = time.perf_counter()
    long_stream = churn_stream(THROUGHPUT_LENGTH, seed=seeds[0])
    speed = {arm: throughput(factory, long_stream) for arm, (_, factory) in track(arms.items(), desc="throughput")}
    lengths = [1 << j for j in range(10, 21) if (1 << j) <= THROUGHPUT_LENGTH] + [THROUGHPUT_LENGTH]
    curve_arms = ("exact", "hash_threshold", "robust", "robust_halving")
    curves = {arm: memory_curve(arms[arm][1](seeds[0]), long_stream, lengths) for arm in curve_arms}
    timings["throughput_and_memory_s"] = round(time.perf_counter() - started, 2)

    results: dict[str, dict[str, float]] = {}
    for arm, metrics in per_seed.items():
        row: dict[str, float] = {}
        for metric, values in metrics.items():
            if metric in ("max_stored_keys", "stored_ratio_oblivious", "stored_ratio_adaptive"):
                row[metric] = round(max(values), 4)
            else:
                row[metric] = round(float(np.mean(values)), 4)
                if metric == "rel_err_adaptive":
                    row["rel_err_adaptive_max"] = round(max(values), 4)
        row["updates_per_s"] = round(speed[arm])
        if arm != "datasketches_theta":
            row["speed_vs_theta"] = round(speed[arm] / speed["datasketches_theta"], 3)
        results[arm] = row
    settings = {
        "rate": RATE,
        "eps": EPS,
        "halving_k": HALVING_K,
        "lp_q": LP_Q,
        "lp_value_cap": LP_CAP,
        "theta_lg_k": THETA_LG_K,
        "attack_probes": ATTACK_PROBES,
        "churn_length": CHURN_LENGTH,
        "throughput_length": THROUGHPUT_LENGTH,
        "throughput_chunk": THROUGHPUT_CHUNK,
        "chunk": CHUNK,
        "capacity": CAPACITY,
        "horizon": HORIZON,
        "error": (
            "|F_hat - F| / prefix-max F at the end of each stream; mean over seeds (_max: worst seed); "
            "attack also: _mean = mean over probe times, _worst_half = max over the second half of the probes"
        ),
        "per_seed": {
            arm: {m: [round(v, 6) for v in vs] for m, vs in metrics.items()} for arm, metrics in per_seed.items()
        },
        "memory_curve": {"stream_length": lengths, **curves},
        "attack_trace": traces,
    }
    return {"settings": settings, "seeds": seeds, "arms": results, "timings": timings}


def score_pretrained(module, limit: int | None = None) -> dict[str, float]:
    """A built module's prefix-max error on churn seed 0 (the eval's seed-0 ``rel_err_oblivious``).

    Sketches have no pretrained weights: this scores the registry's configuration from scratch.

    Args:
        module: A :class:`~zoo.resettable_sketch.module.ResettableSketchModule` (fresh).
        limit: Use only the first ``limit`` updates of the stream.
    """
    stream = churn_stream(CHURN_LENGTH, seed=0)
    if limit is not None:
        stream = tuple(part[:limit] for part in stream)
    outcome = run_stream(module.sketch(), module.hparams.stat, stream)
    return {"rel_err_oblivious": outcome["rel_err"]}


def plot(result: dict, path, highlight: str | None = None) -> None:
    """The card figure: the attack, the errors, the memory curve and the throughput."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    arms, settings = result["arms"], result["settings"]
    fig, axes = plt.subplots(2, 2, figsize=(12, 8.5))

    ax = axes[0, 0]
    for i, (arm, trace) in enumerate(settings.get("attack_trace", {}).items()):
        colour, width = f"C{i}", 2.5 if arm == highlight else 1.3
        ax.plot(trace["probe"], trace["estimate"], color=colour, lw=width, label=f"{arm}: estimate")
        ax.plot(trace["probe"], trace["truth"], color=colour, lw=1.0, ls="--", label=f"{arm}: true active keys")
    ax.set(xlabel="probes", ylabel="active keys", title=f"adaptive attack (seed {result['seeds'][0]})")
    ax.legend(fontsize=7, ncol=2)

    ax = axes[0, 1]
    names = [arm for arm in arms if "rel_err_adaptive" in arms[arm] or "rel_err_oblivious" in arms[arm]]
    x = np.arange(len(names))
    for offset, metric in ((-0.2, "rel_err_adaptive"), (0.2, "rel_err_oblivious")):
        ax.bar(x + offset, [arms[a].get(metric, 0.0) for a in names], width=0.4, label=metric)
    ax.axhline(0.9, color="tab:red", ls="--", lw=1, label="baselines must reach 0.9")
    ax.axhline(0.15, color="tab:green", ls="--", lw=1, label="robust must stay under 0.15")
    ax.set_xticks(x, names, rotation=30, ha="right", fontsize=8)
    ax.set(ylabel="|F_hat - F| / prefix-max F", title="error at the end of the stream (mean over seeds)")
    ax.set_ylim(0, max(1.45, ax.get_ylim()[1]))
    ax.legend(fontsize=8, loc="upper center", ncol=2)

    ax = axes[1, 0]
    curve = settings.get("memory_curve", {})
    for arm, values in curve.items():
        if arm != "stream_length":
            ax.loglog(curve["stream_length"], np.maximum(values, 1), marker="o", ms=3, label=arm)
    if settings.get("halving_k"):
        ax.axhline(settings["halving_k"], color="gray", ls=":", lw=1, label=f"k = {settings['halving_k']}")
    ax.set(xlabel="stream length (churn updates)", ylabel="most stored keys", title="memory vs stream length")
    ax.legend(fontsize=8)

    ax = axes[1, 1]
    names = [arm for arm in arms if "updates_per_s" in arms[arm]]
    colours = ["tab:red" if a == highlight else "tab:gray" for a in names]
    ax.bar(range(len(names)), [arms[a]["updates_per_s"] / 1e6 for a in names], color=colours)
    ax.set_xticks(range(len(names)), names, rotation=30, ha="right", fontsize=8)
    ax.set(ylabel="million updates / s", title=f"throughput, {settings.get('throughput_length', 0):,} churn updates")

    fig.suptitle(f"{result['name']}: zoo eval, seeds {result['seeds']}", fontsize=11)
    fig.tight_layout()
    fig.savefig(Path(path), dpi=100)
    plt.close(fig)
