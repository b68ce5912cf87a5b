"""``zoo eval specexit``: SpecExit against target greedy, speculative decoding, a probing exit and exit references.

All arms decode the same held-out problems with the same target, greedy, in one process, and differ only in how they
stop thinking. ``target_greedy`` uses no draft; ``speculative`` is SpecExit without its exit signal (the paper's
EAGLE-3 baseline, the ablation); ``probe_exit`` pays one extra target pass per delimiter. References:
``reference_oracle_exit`` exits where target greedy's own answer is determined (its trace's exit label, the ceiling
on savings that keep the answer), ``reference_first_check`` stops at the first ``Check:`` token and reads the last
computed value (label-free, it knows the trace format).

Problems: in distribution (``operands_min..operands_max``, 3-6 operands as in training) and longer
(``long_operands_min..long_operands_max``, 7-10 operands, beyond every training length); the longer problems' metrics
carry the prefix ``long_``. Thresholds are never tuned here: the draft recipe calibrates SpecExit's and the probe's
on validation problems when it ends (:mod:`zoo.specexit.calibration`) and the checkpoint carries them.
Data acceptance (``target_greedy``'s ``forced_acc_lstar_*``): the target's answer when ``</think>`` is forced into the
clean traces of the test problems at ``L*-1`` and ``L*..L*+3``.

Latency: one CPU thread, a warm-up, ``latency_repeats`` decodes per problem and timed arm (order rotated), median
(``long_latency_repeats`` on the longer problems). Seeds are draft seeds: seed 0 is the published draft, seeds 1 and 2
train ``recipes/specexit/arith.yaml`` on the published target (never retrained here). ``ZOO_SPECEXIT_EVAL_CACHE``
names a folder that keeps each seed's measured arms, so the evaluation can run as locked pieces
(``benchmarks/eval_pieces.py specexit``) and be merged by a final ``zoo eval specexit``.
"""

from __future__ import annotations

import functools
import json
import statistics as st
from pathlib import Path

import torch

from zoo._errors import ZooError
from zoo._eval import Claim, Protocol, Setting, Tuning, beats, piece_file
from zoo.progress import track
from zoo.specexit.calibration import CONFIDENCE_GRID, PROBE_GRID, REMAIN_GRID, forced_answer
from zoo.specexit.data import TEST_SEED, VAL_SEED, make_splits
from zoo.specexit.decoding import FirstCheckStop
from zoo.specexit.traces import build_trace, exit_label, last_computed_value, parse_answer, sample_problems

MODES = {"target_greedy": "target", "speculative": "spec", "probe_exit": "probe_exit", "specexit": "specexit"}
MODES["reference_oracle_exit"] = "oracle_exit"
METRICS = (
    "accuracy", "tokens_mean", "target_forwards_mean", "latency_ms_mean", "thinking_tokens_mean", "exit_rate",
    "answer_kept",
)  # fmt: skip
UNTIMED = ("reference_oracle_exit",)  # a bound on the savings, not a competitor: decoded once
CACHE_ENV = "ZOO_SPECEXIT_EVAL_CACHE"

