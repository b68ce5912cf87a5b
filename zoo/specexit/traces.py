"""Generated reasoning traces with known overthinking: multi-step integer arithmetic (issue 34 format).

A problem is a chain of operands in 1..9 joined by ``+``/``-``; every running value stays in ``0..max_running``
(a ``-`` that would go negative becomes ``+``, a ``+`` that would pass ``max_running`` becomes ``-``), so the
arithmetic facts a long problem needs are the ones a short problem needs. Its trace, in the format of a
reasoning model with a thinking block, is::

    Q:8+4-7+9=?<think>+4=12.\n\n-7=5.\n\n+9=14.\n\n14.\n\n
    Check: 14-9=5.\n\nCheck: 5+7=12.\n\nCheck: 12-4=8.\n\n</think>Answer: 14<eos>        (one string)

* **computation lines** (a scratchpad): each **step line** consumes one operand (``+4=12.``: the operator and
  operand of the next prompt entry, then the new running value; the first running value is the prompt's first
  operand), so no line grows with the problem's length, and under position coupling
  (:mod:`zoo.specexit.positions`) a step line carries the position ids of the prompt entry it consumes: reading
  the next operand is the same relation at every length (issue 34: the earlier format rewrote the remaining
  expression, and its first line copied at most the ~5 operands of the longest training line). After the last
  step comes the **bare answer line** (``14.``), the thinking's readout;
* with probability ``p_wrong`` a step line is first written with a wrong value (+-1 or +-10) and then corrected
  (``Wait,-7=5.``; the wrong digits are context, never targets: greedy decoding never writes them). The recipes
  set ``p_wrong`` to 0: a correction shares its block of position ids with the wrong line, which makes the next
  line's lookup of the running value ambiguous; ``L*`` still varies with the operand and check counts;
* then ``c`` redundant **checks**, the overthinking: each re-verifies one step, from the last backwards, as a whole
  equation in the spec's form (``"Check: …"``, and the spec's step lines ``"23+45=68."``): ``Check: 14-9=5.``
  restates the running value the step produced, undoes its operator and operand and lands on the running value
  before it; at most ``max_checks`` (4) and at most one per step. (Session 2026-12-02: the issue-34 format had
  terse checks, ``Check:-9=5.``, which drop the value being checked; with them the checks were ~44% of a
  greedy trace's tokens on validation problems, the ceiling of any exit that keeps the answer, against the 40%
  the acceptance asks of SpecExit. Restating the checked value, as the spec and the pre-coupling format did,
  makes them ~51% (the oracle exit's token cut on 300 validation problems, from the generator alone); the
  paper's traces lose 66% to an exit. The step lines stay one-operand lines: they carry the length
  generalisation.) Training traces draw ``c`` at random in ``0..c_max``
  (``c_max`` with probability ``p_all_checks``, the others uniformly), so ``</think>`` after **any** number of
  checks is in distribution for the target (issue 34: with one check per step in forward order, an exit one check
  late read a wrong number); greedy decoding still writes all ``c_max`` checks (the more likely branch at every check).

**Exit label** (:func:`exit_label`, the paper's definition): the earliest step delimiter after which the final
answer is already determined, i.e. from which on the answer the thinking block states (:func:`readout`: the
bare-number computation line, after corrections) is the answer the full trace gives. For a generated trace that
is the delimiter closing the bare answer line, ``L*``; a surface marker such as the first
``Check:`` plays no role (a wrong bare line that is corrected later is not determined).

Signal labels per token position ``t`` (counted from ``<think>``, ``L = L* - think``): ``progress = min(1, t/L)``;
``remain = log(max(L - t, 0) + 1)``; ``confidence = 1`` from ``L*`` on (forcing the answer at the last boundary
at or before ``t`` keeps the full trace's answer), 0 before.
"""

from __future__ import annotations

import math
import random
import re
from dataclasses import dataclass, field

import numpy as np

from zoo.specexit.tokenizer import DELIM, END_THINK, EOS, THINK, TraceTokenizer

MAX_CHECKS = 4


