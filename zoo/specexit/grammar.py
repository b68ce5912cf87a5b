"""An exit point without a surface marker (issue 62): the ``unmarked`` trace grammar and regular-expression stops.

In the first recipes' grammar (:func:`zoo.specexit.traces.build_trace`, here called ``checks``) every line after the
answer-fixing point ``L*`` is a ``Check:`` line and no ``Check:`` line comes before it, so a stop string finds
``L*`` exactly. The **unmarked** grammar interleaves genuine partial checks with the progress lines, in the same
formats as the redundant checks after the answer::

    Q:8+4-7+9=?<think>+4=12.\\n\\n-7=5.\\n\\nCheck: 5+7=12.\\n\\n+9=14.\\n\\n          (one string)
    14-9=5.\\n\\nCheck: 5+7=12.\\n\\n12-4=8.\\n\\n</think>Answer: 14<eos>

* a **step line** ``+4=12.`` consumes the next prompt entry (as in ``checks``); there is no bare answer line;
* a **verification line** re-verifies step ``i``, in one of two formats: the re-derivation ``8+4=12.`` (the step
  written out from its input) when the operand is odd, the undo ``Check: 12-4=8.`` when it is even;
* after step ``j`` that is not the last one, a **partial check** block walks back over ``m_j`` steps
  (``j, j-1, ...``): ``m_j = min(j, 0 | 1 | 2)`` for a next operand in ``1-3 | 4-6 | 7-9`` (a harder next step is
  prepared by re-checking more), a function of the prompt that the thinking text alone does not show;
* after the last step, ``c`` **redundant** verifications walk back from it in the same formats (``c`` as in
  ``checks``: all ``min(4, steps)`` for a clean trace, a random number in training).

``L*`` is the delimiter closing the last step line: from there on the running value is the answer and nothing
changes it. The first redundant line looks like a partial check of the step just done; only the length of the
walk-back (three or more lines) or the number of steps tells the text after ``L*`` apart, and the number of steps is
the problem's, which the thinking does not state.

A **regex stop** (:class:`RegexStop`) is a serving-stack stop pattern: after every generated token it searches the
thinking text so far (``\\Z``-anchored pattern); on a match decoding ends and the answer is the running value the
text has stated (:func:`stated_value`). :func:`regex_family` is the tuned family (31 patterns: the first
verification, the ``m``-th consecutive one, the first after ``k`` step lines, right after the ``k``-th step line, and
the two combined); :func:`tune_regex` picks the one with the fewest thinking tokens whose accuracy is within 1 point
of the full trace's on validation traces (the rule SpecExit's thresholds are calibrated by), and :func:`headroom`
compares it with the oracle exit at ``L*`` (the issue's gate).
"""

from __future__ import annotations

import random
import re
import statistics as st
from dataclasses import dataclass

from zoo.specexit.exits import NoExit
from zoo.specexit.tokenizer import DELIM, END_THINK, EOS, GRAMMARS, TraceTokenizer
from zoo.specexit.traces import (
    MAX_CHECKS,
    Problem,
    Trace,
    build_trace,
    max_checks,
    sample_checks,
    stated_value,
)


def partial_checks(problem: Problem, step: int) -> int:
    """Verification lines after step ``step`` (1-based, not the last): 0, 1 or 2 by the next operand, <= ``step``."""
    upcoming = problem.operands[step + 1]
    return min(step, 0 if upcoming <= 3 else 1 if upcoming <= 6 else 2)


def verification_line(problem: Problem, step: int) -> str:
    """The line re-verifying step ``step`` (1-based): a re-derivation for an odd operand, an undo for an even one."""
    previous = [problem.operands[0], *problem.running_values()]
    op, operand = problem.ops[step - 1], problem.operands[step]
    if operand % 2:
        return f"{previous[step - 1]}{op}{operand}={previous[step]}."
    inverse = "-" if op == "+" else "+"
    return f"Check: {previous[step]}{inverse}{operand}={previous[step - 1]}."


