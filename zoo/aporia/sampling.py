"""Sampling SOCRATES-mini from the generator LMs: the greedy pass, the probe and the kept pairs, labelled and embedded.

The procedure and why it is so are in :mod:`zoo.aporia.dataset`; :func:`sample_pairs` runs it for one generator,
:func:`build_socrates_mini` for all of them.
"""

from __future__ import annotations

import random
from dataclasses import asdict
from typing import Any

import numpy as np

from zoo.aporia.dataset import SocratesConfig, SocratesMini
from zoo.aporia.facts import (
    QUESTIONS_PER_FACT,
    Fact,
    country_facts,
    extract_answer,
    is_genuine,
    is_near_miss,
    label_response,
    prompt,
)
from zoo.progress import track


def sample_pairs(name: str, generator, config: SocratesConfig, model_index: int) -> tuple[list[dict], dict]:
    """Greedy pass, probe and sampling for one generator; returns its kept pairs and its statistics.

    Args:
        name: The generator's registry name (stored with each pair).
        generator: An ``AporiaGeneratorModule`` with its tokenizer.
        config: Dataset settings.
        model_index: Position of the generator (varies the seeds between generators).
    """
    rng = random.Random(config.seed * 7919 + model_index)
    facts = [f for f in country_facts() if f.attribute in config.attributes]
    fact_order = list(range(len(facts)))
    rng.shuffle(fact_order)
    templates = []
    for _ in facts:
        shuffled = list(range(QUESTIONS_PER_FACT))
        rng.shuffle(shuffled)
        templates.append(shuffled[: config.templates_per_fact])
    # candidates = (fact, question template): every fact once, then every fact in another phrasing, ...
    order = [(i, templates[i][r]) for r in range(config.templates_per_fact) for i in fact_order]
    order = order[: config.candidates_per_model]
    prompts = {c: prompt(facts[c[0]], c[1]) for c in order}
    temperature = {c: config.temperatures[k % len(config.temperatures)] for k, c in enumerate(order)}
    greedy: dict[tuple[int, int], str] = {}
    greedy_ok: dict[tuple[int, int], bool] = {}
    kept: list[dict] = []
    kept_facts: set[int] = set()  # one pair per fact and generator: its phrasings would be near-copies
    counts = {"probed": 0, "genuine": 0, "malformed": 0, "drawn": 0, "drawn_malformed": 0, "near_miss_short": 0}

    def draw(candidates: list[tuple[int, int]], n: int, seed: int) -> dict[tuple[int, int], list[str]]:
        """``n`` answers per candidate, each at its temperature (one sampling call per temperature)."""
        out = {}
        for t in config.temperatures:
            group = [c for c in candidates if temperature[c] == t]
            if group:
                answers = generator.sample(
                    [prompts[c] for c in group], n, temperature=t, top_p=config.top_p,
                    max_new_tokens=config.max_new_tokens, seed=seed,
                )  # fmt: skip
                out.update(zip(group, answers, strict=True))
        return out

    def near_miss_share(fact: Fact, hallucinated: list[str]) -> float:
        values = [extract_answer(fact, a) for a in hallucinated]
        return sum(is_near_miss(fact, v) for v in values if v is not None) / max(1, len(values))

    # strata by greedy correctness: pairs whose greedy answer is wrong tend to have a wrong modal answer too
    wrong = round(config.greedy_wrong_share * config.prompts_per_model)
    quota = {True: config.prompts_per_model - wrong, False: wrong}

    capped = True  # False in the top-up sweep: only the total counts
    probed: set[tuple[int, int]] = set()

    def full(greedy_right: bool) -> bool:
        if not capped:
            return len(kept) >= config.prompts_per_model
        return sum(p["greedy_genuine"] == greedy_right for p in kept) >= quota[greedy_right]

    def sweep(desc: str) -> None:
        chunk = 64
        for start in track(range(0, len(order), chunk), desc=desc, total=-(-len(order) // chunk)):
            if len(kept) >= config.prompts_per_model:
                break
            batch = [c for c in order[start : start + chunk] if c[0] not in kept_facts and c not in probed]
            fresh = [c for c in batch if c not in greedy]
            if fresh:
                answers = generator.sample(
                    [prompts[c] for c in fresh], 1, temperature=0.0, max_new_tokens=config.max_new_tokens
                )
                for c, (answer,) in zip(fresh, answers, strict=True):
                    greedy[c], greedy_ok[c] = answer, is_genuine(facts[c[0]], answer)
            batch = [c for c in batch if not full(greedy_ok[c])]  # skip full strata
            probed.update(batch)
            keep_from(batch)

    def keep_from(batch: list[tuple[int, int]]) -> None:
        candidates = []
        for c, answers in draw(batch, config.probe_samples, config.seed + 1).items():
            fact = facts[c[0]]
            labels = [label_response(fact, a) for a in answers]
            counts["probed"] += 1
            counts["genuine"] += labels.count("genuine")
            counts["malformed"] += labels.count("malformed")
            wrong_answers = [a for a, label in zip(answers, labels) if label == "hallucinated"]
            if min(labels.count("genuine"), len(wrong_answers)) < 2:
                continue
            # a screen at half the final share: the probe holds only a few hallucinated answers
            if near_miss_share(fact, wrong_answers) >= config.min_near_miss_share / 2:
                candidates.append(c)
        for c, answers in draw(candidates, config.max_samples, config.seed + 2).items():
            fact = facts[c[0]]
            labelled = [(a, label_response(fact, a)) for a in answers]
            well_formed = [(a, int(label == "hallucinated")) for a, label in labelled if label != "malformed"]
            counts["drawn"] += len(answers)
            counts["drawn_malformed"] += len(answers) - len(well_formed)
            well_formed = well_formed[: config.samples]
            n_h = sum(y for _, y in well_formed)
            enough = len(well_formed) == config.samples and min(n_h, config.samples - n_h) >= config.min_per_class
            if not enough or c[0] in kept_facts:
                continue
            if full(greedy_ok[c]):
                probed.discard(c)  # its stratum filled meanwhile: the top-up may still take it
                continue
            share = near_miss_share(fact, [a for a, y in well_formed if y])
            if share < config.min_near_miss_share:
                counts["near_miss_short"] += 1
                continue
            kept_facts.add(c[0])
            kept.append(
                {
                    "model": name,
                    "fact": fact.key,
                    "attribute": fact.attribute,
                    "country": fact.country,
                    "value": fact.value,
                    "prompt": prompts[c],
                    "question_template": c[1],
                    "temperature": temperature[c],
                    "greedy_answer": greedy[c],
                    "greedy_genuine": bool(greedy_ok[c]),
                    "near_miss_share": round(share, 4),
                    "malformed_drawn": len(answers) - len(labelled_ok(labelled)),
                    "responses": [a for a, _ in well_formed],
                    "labels": [y for _, y in well_formed],
                }
            )

    sweep(f"sampling {name}")
    first_sweep = len(kept)
    if config.balance_strata:
        kept = balanced(kept, config.greedy_wrong_share)
    elif len(kept) < config.prompts_per_model:
        # top-up: a greedy stratum ran out of candidates first; fill the rest from the other one
        capped = False
        sweep(f"top-up {name}")
    probe_total = max(1, counts["probed"] * config.probe_samples)
    stats = {
        "greedy_accuracy": float(np.mean(list(greedy_ok.values()))),
        "probe_accuracy": counts["genuine"] / probe_total,
        "probe_malformed_rate": counts["malformed"] / probe_total,
        "malformed_rate": counts["drawn_malformed"] / max(1, counts["drawn"]),  # the separate slice, left out
        "prompts_probed": counts["probed"],
        "pairs_near_miss_short": counts["near_miss_short"],
        "pairs_kept": len(kept),
        "pairs_topped_up": max(0, len(kept) - first_sweep),
        "pairs_cut_to_balance": max(0, first_sweep - len(kept)),
        "kept_greedy_accuracy": float(np.mean([p["greedy_genuine"] for p in kept])) if kept else 0.0,
        "kept_hallucination_rate": float(np.mean([np.mean(p["labels"]) for p in kept])) if kept else 0.0,
        "kept_near_miss_share": float(np.mean([p["near_miss_share"] for p in kept])) if kept else 0.0,
    }
    return kept, stats


def balanced(kept: list[dict], wrong_share: float) -> list[dict]:
    """Each greedy stratum cut to its share of the largest total the scarcer stratum allows (rounded down),
    keeping its first pairs in candidate order: with 0.5, as many greedy-right as greedy-wrong pairs.

    Args:
        kept: A generator's pairs in candidate order.
        wrong_share: Target share of pairs with a wrong greedy answer; 0 or 1 leaves ``kept`` as it is (one stratum).
    """
    if not 0 < wrong_share < 1:
        return kept
    n_wrong = sum(not p["greedy_genuine"] for p in kept)
    total = min(n_wrong / wrong_share, (len(kept) - n_wrong) / (1 - wrong_share))
    size = {False: int(total * wrong_share + 1e-9), True: int(total * (1 - wrong_share) + 1e-9)}
    taken = {True: 0, False: 0}
    out = []
    for p in kept:
        if taken[p["greedy_genuine"]] < size[p["greedy_genuine"]]:
            taken[p["greedy_genuine"]] += 1
            out.append(p)
    return out


def labelled_ok(labelled: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """The (answer, label) rows whose label is not "malformed"."""
    return [row for row in labelled if row[1] != "malformed"]


def build_socrates_mini(config: SocratesConfig, generators: dict[str, Any]) -> SocratesMini:
    """Sample, label and embed SOCRATES-mini with the given generator modules.

    Args:
        config: Dataset settings.
        generators: ``{registry name: AporiaGeneratorModule}`` for every name in ``config.generators``.
    """
    from zoo.common.minilm import embed

    pairs, models = [], {}
    for index, name in enumerate(config.generators):
        kept, stats = sample_pairs(name, generators[name], config, index)
        pairs += kept
        models[name] = stats
    responses = [r for p in pairs for r in p.pop("responses")]
    labels = np.array([y for p in pairs for y in p.pop("labels")], dtype=np.int8)
    pair = np.repeat(np.arange(len(pairs)), config.samples).astype(np.int32)
    return SocratesMini(
        responses=responses,
        labels=labels,
        pair=pair,
        embeddings=embed(responses),
        pairs=pairs,
        models=models,
        config=asdict(config),
    )