@dataclass(frozen=True)
class Problem:
    """An arithmetic chain.

    Args:
        operands: The numbers, left to right.
        ops: The operators between them (``"+"`` or ``"-"``), one fewer than ``operands``.
    """

    operands: tuple[int, ...]
    ops: tuple[str, ...]

    @property
    def expression(self) -> str:
        parts = [str(self.operands[0])]
        for op, operand in zip(self.ops, self.operands[1:], strict=True):
            parts += [op, str(operand)]
        return "".join(parts)

    @property
    def prompt(self) -> str:
        """The prompt text, ending with the opening ``<think>``."""
        return f"Q:{self.expression}=?{THINK}"

    def running_values(self) -> list[int]:
        """The value after each step (the last one is the answer)."""
        values, current = [], self.operands[0]
        for op, value in zip(self.ops, self.operands[1:], strict=True):
            current = current + value if op == "+" else current - value
            values.append(current)
        return values

    @property
    def answer(self) -> int:
        return self.running_values()[-1]


def sample_problem(
    rng: random.Random, min_operands: int = 3, max_operands: int = 6, max_value: int = 9, max_running: int = 49
) -> Problem:
    """A random problem whose running values stay in ``0..max_running``.

    Args:
        rng: Source of randomness.
        min_operands: Fewest operands.
        max_operands: Most operands.
        max_value: Largest operand.
        max_running: Largest running value (a ``+`` that would pass it becomes ``-``).
    """
    count = rng.randint(min_operands, max_operands)
    operands = [rng.randint(1, max_value) for _ in range(count)]
    operands[0] = min(operands[0], max_running)
    ops, current = [], operands[0]
    for value in operands[1:]:
        op = rng.choice("+-")
        if op == "-" and current - value < 0:
            op = "+"
        elif op == "+" and current + value > max_running:
            op = "-"
        current = current + value if op == "+" else current - value
        ops.append(op)
    return Problem(tuple(operands), tuple(ops))


def sample_problems(n: int, seed: int, exclude: set[str] | frozenset[str] | None = None, **kwargs) -> list[Problem]:
    """``n`` distinct problems (none of whose expressions is in ``exclude``).

    Args:
        n: Number of problems.
        seed: Seed of the generator.
        exclude: Expressions to skip (e.g. the training problems, for a held-out split).
        **kwargs: Passed to :func:`sample_problem`.
    """
    rng, seen, out = random.Random(seed), set(exclude or ()), []
    tries = 0
    while len(out) < n:
        problem = sample_problem(rng, **kwargs)
        tries += 1
        if problem.expression not in seen:
            seen.add(problem.expression)
            out.append(problem)
        elif tries > 200 * n + 10000:
            raise ValueError(f"cannot draw {n} distinct problems with {kwargs}; ask for fewer")
    return out


def max_checks(problem: Problem, limit: int = MAX_CHECKS) -> int:
    """Most checks a trace of ``problem`` writes (one per step, at most ``limit``)."""
    return min(limit, len(problem.ops))


def sample_checks(rng: random.Random, most: int, p_all: float) -> int:
    """Number of checks of a training trace: ``most`` with probability ``p_all``, else uniform in ``0..most-1``."""
    if most == 0 or rng.random() < p_all:
        return most
    return rng.randrange(most)


