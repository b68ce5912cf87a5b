"""``zoo eval specexit``: SpecExit against target greedy, speculative decoding, probing exit and label-free exits.

All arms decode the same held-out problems with the same weights, greedy, in one process, and differ only in how
they stop thinking. ``target_greedy`` uses no draft; ``speculative`` is SpecExit without its exit signal (the
paper's EAGLE-3 baseline). References: ``reference_first_check`` stops at the first ``Check:`` token and reads the
last computed value (label-free), ``reference_fixed_budget`` exits at the first delimiter after SpecExit's mean
exit position on validation problems, ``reference_oracle_exit`` once the true answer is written (the ceiling).
Latency: one CPU thread, a warm-up, ``latency_repeats`` decodes per problem and timed arm (order rotated), median.
Seeds are draft seeds: seed 0 is the published draft, seeds 1 and 2 train ``recipes/specexit/arith.yaml`` (2-6
min each on 2 cores) on the published target (never retrained here); all seeds decode the same test problems (100,
the spec's cut for the CPU budget). probe_exit's threshold and the budget are chosen per seed on validation problems.
"""

from __future__ import annotations

import dataclasses
import functools
import statistics as st

import torch

from zoo._errors import ZooError
from zoo._eval import Claim, Protocol, Setting, Tuning, beats
from zoo.progress import track
from zoo.specexit.data import TEST_SEED, VAL_SEED, make_splits
from zoo.specexit.decoding import FirstCheckStop, FixedBudgetExit
from zoo.specexit.traces import last_computed_value, parse_answer, sample_problems

MODES = {"target_greedy": "target", "speculative": "spec", "probe_exit": "probe_exit", "specexit": "specexit"}
MODES["reference_oracle_exit"] = "oracle_exit"
METRICS = ("accuracy", "tokens_mean", "target_forwards_mean", "latency_ms_mean", "thinking_tokens_mean", "exit_rate")
UNTIMED = ("reference_oracle_exit",)  # a bound on the savings, not a competitor: decoded once
PROBE_GRID = [0.5, 0.6, 0.7, 0.8, 0.85, 0.9, 0.93, 0.95, 0.97, 0.98, 0.99, 0.995]  # the spec fixes 0.9
EXIT_GRID = {"alpha": [0.1, 0.3, 0.5, 0.7, 0.9, 1.0], "read_delimiter": [False, True]}  # benchmarks/specexit_alpha.py

PROTOCOL = Protocol(
    method="specexit",
    baselines=("probe_exit",),
    ablations=("speculative",),
    references=("target_greedy", "reference_first_check", "reference_fixed_budget", "reference_oracle_exit"),
    settings={
        "test_problems": Setting(100, "held-out problems decoded per seed (the spec: 200)", minimum=1),
        "operands_min": Setting(3, "fewest operands of a test and validation problem (training: 3)", minimum=3),
        "operands_max": Setting(6, "most operands of a test and validation problem (training: 6)", minimum=4),
        "validation_problems": Setting(24, "validation problems that tune probe_exit and the budget", minimum=1),
        "confidence": Setting(0.8, "SpecExit's exit threshold on the smoothed confidence (paper 0.8)", minimum=0.0),
        "latency_repeats": Setting(3, "timed decodes per problem and arm (the median is kept)", minimum=1),
        "draft_steps": Setting(600, "draft steps (a change retrains)", recipe_keys=("trainer.max_steps",), minimum=1),
    },
    tuning={  # specexit: confidence 0.8, progress 0.3 the paper's; remain < 14 the spec's rule (0.2 x median length)
        "specexit": Tuning("validation", EXIT_GRID, 12, "alpha 0.9 (paper 0.1) and the delimiter read-out won"),
        "probe_exit": Tuning("validation", {"threshold": PROBE_GRID}, 12, "per seed: fewest tokens within 1 point"),
        "speculative": Tuning("none", {}, 0, "chain depth k=4 fixed by the spec; greedy acceptance is lossless"),
        "target_greedy": Tuning("none", {}, 0, "greedy decoding has no hyperparameter"),
        "reference_fixed_budget": Tuning("validation", {}, 1, "budget = SpecExit's mean exit position there"),
    },
    headline=("accuracy", "tokens_mean", "latency_ms_mean", "target_forwards_mean"),
)


