"""Validation-only calibration of the exit thresholds (SpecExit's and the probing baseline's) and forced answers.

Up to the moment it exits, an exit rule decodes exactly what plain speculative decoding decodes (greedy acceptance
is lossless, and the rule only reads). So one speculative run per validation problem with a recorder policy
(:class:`CalibrationRecorder`: it logs SpecExit's smoothed signals and the probe's probability at every decision
and never exits) tells, for **every** threshold, at which delimiter each rule would exit; what the target answers
after an exit there is one forced decode (:func:`forced_answer`: ``</think>`` appended, target greedy). Every
threshold of the grids is scored from these, exactly as a decode with it would score, at the cost of one run.

The rule: among the grid points whose validation accuracy is at most ``max_drop`` points below plain speculative
decoding (= target greedy), take the one with the fewest tokens (ties: the higher accuracy). Only validation
problems are ever passed in (:func:`zoo.specexit.data.validation_problems`); tests check this.
"""

from __future__ import annotations

import itertools
import statistics as st

import torch

from zoo.specexit.decoding import target_generate
from zoo.specexit.exits import ExitConfig, ProbeExit, SignalRecorder
from zoo.specexit.traces import Problem, parse_answer

#: SpecExit's grid (alpha 0.1 and progress 0.3 fixed as in the paper): smoothed confidence above, remaining
#: tokens below (14 = the spec's 0.2 x median trace length of 72, 200 = the paper's value, i.e. no limit here).
CONFIDENCE_GRID = [0.02, 0.04, 0.06, 0.08, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.65, 0.8]
REMAIN_GRID = [ExitConfig.remain, 2 * ExitConfig.remain, 200.0]
#: The probing baseline's grid: as many points as SpecExit's (36).
PROBE_GRID = [round(x, 3) for x in (0.3, 0.4, 0.5, 0.55, 0.6, 0.65, 0.7, 0.75, 0.8, 0.82, 0.84, 0.86)] + [
    round(0.87 + 0.005 * i, 3) for i in range(24)
]


class CalibrationRecorder(SignalRecorder):
    """Never exits; records SpecExit's smoothed signals and the probe's probability at every decision.

    Args:
        cfg: SpecExit's exit configuration (alpha, ``read_delimiter``).
        probe: The probing baseline's probe (None: not recorded).
        suffix: Token ids of the probe pass (``</think>Answer:``).
    """

    def __init__(self, cfg, probe=None, suffix=()) -> None:
        super().__init__(cfg)
        self.prober = ProbeExit(probe, 0.0, list(suffix)) if probe is not None else None

    def reset(self, engine, prompt) -> None:
        super().reset(engine, prompt)
        self.probes: list[float] = []

    def decide(self, engine, new_tokens, delimiter) -> bool:
        super().decide(engine, new_tokens, delimiter)
        if self.prober is not None:
            self.probes.append((delimiter, engine.probe_probability(self.prober.probe, self.prober.suffix, delimiter)))
        return False


@torch.inference_mode()
def forced_answer(module, prefix: list[int], max_new_tokens: int = 8) -> tuple[int | None, int]:
    """What the target answers when ``</think>`` is forced after ``prefix`` (prompt + thinking so far).

    Returns:
        The answer (None when it states none) and the completion tokens from ``</think>`` to ``<eos>`` inclusive.
    """
    tok = module.tokenizer
    result = target_generate(
        module.target, [*prefix, tok.end_think_id], module.taps, tok, max_new_tokens=max_new_tokens
    )
    return parse_answer(tok.decode(result.tokens)), 1 + len(result.tokens)


def record(module, problems: list[Problem]) -> list[dict]:
    """One recorded speculative run per problem, with the forced answer at every recorded delimiter."""
    tok = module.tokenizer
    suffix = [tok.end_think_id, tok.ids["Answer:"]]
    decoder = module.decoder()
    rows = []
    for problem in problems:
        prompt = module.encode_prompt(problem)
        recorder = CalibrationRecorder(module.exit_rule, module.probe, suffix)
        result = decoder.generate(prompt, recorder)
        sequence = prompt + result.tokens
        forced = {}
        for delimiter, *_ in recorder.records:
            forced[delimiter] = forced_answer(module, sequence[: delimiter + 1])
        rows.append(
            {
                "truth": problem.answer,
                "prompt_len": len(prompt),
                "tokens": len(result.tokens),
                "answer": parse_answer(tok.decode(result.tokens)),
                "signals": list(recorder.records),
                "probes": list(recorder.probes),
                "forced": forced,
            }
        )
    return rows


def _score(rows: list[dict], exit_at) -> tuple[float, float]:
    """Accuracy (%) and mean tokens when each row exits at ``exit_at(row)`` (a delimiter, or None: no exit)."""
    correct, tokens = [], []
    for row in rows:
        delimiter = exit_at(row)
        if delimiter is None:
            correct.append(row["answer"] == row["truth"])
            tokens.append(row["tokens"])
        else:
            answer, after = row["forced"][delimiter]
            correct.append(answer == row["truth"])
            tokens.append(delimiter - row["prompt_len"] + 1 + after)
    return 100.0 * st.fmean(correct), st.fmean(tokens)


def _choose(table: list[dict], floor: float) -> dict:
    kept = [row for row in table if row["accuracy"] >= floor]
    if kept:
        return min(kept, key=lambda row: (row["tokens_mean"], -row["accuracy"]))
    return max(table, key=lambda row: (row["accuracy"], -row["tokens_mean"]))


def calibrate(module, problems: list[Problem], max_drop: float = 1.0) -> dict:
    """Choose SpecExit's (confidence, remain) and the probe's threshold on ``problems`` (validation only).

    Returns:
        ``{"specexit": {confidence, remain, accuracy, tokens_mean}, "probe_exit": {threshold, ...},
        "speculative": {accuracy, tokens_mean}, "problems": n, "tables": {...}}``.
    """
    rows = record(module, problems)
    base_acc, base_tokens = _score(rows, lambda row: None)
    floor = base_acc - max_drop
    progress = module.exit_rule.progress
    signal_table = []
    for confidence, remain in itertools.product(CONFIDENCE_GRID, REMAIN_GRID):

        def first(row, c=confidence, r=remain):
            return next((d for d, cv, pv, rv in row["signals"] if cv > c and pv > progress and rv < r), None)

        acc, tokens = _score(rows, first)
        signal_table.append({"confidence": confidence, "remain": remain, "accuracy": acc, "tokens_mean": tokens})
    probe_table = []
    for threshold in PROBE_GRID:

        def first_probe(row, t=threshold):
            return next((d for d, p in row["probes"] if p > t), None)

        acc, tokens = _score(rows, first_probe)
        probe_table.append({"threshold": threshold, "accuracy": acc, "tokens_mean": tokens})
    return {
        "specexit": _choose(signal_table, floor),
        "probe_exit": _choose(probe_table, floor),
        "speculative": {"accuracy": base_acc, "tokens_mean": base_tokens},
        "problems": len(problems),
        "tables": {"specexit": signal_table, "probe_exit": probe_table},
    }