@dataclass
class Trace:
    """A tokenised trace and its signal labels.

    Args:
        problem: The problem.
        ids: Token ids of prompt + completion.
        prompt_len: Number of prompt tokens (the prompt ends with ``<think>``).
        think_pos: Index of ``<think>``.
        end_think_pos: Index of ``</think>``.
        lstar_pos: Index of the exit label: the delimiter closing the last computation line (:func:`exit_label`).
        delimiter_pos: Indices of all step delimiters inside the thinking block.
        noise_pos: Positions of the digits of injected wrong values (not learned as targets: the model should
            learn to correct a mistake, not to make one).
        checks: Number of ``Check:`` lines.
    """

    problem: Problem
    ids: list[int]
    prompt_len: int
    think_pos: int
    end_think_pos: int
    lstar_pos: int
    delimiter_pos: list[int] = field(default_factory=list)
    noise_pos: list[int] = field(default_factory=list)
    checks: int = 0

    def signal_labels(self) -> dict[str, np.ndarray]:
        """Per-position labels ``confidence``, ``progress``, ``remain`` (log space) and ``mask``.

        The mask covers the positions whose target features the draft reads while thinking:
        ``<think>`` up to the last delimiter before ``</think>``.
        """
        n = len(self.ids)
        lstar = self.lstar_pos - self.think_pos
        t = np.arange(n) - self.think_pos
        mask = (t >= 0) & (np.arange(n) < self.end_think_pos)
        progress = np.clip(t / lstar, 0.0, 1.0)
        remain = np.log(np.maximum(lstar - t, 0) + 1.0)
        confidence = (np.arange(n) >= self.lstar_pos).astype(np.float32)
        zero = np.zeros(n, dtype=np.float32)
        return {
            "mask": mask.astype(np.float32),
            "confidence": np.where(mask, confidence, zero).astype(np.float32),
            "progress": np.where(mask, progress, zero).astype(np.float32),
            "remain": np.where(mask, remain, zero).astype(np.float32),
        }


def build_trace(
    problem: Problem,
    tokenizer: TraceTokenizer,
    rng: random.Random | None = None,
    p_wrong: float = 0.0,
    p_all_checks: float = 1.0,
    checks: int | None = None,
    limit: int = MAX_CHECKS,
) -> Trace:
    """Write the reasoning trace of ``problem`` (see the module docstring for the format).

    Args:
        problem: The problem.
        tokenizer: Tokenizer of the traces.
        rng: Source of randomness for injected mistakes and the number of checks (None: neither; all checks).
        p_wrong: Probability that a computation line is first written wrong, then corrected.
        p_all_checks: Probability that a trace with ``rng`` writes all its checks (else 0..all-1, uniformly).
        checks: Write exactly this many checks (clipped to the most the problem has); overrides ``rng``.
        limit: Most checks of any trace.
    """
    most = max_checks(problem, limit)
    if checks is not None:
        count = max(0, min(checks, most))
    elif rng is not None:
        count = sample_checks(rng, most, p_all_checks)
    else:
        count = most
    ids = tokenizer.encode(problem.prompt)
    prompt_len, think_pos = len(ids), len(ids) - 1
    delimiters: list[int] = []
    noise: list[int] = []

    def add_line(text: str) -> None:
        ids.extend(tokenizer.encode(text + DELIM))
        delimiters.append(len(ids) - 1)

    values = problem.running_values()
    for op, operand, result in zip(problem.ops, problem.operands[1:], values, strict=True):
        if rng is not None and p_wrong > 0 and rng.random() < p_wrong:
            wrong = result + rng.choice((-10, -1, 1, 10))
            if wrong < 0 or wrong == result:
                wrong = result + 1
            start = len(ids) + 2 + len(str(operand))  # after the operator, the operand and "="
            add_line(f"{op}{operand}={wrong}.")
            noise.extend(range(start, start + len(str(wrong))))
            add_line(f"Wait,{op}{operand}={result}.")
        else:
            add_line(f"{op}{operand}={result}.")
    add_line(f"{problem.answer}.")
    lstar_pos = delimiters[-1]
    previous = [problem.operands[0], *values]
    for j in range(count):
        step = len(values) - j  # undo steps from the last backwards
        op, operand = problem.ops[step - 1], problem.operands[step]
        inverse = "-" if op == "+" else "+"
        add_line(f"Check: {previous[step]}{inverse}{operand}={previous[step - 1]}.")
    end_think_pos = len(ids)
    ids.extend(tokenizer.encode(f"{END_THINK}Answer: {problem.answer}{EOS}"))
    return Trace(problem, ids, prompt_len, think_pos, end_think_pos, lstar_pos, delimiters, noise, count)


def parse_answer(text: str) -> int | None:
    """The integer after the last ``Answer:`` in a generated text, or None."""
    _, found, tail = text.rpartition("Answer:")
    digits = ""
    for char in tail.strip():
        if not char.isdigit():
            break
        digits += char
    return int(digits) if found and digits else None