@functools.cache
def _train_expressions() -> frozenset[str]:
    return frozenset(p.expression for p in make_splits(20000, 256, 0).train)


def validation_problems(n: int = 256, operands: tuple[int, int] = (3, 6)):
    """Validation problems (never the test split); at the default operands the datamodule's validation split."""
    return sample_problems(n, VAL_SEED, _train_expressions(), min_operands=operands[0], max_operands=operands[1])


def test_problems(n: int = 100, operands: tuple[int, int] = (3, 6)):
    """Held-out problems, disjoint from training and validation; at the default operands the datamodule's test split."""
    seen = _train_expressions() | {p.expression for p in validation_problems(256, operands)}
    return sample_problems(n, TEST_SEED, seen, min_operands=operands[0], max_operands=operands[1])


def generate(module, problem, arm: str, budget: int = 0):
    """Decode ``problem`` as ``arm`` does; ``result.answer`` is the answer the arm reads."""
    if arm in MODES:
        result = module.generate(problem, mode=MODES[arm], answer=problem.answer)
    else:
        policy = FirstCheckStop(module.tokenizer) if arm == "reference_first_check" else FixedBudgetExit(budget)
        result = module.decoder().generate(module.encode_prompt(problem), policy)
        result.text = module.tokenizer.decode(result.tokens)
    read_text = arm == "reference_first_check" and "Answer:" not in result.text
    result.answer = last_computed_value(result.text) if read_text else parse_answer(result.text)
    return result


def decode_arms(module, problems, arms, budget: int = 0, repeats: int = 3, warmup=()) -> dict[str, dict]:
    """Decode ``problems`` with every arm (interleaved, after a warm-up); the per-arm metrics of one seed."""
    for problem in warmup:
        for arm in arms:
            generate(module, problem, arm, budget)
    rows, outputs, end = {arm: [] for arm in arms}, {arm: [] for arm in arms}, module.tokenizer.end_think_id
    for index, problem in enumerate(track(problems, desc="specexit decode", total=len(problems))):
        order = arms[index % len(arms) :] + arms[: index % len(arms)]
        runs = {arm: [generate(module, problem, arm, budget)] for arm in order}
        for _ in range(repeats - 1):
            for arm in (a for a in order if a not in UNTIMED):
                runs[arm].append(generate(module, problem, arm, budget))
        for arm in arms:
            first, latency = runs[arm][0], 1000.0 * st.median(r.wall_time_s for r in runs[arm])
            thinking = first.tokens.index(end) if end in first.tokens else len(first.tokens)
            correct, exited = 100.0 * (first.answer == problem.answer), float(first.exit_at is not None)
            rows[arm].append((correct, len(first.tokens), first.target_forwards, latency, thinking, exited))
            outputs[arm].append(first.tokens)
    metrics = {arm: dict(zip(METRICS, map(st.fmean, zip(*rows[arm])), strict=True)) for arm in arms}
    if {"target_greedy", "speculative"} <= set(arms):
        pairs = zip(outputs["target_greedy"], outputs["speculative"], strict=True)
        metrics["speculative"]["lossless_match"] = st.fmean(a == b for a, b in pairs)
    if {"speculative", "specexit"} <= set(arms):
        spec, ours = metrics["speculative"], metrics["specexit"]
        ours["token_reduction_vs_spec"] = 1.0 - ours["tokens_mean"] / spec["tokens_mean"]
        ours["speedup_vs_spec"] = spec["latency_ms_mean"] / ours["latency_ms_mean"]
    return metrics