PROTOCOL = Protocol(
    method="specexit",
    baselines=("probe_exit",),
    ablations=("speculative",),
    references=("target_greedy", "reference_oracle_exit", "reference_first_check"),
    settings={
        "test_problems": Setting(100, "held-out in-distribution problems decoded per seed (the spec: 200)", minimum=1),
        "operands_min": Setting(3, "fewest operands of an in-distribution test problem (training: 2-6)", minimum=2),
        "operands_max": Setting(6, "most operands of an in-distribution test problem (training: 2-6)", minimum=2),
        "long_test_problems": Setting(40, "held-out longer problems decoded per seed (0: none)", minimum=0),
        "long_operands_min": Setting(7, "fewest operands of a longer test problem (beyond training's 6)", minimum=2),
        "long_operands_max": Setting(10, "most operands of a longer test problem", minimum=2),
        "latency_repeats": Setting(3, "timed decodes per in-distribution problem and arm (median kept)", minimum=1),
        "long_latency_repeats": Setting(1, "timed decodes per longer problem and arm", minimum=1),
        "draft_steps": Setting(1200, "draft steps (a change retrains)", recipe_keys=("trainer.max_steps",), minimum=1),
    },
    tuning={
        "specexit": Tuning(
            "validation",
            {"confidence": CONFIDENCE_GRID, "remain": REMAIN_GRID},
            len(CONFIDENCE_GRID) * len(REMAIN_GRID),
            "per draft seed, at the end of the draft recipe, on 100 validation problems (3-6 operands): fewest "
            "tokens within 1 accuracy point of speculative decoding; alpha 0.1 and progress 0.3 are the paper's",
        ),
        "probe_exit": Tuning(
            "validation", {"threshold": PROBE_GRID}, len(PROBE_GRID), "same problems, rule and budget as specexit"
        ),
        "speculative": Tuning("none", {}, 0, "chain depth k=4 fixed by the spec; greedy acceptance is lossless"),
        "target_greedy": Tuning("none", {}, 0, "greedy decoding has no hyperparameter"),
        "reference_oracle_exit": Tuning("none", {}, 0, "exits at the exit label of target greedy's own trace"),
        "reference_first_check": Tuning("none", {}, 0, "no hyperparameter"),
    },
    headline=("accuracy", "tokens_mean", "latency_ms_mean", "target_forwards_mean"),
)


@functools.cache
def _train_expressions() -> frozenset[str]:
    """The training problems of the recipes (the datamodule's defaults)."""
    return frozenset(p.expression for p in make_splits(20000, 256, 0).train)


def validation_problems(n: int = 100, operands: tuple[int, int] = (3, 6)):
    """Validation problems (disjoint from training and test); the calibration's only data."""
    return sample_problems(n, VAL_SEED, _train_expressions(), min_operands=operands[0], max_operands=operands[1])


def test_problems(n: int = 100, operands: tuple[int, int] = (3, 6)):
    """Held-out problems, disjoint from training and from the first 1000 validation problems of the same lengths."""
    seen = _train_expressions() | {p.expression for p in validation_problems(1000, operands)}
    return sample_problems(n, TEST_SEED, seen, min_operands=operands[0], max_operands=operands[1])


def generate(module, problem, arm: str, keep: int | None = None):
    """Decode ``problem`` as ``arm`` does; ``result.answer`` is the answer the arm reads.

    Args:
        module: The SpecExit module.
        problem: The problem.
        arm: The arm.
        keep: For ``reference_oracle_exit``: the answer to keep (target greedy's).
    """
    if arm in MODES:
        keep = keep if keep is not None else -1  # no answer to keep: the oracle never exits
        result = module.generate(problem, mode=MODES[arm], answer=keep)
    else:
        result = module.decoder().generate(module.encode_prompt(problem), FirstCheckStop(module.tokenizer))
        result.text = module.tokenizer.decode(result.tokens)
    read_text = arm == "reference_first_check" and "Answer:" not in result.text
    result.answer = last_computed_value(result.text + "\n\n") if read_text else parse_answer(result.text)
    return result