def build_unmarked_trace(
    problem: Problem,
    tokenizer: TraceTokenizer,
    rng: random.Random | None = None,
    p_all_checks: float = 1.0,
    checks: int | None = None,
    limit: int = MAX_CHECKS,
) -> Trace:
    """Write the ``unmarked`` trace of ``problem`` (module docstring); arguments as
    :func:`~zoo.specexit.traces.build_trace` (``checks`` counts the redundant verifications after ``L*``)."""
    most = max_checks(problem, limit)
    if checks is not None:
        count = max(0, min(checks, most))
    else:
        count = sample_checks(rng, most, p_all_checks) if rng is not None else most
    ids = tokenizer.encode(problem.prompt)
    prompt_len, think_pos = len(ids), len(ids) - 1
    delimiters: list[int] = []

    def add_line(text: str) -> None:
        ids.extend(tokenizer.encode(text + DELIM))
        delimiters.append(len(ids) - 1)

    values, steps = problem.running_values(), len(problem.ops)
    for step in range(1, steps + 1):
        add_line(f"{problem.ops[step - 1]}{problem.operands[step]}={values[step - 1]}.")
        if step < steps:
            for back in range(partial_checks(problem, step)):
                add_line(verification_line(problem, step - back))
    lstar_pos = delimiters[-1]
    for back in range(count):
        add_line(verification_line(problem, steps - back))
    end_think_pos = len(ids)
    ids.extend(tokenizer.encode(f"{END_THINK}Answer: {problem.answer}{EOS}"))
    return Trace(problem, ids, prompt_len, think_pos, end_think_pos, lstar_pos, delimiters, [], count)


def make_trace(problem: Problem, tokenizer: TraceTokenizer, grammar: str = "checks", **kwargs) -> Trace:
    """The trace of ``problem`` in ``grammar`` (``checks``: the recipes' :func:`build_trace`; ``unmarked``)."""
    if grammar == "checks":
        return build_trace(problem, tokenizer, **kwargs)
    if grammar == "unmarked":
        return build_unmarked_trace(problem, tokenizer, **kwargs)
    raise ValueError(f"unknown trace grammar {grammar!r}; choose one of {', '.join(GRAMMARS)}")


# Pieces of the stop patterns (matched against the thinking text, which ends with the newest token).
_START = r"(?:\A|\n\n)"  # a line start
_VERIFY = r"(?:Check:|\d)"  # the first token of a verification line (in ``checks`` a digit opens the bare line)
_VLINE = r"(?:Check: )?\d+[+-]\d+=\d+\.\n\n"  # a complete verification line
_SLINE = r"[+-]\d+=\d+\.\n\n"  # a complete step line
_ANY = r"(?:[^\n]*\n\n)*?"  # any complete lines


def _after_steps(k: int) -> str:
    return rf"\A(?:{_ANY}{_SLINE}){{{k}}}"


@dataclass(frozen=True)
class StopPattern:
    """One regex stop: ``name`` and the ``\\Z``-anchored ``pattern`` searched in the thinking text."""

    name: str
    pattern: str

    def compiled(self) -> re.Pattern:
        return re.compile(self.pattern)


def regex_family() -> list[StopPattern]:
    """The 31 stop patterns tuned on validation traces (the tuning budget of SpecExit's 36 threshold pairs)."""
    out = [StopPattern("first_verification", rf"{_START}{_VERIFY}\Z")]
    out += [StopPattern(f"consecutive_{m}", rf"{_START}(?:{_VLINE}){{{m - 1}}}{_VERIFY}\Z") for m in (2, 3, 4)]
    out += [StopPattern(f"verification_after_{k}_steps", rf"{_after_steps(k)}{_ANY}{_VERIFY}\Z") for k in range(1, 7)]
    out += [StopPattern(f"after_step_{k}", rf"{_after_steps(k)}\Z") for k in range(1, 7)]
    for m in (2, 3, 4):
        for k in range(2, 7):
            pattern = rf"(?:{_START}(?:{_VLINE}){{{m - 1}}}|{_after_steps(k)}{_ANY}){_VERIFY}\Z"
            out.append(StopPattern(f"consecutive_{m}_or_after_{k}_steps", pattern))
    return out


def pattern_named(name: str) -> StopPattern:
    """The family's pattern called ``name``."""
    for item in regex_family():
        if item.name == name:
            return item
    raise ValueError(f"no regex stop called {name!r}; the family: {', '.join(p.name for p in regex_family())}")


