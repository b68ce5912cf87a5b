"""``zoo eval specexit``: SpecExit against target greedy, speculative decoding, a probing exit and exit references.

Every arm decodes the same held-out problems with the same target, greedy, in one timed pass per seed, and differs
only in how it stops thinking; longer problems' metrics carry the prefix ``long_``.
"""

from __future__ import annotations

import json
import statistics as st
from dataclasses import replace

from zoo._errors import ZooError
from zoo.eval import Arm, Claim, Protocol, Setting, Shared, Step, Tuning, beats
from zoo.progress import track
from zoo.quant.moe.quantizers import torch_threads
from zoo.specexit.calibration import CONFIDENCE_GRID, PROBE_GRID, REMAIN_GRID, forced_answer
from zoo.specexit.data import test_problems, validation_problems
from zoo.specexit.exits import FirstCheckStop
from zoo.specexit.grammar import (
    GRAMMARS,
    RegexStop,
    RegexStopPolicy,
    StopPattern,
    make_trace,
    regex_family,
    stated_value,
)
from zoo.specexit.traces import exit_label, last_computed_value, parse_answer
from zoo.specexit.tune import PUBLISHED_GRAMMAR, TUNING_FILE, UNITS

MODES = {"target_greedy": "target", "speculative": "spec", "probe_exit": "probe_exit", "specexit": "specexit"}
MODES["reference_oracle_exit"] = "oracle_exit"
METRICS = (
    "accuracy", "tokens_mean", "target_forwards_mean", "latency_ms_mean", "thinking_tokens_mean", "exit_rate",
    "answer_kept",
)  # fmt: skip
REFERENCES = ("target_greedy", "reference_oracle_exit", "reference_first_check")
#: The label-free stops SpecExit must beat (issue 62): the tuned regex stop and the first-``Check:`` stop.
LABEL_FREE = ("reference_regex_stop", "reference_first_check")


def regex_tuning(grammar: str) -> dict:
    """What ``python -m zoo.specexit.tune`` recorded for ``grammar`` on validation traces (tuning.json): the chosen
    stop, its trials and its headroom gate per validation unit."""
    if not TUNING_FILE.is_file():
        raise ZooError(f"{TUNING_FILE} is missing: run `python -m zoo.specexit.tune` first")
    return json.loads(TUNING_FILE.read_text())["grammars"][grammar]


def tuned_stop(grammar: str = PUBLISHED_GRAMMAR) -> StopPattern:
    """The regex stop ``python -m zoo.specexit.tune`` chose for ``grammar`` on validation traces."""
    chosen = regex_tuning(grammar)
    return StopPattern(chosen["chosen"], chosen["pattern"])


def generate(module, problem, arm: str, keep: int | None = None):
    """Decode ``problem`` as ``arm`` does (``keep``: the answer ``reference_oracle_exit`` keeps, target greedy's);
    ``result.answer`` is the answer the arm reads."""
    if arm in MODES:
        keep = keep if keep is not None else -1  # no answer to keep: the oracle never exits
        result = module.generate(problem, mode=MODES[arm], answer=keep)
    elif arm == "reference_regex_stop":
        policy = RegexStopPolicy(RegexStop(tuned_stop(module.tokenizer.grammar), module.tokenizer))
        result = module.decoder().generate(module.encode_prompt(problem), policy)
        result.text = module.tokenizer.decode(result.tokens)
        if "Answer:" not in result.text:  # stopped by the pattern: the answer is the value the text stated
            result.answer = policy.rule.answer(result.tokens, len(result.tokens) - 1)
            return result
    else:
        result = module.decoder().generate(module.encode_prompt(problem), FirstCheckStop(module.tokenizer))
        result.text = module.tokenizer.decode(result.tokens)
    read_text = arm == "reference_first_check" and "Answer:" not in result.text
    if read_text and module.tokenizer.grammar == "unmarked":  # a re-derivation is no computation line there
        result.answer = stated_value(result.text + "\n\n")
    else:
        result.answer = last_computed_value(result.text + "\n\n") if read_text else parse_answer(result.text)
    return result


def decode_arms(module, problems, arms, repeats: int = 3, warmup=()) -> dict[str, dict]:
    """Decode ``problems`` with every arm (interleaved, after a warm-up); the per-arm metrics of one seed."""
    timed = [arm for arm in arms if arm != "reference_oracle_exit"]  # a bound on the savings: decoded once
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
    """Data acceptance: the target's accuracy (%) when ``</think>`` is forced into clean traces at ``L* + offset``,
    the delimiter closing the ``offset``-th check (problems with fewer checks do not count at that offset)."""
    tok, out = module.tokenizer, {}
    for offset in offsets:
        hits = []
        for problem in problems:
            trace = make_trace(problem, tok, tok.grammar)
            index = trace.delimiter_pos.index(trace.lstar_pos) + offset
            if 0 <= index < len(trace.delimiter_pos):
                answer, _ = forced_answer(module, trace.ids[: trace.delimiter_pos[index] + 1])
                hits.append(answer == problem.answer)
        name = f"forced_acc_lstar_{'m' if offset < 0 else 'p'}{abs(offset)}"
        out[name] = 100.0 * st.fmean(hits) if hits else 0.0
    return out