def decode_arms(module, problems, arms, repeats: int = 3, warmup=()) -> dict[str, dict]:
    """Decode ``problems`` with every arm (interleaved, after a warm-up); the per-arm metrics of one seed."""
    arms = list(arms)
    timed = [arm for arm in arms if arm not in UNTIMED]
    for problem in warmup:
        for arm in timed:
            generate(module, problem, arm)
    tok = module.tokenizer
    rows, outputs = {arm: [] for arm in arms}, {arm: [] for arm in arms}
    exits = {"at_label": [], "late": [], "early": []}
    for index, problem in enumerate(track(problems, desc="specexit decode", total=len(problems))):
        order = timed[index % len(timed) :] + timed[: index % len(timed)]
        runs = {arm: [generate(module, problem, arm)] for arm in order}
        for _ in range(repeats - 1):
            for arm in order:
                runs[arm].append(generate(module, problem, arm))
        reference = runs.get("target_greedy", runs.get("speculative"))
        kept = reference[0].answer if reference else None
        if "reference_oracle_exit" in arms:
            runs["reference_oracle_exit"] = [generate(module, problem, "reference_oracle_exit", keep=kept)]
        for arm in arms:
            first, latency = runs[arm][0], 1000.0 * st.median(r.wall_time_s for r in runs[arm])
            thinking = first.tokens.index(tok.end_think_id) if tok.end_think_id in first.tokens else len(first.tokens)
            correct, exited = 100.0 * (first.answer == problem.answer), float(first.exit_at is not None)
            same = 100.0 * (first.answer == kept)
            rows[arm].append((correct, len(first.tokens), first.target_forwards, latency, thinking, exited, same))
            outputs[arm].append(first.tokens)
        if reference and "specexit" in arms:
            label = exit_label(reference[0].tokens, tok)
            ours = runs["specexit"][0].exit_at
            exits["at_label"].append(100.0 * (ours is not None and ours == label))
            exits["late"].append(100.0 * (ours is None or (label is not None and ours > label)))
            exits["early"].append(100.0 * (ours is not None and (label is None or ours < label)))
    metrics = {arm: dict(zip(METRICS, map(st.fmean, zip(*rows[arm])), strict=True)) for arm in arms}
    if {"target_greedy", "speculative"} <= set(arms):
        pairs = zip(outputs["target_greedy"], outputs["speculative"], strict=True)
        metrics["speculative"]["lossless_match"] = 100.0 * st.fmean(a == b for a, b in pairs)
    if {"speculative", "specexit"} <= set(arms):
        spec, ours = metrics["speculative"], metrics["specexit"]
        ours["token_reduction_vs_spec"] = 1.0 - ours["tokens_mean"] / spec["tokens_mean"]
        ours["speedup_vs_spec"] = spec["latency_ms_mean"] / ours["latency_ms_mean"]
        ours.update({f"exit_{key}_rate": st.fmean(values) for key, values in exits.items()})
    return metrics


def forced_exit_accuracy(module, problems, offsets=(-1, 0, 1, 2, 3)) -> dict[str, float]:
    """Data acceptance: the target's accuracy (%) when ``</think>`` is forced into clean traces at ``L* + offset``.

    The clean trace of each problem writes all its checks; ``L*+j`` is the delimiter closing the ``j``-th check, and
    problems with fewer than ``j`` checks do not count at that offset.
    """
    tok, out = module.tokenizer, {}
    for offset in offsets:
        hits = []
        for problem in problems:
            trace = build_trace(problem, tok)
            index = trace.delimiter_pos.index(trace.lstar_pos) + offset
            if 0 <= index < len(trace.delimiter_pos):
                answer, _ = forced_answer(module, trace.ids[: trace.delimiter_pos[index] + 1])
                hits.append(answer == problem.answer)
        name = f"forced_acc_lstar_{'m' if offset < 0 else 'p'}{abs(offset)}"
        out[name] = 100.0 * st.fmean(hits) if hits else 0.0
    return out


def _cache_file(run) -> Path | None:
    def key():
        return {"seed": run.seed, "settings": run.settings, "published": run.uses_published("specexit")}

    return piece_file(CACHE_ENV, f"seed{run.seed}", key)


def _ranges(settings) -> tuple[tuple[int, int], tuple[int, int]]:
    short = (settings["operands_min"], settings["operands_max"])
    long = (settings["long_operands_min"], settings["long_operands_max"])
    for (lo, hi), what in ((short, "operands"), (long, "long_operands")):
        if lo > hi:
            raise ZooError(f"--set {what}_min={lo} is above {what}_max={hi}")
    return short, long