def calibrate(module, problems) -> dict[str, float]:
    """On validation problems: probe_exit's threshold (see ``PROTOCOL.tuning``) and the fixed token budget."""
    floor, rows = decode_arms(module, problems, ["speculative"], repeats=1)["speculative"]["accuracy"] - 1.0, []
    for threshold in PROBE_GRID:
        module.exit_rule = dataclasses.replace(module.exit_rule, probe_threshold=threshold)
        scores = decode_arms(module, problems, ["probe_exit"], repeats=1)["probe_exit"]
        rows.append((scores["accuracy"], scores["tokens_mean"], threshold))
    kept = [row for row in rows if row[0] >= floor]
    best = min(kept, key=lambda row: row[1]) if kept else max(rows, key=lambda row: (row[0], -row[1]))
    budget = decode_arms(module, problems, ["specexit"], repeats=1)["specexit"]["thinking_tokens_mean"]
    return {"probe_threshold": best[2], "budget": round(budget)}


def measure(arm: str, run) -> dict[str, float]:
    """One arm of one seed; the first call decodes every arm of the seed together."""
    settings, operands = run.settings, (run.settings["operands_min"], run.settings["operands_max"])
    if operands[0] > operands[1]:
        raise ZooError(f"--set operands_min={operands[0]} is above operands_max={operands[1]}")
    if "arms" not in run.cache:
        fit_args = [f"--model.init_args.target_from={run.entry('specexit').mirror_dir}"]  # the published target
        module = run.load("specexit", [] if run.uses_published("specexit") else fit_args).eval()
        module.exit_rule = dataclasses.replace(module.exit_rule, confidence=settings["confidence"])
        validation, threads = validation_problems(settings["validation_problems"], operands), torch.get_num_threads()
        torch.set_num_threads(1)  # batch 1: a second thread only adds contention noise to the latency
        try:
            tuned = calibrate(module, validation)
            module.exit_rule = dataclasses.replace(module.exit_rule, probe_threshold=tuned["probe_threshold"])
            problems, repeats = test_problems(settings["test_problems"], operands), settings["latency_repeats"]
            run.cache["arms"] = decode_arms(
                module, problems, list(PROTOCOL.arms), tuned["budget"], repeats, validation[:5]
            )
        finally:
            torch.set_num_threads(threads)
        run.cache["arms"]["probe_exit"]["probe_threshold"] = tuned["probe_threshold"]
        run.cache["arms"]["reference_fixed_budget"]["budget_tokens"] = tuned["budget"]
    return run.cache["arms"][arm]


def claims(result: dict) -> list[Claim]:
    """The spec's acceptance (the old eval's checks) and SpecExit against the label-free references."""
    arms, ref, spec = result["arms"], "reference_first_check", "speculative"
    ours, lossless = arms["specexit"], arms[spec]["lossless_match"]
    drop, extra = arms["target_greedy"]["accuracy"] - ours["accuracy"], ours["tokens_mean"] - arms[ref]["tokens_mean"]
    cut, speedup = ours["token_reduction_vs_spec"], ours["speedup_vs_spec"]
    return [
        Claim.at_least("speculative_lossless", "speculative = target greedy on every problem", lossless, 1.0),
        Claim.at_least("specexit_token_cut", ">= 40% fewer tokens than speculative (paper 66%)", cut, 0.4, spec),
        Claim.at_most("specexit_accuracy_drop", "SpecExit <= 1 point below target greedy", drop, 1.0, "target_greedy"),
        beats(result, "target_forwards_mean", "specexit", spec, higher_is_better=False),
        Claim.at_least("specexit_speedup", "latency speculative / SpecExit >= 1.5 (paper 2.5x)", speedup, 1.5, spec),
        beats(result, "latency_ms_mean", "specexit", "probe_exit", higher_is_better=False),
        beats(result, "accuracy", "specexit", ref, margin=1.0),
        Claim.at_most(f"specexit_tokens_vs_{ref}", f"SpecExit: no more tokens than {ref}", extra, 0.0, ref),
        beats(result, "accuracy", "specexit", "reference_fixed_budget", margin=1.0),
    ]


def score_pretrained(module, limit: int | None = None) -> dict[str, float]:
    """SpecExit's accuracy and token cut against speculative decoding on the first ``limit`` test problems."""
    arms = decode_arms(module, test_problems(100)[: limit or 100], ["speculative", "specexit"], repeats=1)
    return {key: arms["specexit"][key] for key in ("accuracy", "tokens_mean", "token_reduction_vs_spec")}