def measure_seed(run) -> dict[str, dict]:
    """Every arm of one seed: in-distribution and (prefixed ``long_``) longer problems, plus the data acceptance."""
    settings = run.settings
    short = (settings["operands_min"], settings["operands_max"])
    long = (settings["long_operands_min"], settings["long_operands_max"])
    for (lo, hi), what in ((short, "operands"), (long, "long_operands")):
        if lo > hi:
            raise ZooError(f"--set {what}_min={lo} is above {what}_max={hi}")
    module = run.load("specexit").eval()  # seeds other than the published one train the draft on the published target
    arms = list(SHARED_ARMS)
    with torch_threads(1):  # batch 1: a second thread only adds contention noise to the latency
        problems = test_problems(settings["test_problems"], short)
        warmup = validation_problems(5, short)
        metrics = decode_arms(module, problems, arms, settings["latency_repeats"], warmup)
        if settings["long_test_problems"]:
            longer = test_problems(settings["long_test_problems"], long)
            scores = decode_arms(module, longer, arms, settings["long_latency_repeats"])
            for arm in arms:
                metrics[arm].update({f"long_{key}": value for key, value in scores[arm].items()})
        metrics["target_greedy"].update(forced_exit_accuracy(module, problems))
    rule = module.exit_rule
    metrics["specexit"].update({"confidence_threshold": rule.confidence, "remain_threshold": rule.remain})
    metrics["probe_exit"]["probe_threshold"] = rule.probe_threshold
    return metrics


def gate_metrics() -> dict[str, float]:
    """The headroom gate of each grammar's tuned regex stop on its validation traces, as the tuning step measured it
    (no model): ``gate_*`` is max(accuracy loss / 10 points, missed share of the oracle exit's token saving / 0.2),
    >= 1 when it holds."""
    return {
        f"{key}_{grammar}_{short}": regex_tuning(grammar)["gate"][unit][key]
        for grammar in GRAMMARS
        for unit, short in zip(UNITS, ("in", "long"), strict=True)
        for key in ("gate", "accuracy_loss", "saving_missed")
    }


def measure_regex_stop(run) -> dict[str, float]:
    """``reference_regex_stop``: the published target (every seed's) decoding speculatively with the published draft
    until the tuned stop pattern matches, interleaved with plain speculative decoding in one timed pass; plus the
    headroom gate on validation traces (:func:`gate_metrics`). A rule without learning: seeds differ only in timing."""
    settings = run.settings
    short = (settings["operands_min"], settings["operands_max"])
    long = (settings["long_operands_min"], settings["long_operands_max"])
    module = run.published("specexit").eval()
    arms = ["speculative", "reference_regex_stop"]
    with torch_threads(1):
        problems = test_problems(settings["test_problems"], short)
        metrics = decode_arms(module, problems, arms, settings["latency_repeats"], validation_problems(5, short))
        if settings["long_test_problems"]:
            longer = test_problems(settings["long_test_problems"], long)
            scores = decode_arms(module, longer, arms, settings["long_latency_repeats"])
            for arm in arms:
                metrics[arm].update({f"long_{key}": value for key, value in scores[arm].items()})
    ours, spec = metrics["reference_regex_stop"], metrics["speculative"]
    ours["token_reduction_vs_spec"] = 1.0 - ours["tokens_mean"] / spec["tokens_mean"]
    ours["speedup_vs_spec"] = spec["latency_ms_mean"] / ours["latency_ms_mean"]
    return {**ours, **gate_metrics()}


def best_label_free(result: dict) -> Claim:
    """SpecExit >= 10% fewer tokens or >= 10% lower latency than the best label-free stop (fewest tokens, resp.
    lowest latency, of :data:`LABEL_FREE`), each paired over seeds beyond the spread; the stronger of the two."""
    arms = result["arms"]
    stops = [arm for arm in LABEL_FREE if arm in arms]
    found = []
    for metric in ("tokens_mean", "latency_ms_mean"):
        best = min(stops, key=lambda arm: arms[arm][metric])
        found.append(beats(result, metric, "specexit", best, 0.10, higher_is_better=False, relative=True))
    claim = max(found, key=lambda c: (c.holds, c.value))
    text = "SpecExit >= 10% fewer tokens or >= 10% lower latency than the best label-free stop; the better: "
    return replace(claim, id="specexit_beats_best_label_free_stop", text=text + claim.text)