def measure_seed(run) -> dict[str, dict]:
    """Every arm of one seed: in-distribution and (prefixed ``long_``) longer problems, plus the data acceptance."""
    settings = run.settings
    short, long = _ranges(settings)
    fit_args = [f"--model.init_args.target_from={run.entry('specexit').mirror_dir}"]  # the published target
    module = run.load("specexit", [] if run.uses_published("specexit") else fit_args).eval()
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # batch 1: a second thread only adds contention noise to the latency
    try:
        arms = list(PROTOCOL.arms)
        warmup = validation_problems(5, short)
        problems = test_problems(settings["test_problems"], short)
        metrics = decode_arms(module, problems, arms, settings["latency_repeats"], warmup)
        if settings["long_test_problems"]:
            longer = test_problems(settings["long_test_problems"], long)
            scores = decode_arms(module, longer, arms, settings["long_latency_repeats"])
            for arm in arms:
                metrics[arm].update({f"long_{key}": value for key, value in scores[arm].items()})
        metrics["target_greedy"].update(forced_exit_accuracy(module, problems))
    finally:
        torch.set_num_threads(threads)
    rule = module.exit_rule
    metrics["specexit"].update({"confidence_threshold": rule.confidence, "remain_threshold": rule.remain})
    metrics["probe_exit"]["probe_threshold"] = rule.probe_threshold
    return metrics


def measure(arm: str, run) -> dict[str, float]:
    """One arm of one seed; the first call decodes every arm of the seed together (or reads the seed's cache)."""
    _ranges(run.settings)
    if "arms" not in run.cache:
        path = _cache_file(run)
        if path is not None and path.is_file():
            run.cache["arms"] = json.loads(path.read_text())
        else:
            run.cache["arms"] = measure_seed(run)
            if path is not None:
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_text(json.dumps(run.cache["arms"], indent=1))
    return run.cache["arms"][arm]


def claims(result: dict) -> list[Claim]:
    """Issue 34's acceptance: losslessness, a target that can reason, SpecExit keeping the answer while cutting."""
    arms, spec = result["arms"], "speculative"
    ours, greedy = arms["specexit"], arms["target_greedy"]
    drop = greedy["accuracy"] - ours["accuracy"]
    out = [
        Claim.at_least("speculative_lossless", "speculative = target greedy on every problem (%)",
                       arms[spec]["lossless_match"], 100.0, "target_greedy"),
        Claim.at_least("target_accuracy", "target greedy accuracy in distribution >= 90%", greedy["accuracy"], 90.0),
    ]  # fmt: skip
    if "long_accuracy" in greedy:
        out.append(
            Claim.at_least(
                "target_accuracy_long",
                "target greedy accuracy on longer problems >= 70%",
                greedy["long_accuracy"],
                70.0,
            )  # fmt: skip
        )
    forced = [greedy[f"forced_acc_lstar_p{j}"] for j in range(4) if f"forced_acc_lstar_p{j}" in greedy]
    out += [
        Claim.at_least("data_forced_exit", "forced-exit accuracy >= 95% at every step L*..L*+3 (the worst)",
                       min(forced), 95.0),
        Claim.at_most("specexit_accuracy_drop", "SpecExit <= 1 point below target greedy", drop, 1.0, "target_greedy"),
        Claim.at_least("specexit_token_cut", ">= 40% fewer tokens than speculative (paper 66%)",
                       ours["token_reduction_vs_spec"], 0.4, spec),
        Claim.at_least("specexit_speedup", "latency speculative / SpecExit >= 1.5 (paper 2.5x)",
                       ours["speedup_vs_spec"], 1.5, spec),
        beats(result, "target_forwards_mean", "specexit", spec, higher_is_better=False),
        beats(result, "latency_ms_mean", "specexit", "probe_exit", higher_is_better=False),
        Claim.at_most("specexit_accuracy_vs_first_check", "SpecExit <= 1 point below the first-Check stop",
                      arms["reference_first_check"]["accuracy"] - ours["accuracy"], 1.0, "reference_first_check"),
    ]  # fmt: skip
    if "long_accuracy" in ours:
        out.append(
            Claim.at_most(
                "specexit_accuracy_drop_long",
                "longer problems: SpecExit <= 1 point below target greedy",
                greedy["long_accuracy"] - ours["long_accuracy"],
                1.0,
                "target_greedy",
            )  # fmt: skip
        )
    return out


def score_pretrained(module, limit: int | None = None) -> dict[str, float]:
    """SpecExit's accuracy and token cut against speculative decoding on the first ``limit`` test problems."""
    arms = decode_arms(module, test_problems(100)[: limit or 100], ["speculative", "specexit"], repeats=1)
    return {key: arms["specexit"][key] for key in ("accuracy", "tokens_mean", "token_reduction_vs_spec")}