class RegexStop:
    """A regex stop rule over token ids: where it ends a thinking block and the answer it reads there.

    Args:
        pattern: The stop pattern.
        tokenizer: The trace tokenizer.
    """

    def __init__(self, pattern: StopPattern, tokenizer: TraceTokenizer) -> None:
        self.pattern, self.regex, self.tokenizer = pattern, pattern.compiled(), tokenizer

    def stop_index(self, thinking: list[int], start: int = 0) -> int | None:
        """The first index ``i >= start`` such that the text of ``thinking[: i + 1]`` matches, or None."""
        pieces = [self.tokenizer.tokens[t] for t in thinking]
        text = "".join(pieces[:start])
        for index in range(start, len(pieces)):
            if pieces[index] == END_THINK:
                return None
            text += pieces[index]
            if self.regex.search(text):
                return index
        return None

    def answer(self, thinking: list[int], index: int) -> int | None:
        """The answer read at a stop after ``thinking[index]``: the value the complete lines before it stated."""
        return stated_value(self.tokenizer.decode(thinking[: index + 1]))


def thinking_of(trace: Trace) -> list[int]:
    """The token ids of a trace's thinking block (after ``<think>``, before ``</think>``)."""
    return trace.ids[trace.think_pos + 1 : trace.end_think_pos]


def stop_scores(rule: RegexStop, traces: list[Trace]) -> dict[str, float]:
    """A regex stop on clean traces: accuracy (%), thinking tokens kept and the saving against the full thinking.

    A stop that never fires keeps the whole thinking block and the trace's own answer.
    """
    correct, kept, saved = [], [], []
    for trace in traces:
        thinking = thinking_of(trace)
        index = rule.stop_index(thinking)
        if index is None:
            answer, length = trace.problem.answer, len(thinking)
        else:
            answer, length = rule.answer(thinking, index), index + 1
        correct.append(100.0 * (answer == trace.problem.answer))
        kept.append(length)
        saved.append(len(thinking) - length)
    return {"accuracy": st.fmean(correct), "thinking_tokens": st.fmean(kept), "saving": st.fmean(saved)}


def oracle_scores(traces: list[Trace]) -> dict[str, float]:
    """The oracle exit at ``L*`` (after its delimiter) on clean traces: accuracy 100% by construction."""
    kept = [t.lstar_pos - t.think_pos for t in traces]
    full = [len(thinking_of(t)) for t in traces]
    return {"accuracy": 100.0, "thinking_tokens": st.fmean(kept), "saving": st.fmean(f - k for f, k in zip(full, kept))}


def tune_regex(traces: list[Trace], tokenizer: TraceTokenizer, tolerance: float = 1.0) -> tuple[StopPattern, list]:
    """The family's pattern with the fewest thinking tokens whose accuracy is within ``tolerance`` points of the
    full traces' (100%); if none is, the most accurate one. Returns it and every trial's ``(name, scores)``."""
    trials = [(p, stop_scores(RegexStop(p, tokenizer), traces)) for p in regex_family()]
    ok = [t for t in trials if t[1]["accuracy"] >= 100.0 - tolerance]
    best = min(ok, key=lambda t: t[1]["thinking_tokens"]) if ok else max(trials, key=lambda t: t[1]["accuracy"])
    return best[0], [(p.name, scores) for p, scores in trials]


def headroom(rule: RegexStop, traces: list[Trace]) -> dict[str, float]:
    """The issue's gate on clean traces: the regex stop's accuracy loss (points) and the share of the oracle exit's
    token saving it misses; ``gate`` = max(loss / 10, share / 0.2), which is >= 1 when the gate holds."""
    ours, oracle = stop_scores(rule, traces), oracle_scores(traces)
    loss = oracle["accuracy"] - ours["accuracy"]
    missed = 1.0 - ours["saving"] / oracle["saving"] if oracle["saving"] > 0 else 0.0
    return {
        "accuracy_loss": loss,
        "saving_missed": missed,
        "gate": max(loss / 10.0, missed / 0.2),
        "regex_accuracy": ours["accuracy"],
        "regex_saving": ours["saving"],
        "oracle_saving": oracle["saving"],
    }


class RegexStopPolicy(NoExit):
    """:class:`RegexStop` as an exit policy of :class:`~zoo.specexit.decoding.SpeculativeDecoder`: after each
    verification round it searches the newly accepted tokens (one prefix at a time) and ends decoding at the first
    match (``halt``); the answer is then read from the text (:func:`stated_value`), as a serving stop pattern would.

    Args:
        rule: The stop rule.
    """

    name = "regex_stop"

    def __init__(self, rule: RegexStop) -> None:
        self.rule = rule
        self.checked = 0

    def reset(self, engine, prompt) -> None:
        self.checked = 0

    def halt(self, completion: list[int]) -> int | None:
        index = self.rule.stop_index(completion, self.checked)
        self.checked = len(completion)
        return index