def claims(result: dict) -> list[Claim]:
    """The acceptance: losslessness, a target that can reason, SpecExit keeping the answer while cutting tokens."""
    arms, spec = result["arms"], "speculative"
    greedy, ours, target = arms["target_greedy"], arms["specexit"], {"kind": "validity", "arm": "target_greedy"}
    forced = [greedy[f"forced_acc_lstar_p{j}"] for j in range(4) if f"forced_acc_lstar_p{j}" in greedy]

    def below(id: str, text: str, other: str, metric: str = "accuracy") -> Claim:
        return Claim.at_most(id, text, arms[other][metric] - ours[metric], 1.0, versus=other, arm="specexit")

    out = [
        Claim.at_least("speculative_lossless", "speculative = target greedy on every problem (%)",
                       arms[spec]["lossless_match"], 100.0, versus="target_greedy", kind="validity", arm=spec),
        Claim.at_least("target_accuracy", "target greedy accuracy in distribution >= 90%", greedy["accuracy"], 90.0,
                       **target),
    ]  # fmt: skip
    if "long_accuracy" in greedy:
        text = "target greedy accuracy on longer problems >= 70%"
        out.append(Claim.at_least("target_accuracy_long", text, greedy["long_accuracy"], 70.0, **target))
    out += [
        Claim.at_least("data_forced_exit", "forced-exit accuracy >= 95% at every step L*..L*+3 (the worst)",
                       min(forced), 95.0, **target),
        below("specexit_accuracy_drop", "SpecExit <= 1 point below target greedy", "target_greedy"),
        Claim.at_least("specexit_token_cut", ">= 40% fewer tokens than speculative (paper 66%)",
                       ours["token_reduction_vs_spec"], 0.4, versus=spec, arm="specexit"),
        Claim.at_least("specexit_speedup", "latency speculative / SpecExit >= 1.5 (paper 2.5x)",
                       ours["speedup_vs_spec"], 1.5, versus=spec, arm="specexit"),
        beats(result, "target_forwards_mean", "specexit", spec, higher_is_better=False),
        beats(result, "latency_ms_mean", "specexit", "probe_exit", higher_is_better=False),
        below("specexit_accuracy_vs_first_check", "SpecExit <= 1 point below the first-Check stop",
              "reference_first_check"),
    ]  # fmt: skip
    if "long_accuracy" in ours:
        text = "longer problems: SpecExit <= 1 point below target greedy"
        out.append(below("specexit_accuracy_drop_long", text, "target_greedy", "long_accuracy"))
    regex = arms.get("reference_regex_stop")
    if regex is not None:
        out.append(best_label_free(result))
        for grammar in GRAMMARS:
            what = "the published target's grammar" if grammar == PUBLISHED_GRAMMAR else "not the published target's"
            text = (
                f"headroom ({grammar} traces, {what}): the tuned regex stop loses >= 10 accuracy points or misses "
                ">= 20% of the oracle exit's token saving on validation traces (value: max(loss/10, missed/0.2))"
            )
            units = {unit: regex[f"gate_{grammar}_{short}"] for unit, short in zip(UNITS, ("in", "long"), strict=True)}
            out.append(Claim.gate(f"headroom_regex_stop_{grammar}", text, units, 1.0, arm="reference_regex_stop",
                                  versus="reference_oracle_exit"))  # fmt: skip
    return out


def score_pretrained(module, limit: int | None = None) -> dict[str, float]:
    """SpecExit's accuracy and token cut against speculative decoding on the first ``limit`` test problems."""
    arms = decode_arms(module, test_problems(100)[: limit or 100], ["speculative", "specexit"], repeats=1)
    return {key: arms["specexit"][key] for key in ("accuracy", "tokens_mean", "token_reduction_vs_spec")}


SHARED_ARMS = ("specexit", "probe_exit", "speculative", *REFERENCES)  # decoded in one interleaved, timed pass
REGEX_HELP = "stop pattern tuned on validation traces (tune.py); the published target and draft for every seed"

PROTOCOL = Protocol(
    method="specexit",
    baselines=("probe_exit",),
    ablations=("speculative",),
    references=(*REFERENCES, Arm("reference_regex_stop", measure=measure_regex_stop, timed=True, help=REGEX_HELP)),
    ceilings=("reference_oracle_exit",),  # it exits at the labelled answer-fixing point: an upper bound
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
        "reference_regex_stop": Tuning(
            "validation",
            {"pattern": [p.name for p in regex_family()]},
            len(regex_family()),
            "clean traces of the same 100 validation problems as specexit's calibration, same rule (fewest thinking "
            "tokens within 1 accuracy point of the full traces); python -m zoo.specexit.tune, zoo/specexit/tuning.json",
        ),
    },
    shared=(Shared(SHARED_ARMS, measure_seed, timed=True),),
    claims=claims,
    score_pretrained=score_pretrained,
    fit_args=lambda run: [f"--model.init_args.target_from={run.entry('specexit').mirror_dir}"],
    headline=("accuracy", "tokens_mean", "latency_ms_mean", "target_forwards_mean"),
    steps=(
        Step(
            "tune", ("python", "-m", "zoo.specexit.tune"), "the regex stop and the headroom gate on validation traces"
        ),
        Step("target", ("zoo", "fit", "-c", "recipes/specexit/arith_target.yaml"), "train the target LM"),
    ),
    lower_is_better=tuple(f"{prefix}{key}" for prefix in ("", "long_") for key in METRICS[1:5]),  # tokens, passes, ms
)