def _computation_lines(thinking: str) -> list[str]:
    """The complete computation lines (not ``Check:``) of a thinking text, ``Wait, `` stripped."""
    lines = thinking.split(DELIM)[:-1]  # the part after the last delimiter is an unfinished line
    out = []
    for line in lines:
        line = line.strip()
        if line.startswith("Wait,"):
            line = line[len("Wait,") :].strip()
        if line and not line.startswith("Check:"):
            out.append(line)
    return out


def _leading_int(text: str) -> int | None:
    digits = ""
    for char in text:
        if not char.isdigit():
            break
        digits += char
    return int(digits) if digits else None


def last_computed_value(thinking: str) -> int | None:
    """The running value of the last complete computation line (after its ``=``, or a bare number), or None."""
    lines = _computation_lines(thinking)
    return _leading_int(lines[-1].rpartition("=")[2]) if lines else None


_STEP_LINE = re.compile(r"^(?:Wait,)?[+-]\d+=(\d+)\.$")
_BARE_LINE = re.compile(r"^(\d+)\.$")


def stated_value(thinking: str) -> int | None:
    """The running value the complete lines of ``thinking`` have stated: the value of the last step line
    (``+4=12.``, ``Wait,`` corrections included) or bare line (``14.``); verification lines state none."""
    for line in reversed(thinking.split(DELIM)[:-1]):
        line = line.strip()
        found = _STEP_LINE.match(line) or _BARE_LINE.match(line)
        if found:
            return int(found.group(1))
    return None


def steps_done(thinking: str) -> int:
    """Complete step lines (``+4=12.``; a ``Wait,`` correction replaces its line, so it does not count) in
    ``thinking``."""
    lines = (line.strip() for line in thinking.split(DELIM)[:-1])
    return sum(bool(_STEP_LINE.match(line)) and not line.startswith("Wait,") for line in lines)


def readout(thinking: str) -> int | None:
    """The answer the thinking so far states: the last computation line when it is a bare number (``14.``), or None.

    Only complete lines (closed by a delimiter) count; checks are ignored, a ``Wait,`` correction replaces the line
    before it.
    """
    lines = _computation_lines(thinking)
    if not lines:
        return None
    body = lines[-1].rstrip(".")
    return int(body) if body.isdigit() else None


def exit_label(tokens: list[int], tokenizer: TraceTokenizer) -> int | None:
    """The exit label of a trace: the earliest delimiter after which the final answer is already determined.

    That is the first thinking delimiter ``d`` such that at ``d`` and at every later thinking delimiter the
    :func:`readout` (in the ``unmarked`` grammar of ``tokenizer``: :func:`stated_value`, the
    value of the last step line) equals the answer the full trace gives (after ``Answer:``), so that ending the
    thinking block at ``d`` keeps the trace's answer.

    Args:
        tokens: Token ids of a whole trace: a completion (starting after ``<think>``) or prompt + completion.
        tokenizer: The trace tokenizer.

    Returns:
        The index in ``tokens`` of that delimiter, or None when the trace states no answer, has no thinking block
        end, or its answer is never the thinking block's readout.
    """
    text_answer = parse_answer(tokenizer.decode(tokens))
    if text_answer is None or tokenizer.end_think_id not in tokens:
        return None
    start = tokens.index(tokenizer.think_id) + 1 if tokenizer.think_id in tokens else 0
    end = tokens.index(tokenizer.end_think_id)
    delimiters = [i for i in range(start, end) if tokens[i] == tokenizer.delim_id]
    read = stated_value if tokenizer.grammar == "unmarked" else readout  # no bare line there: the last step line
    label = None
    for position in reversed(delimiters):
        if read(tokenizer.decode(tokens[start : position + 1])) != text_answer:
            break
        label = position
    return label


def median_trace_length(n: int = 200, seed: int = 0, **kwargs) -> int:
    """Median number of completion tokens of clean traces (used to scale the ``remain`` threshold)."""
    tokenizer = TraceTokenizer()
    traces = (build_trace(p, tokenizer) for p in sample_problems(n, seed, **kwargs))
    return int(math.floor(float(np.median([len(t.ids) - t.prompt_len for t in traces]))))
