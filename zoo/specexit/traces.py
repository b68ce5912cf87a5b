"""Generated reasoning traces with known overthinking: multi-step integer arithmetic.

A problem is a chain of 3-6 operands in 1..9 joined by ``+``/``-`` (a ``-`` whose result would be
negative becomes ``+``, so every running value lies in 0..54; ``max_value`` widens the operand range).
Its trace, in the format of a reasoning model with a thinking block, is::

    Q:8+4-7+9=?<think>8+4=12.\\n\\n12-7=5.\\n\\n5+9=14.\\n\\nCheck: 12-4=8.\\n\\n
    Check: 5+7=12.\\n\\nCheck: 14-9=5.\\n\\n</think>Answer: 14<eos>

* one computation step per operator, each closed by the single-token delimiter ``"\\n\\n"``;
* with probability ``p_wrong`` a computation step is first written with a wrong result and then
  corrected (``Wait, 8+4=12.``), so the position of the sufficient step varies beyond the operand count;
* then one redundant inverse check per computation step: the **overthinking**, about half the trace;
  with probability ``p_skip_checks`` (training data only) a trace skips all checks and closes the thinking
  block right at ``L*``, so that forcing ``</think>`` there (what an early exit does) is in distribution for
  the target. Greedy decoding still writes every check (the more likely branch), so the overthinking stays.

The answer is fixed once the last computation step is written, so the earliest sufficient boundary
``L*`` is known by construction: the delimiter that closes the last (corrected) computation step.
Forcing ``</think>Answer:`` there gives the right answer; forcing it at any earlier boundary gives an
intermediate value (the spec defines L* by forcing the trained target; here the construction gives it
exactly, which is what the issue asks for).

Signal labels per token position ``t`` (counted from ``<think>``, ``L = L* - think``):

* ``progress = min(1, t / L)``;
* ``remain = log(max(L - t, 0) + 1)`` (the draft regresses remaining length in log space);
* ``confidence = 1`` once the last boundary at or before ``t`` is ``L*`` or later, i.e. forcing the answer
  there is correct (the spec's label): 0 inside the last computation step, 1 from its closing delimiter on.
  The exit rule reads the signal of the delimiter it stands on (see :class:`~zoo.specexit.decoding.SignalExit`),
  so the exit can fire exactly at ``L*``. (An earlier variant labelled the whole last step 1, so that the
  paper's update-after-check order could fire at ``L*``; mid-step positions cannot know that their step is
  the last, and that label left the signal at the delimiters too weak: exits came one step late.)
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass, field

import numpy as np

from zoo.specexit.tokenizer import DELIM, END_THINK, EOS, THINK, TraceTokenizer


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
        for op, value in zip(self.ops, self.operands[1:], strict=True):
            parts += [op, str(value)]
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


def sample_problem(rng: random.Random, min_operands: int = 3, max_operands: int = 6, max_value: int = 9) -> Problem:
    """A random problem whose running values never go negative.

    Args:
        rng: Source of randomness.
        min_operands: Fewest operands.
        max_operands: Most operands.
        max_value: Largest operand.
    """
    count = rng.randint(min_operands, max_operands)
    operands = [rng.randint(1, max_value) for _ in range(count)]
    ops, current = [], operands[0]
    for value in operands[1:]:
        op = rng.choice("+-")
        if op == "-" and current - value < 0:
            op = "+"
        current = current + value if op == "+" else current - value
        ops.append(op)
    return Problem(tuple(operands), tuple(ops))


def sample_problems(n: int, seed: int, exclude: set[str] | None = None, **kwargs) -> list[Problem]:
    """``n`` distinct problems (none of whose expressions is in ``exclude``).

    Args:
        n: Number of problems.
        seed: Seed of the generator.
        exclude: Expressions to skip (e.g. the training problems, for a held-out split).
        **kwargs: Passed to :func:`sample_problem`.
    """
    rng, seen, out = random.Random(seed), set(exclude or ()), []
    while len(out) < n:
        problem = sample_problem(rng, **kwargs)
        if problem.expression not in seen:
            seen.add(problem.expression)
            out.append(problem)
    return out


@dataclass
class Trace:
    """A tokenised trace and its signal labels.

    Args:
        problem: The problem.
        ids: Token ids of prompt + completion.
        prompt_len: Number of prompt tokens (the prompt ends with ``<think>``).
        think_pos: Index of ``<think>``.
        end_think_pos: Index of ``</think>``.
        lstar_pos: Index of the delimiter closing the last computation step (the earliest sufficient boundary).
        delimiter_pos: Indices of all step delimiters inside the thinking block.
        step_end: For each position in the thinking block, the index of the delimiter closing its step
            (-1 outside the block).
        noise_pos: Positions of the digits of injected wrong results (not learned as targets: the model should
            learn to correct a mistake, not to make one).
    """

    problem: Problem
    ids: list[int]
    prompt_len: int
    think_pos: int
    end_think_pos: int
    lstar_pos: int
    delimiter_pos: list[int] = field(default_factory=list)
    step_end: list[int] = field(default_factory=list)
    noise_pos: list[int] = field(default_factory=list)

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
    p_skip_checks: float = 0.0,
) -> Trace:
    """Write the reasoning trace of ``problem`` (see the module docstring for the format).

    Args:
        problem: The problem.
        tokenizer: Tokenizer of the traces.
        rng: Source of randomness for injected mistakes and skipped checks (None: neither).
        p_wrong: Probability that a computation step is first written wrong, then corrected.
        p_skip_checks: Probability that the trace has no ``Check:`` steps (``</think>`` right after ``L*``).
    """
    skip_checks = rng is not None and p_skip_checks > 0 and rng.random() < p_skip_checks
    ids = tokenizer.encode(problem.prompt)
    prompt_len, think_pos = len(ids), len(ids) - 1
    step_end = [-1] * len(ids)
    delimiters: list[int] = []

    def add_step(text: str) -> None:
        step = tokenizer.encode(text + DELIM)
        ids.extend(step)
        delimiters.append(len(ids) - 1)
        step_end.extend([len(ids) - 1] * len(step))

    step_end[think_pos] = -2  # patched below to the end of the first step
    noise: list[int] = []
    values = problem.running_values()
    previous = problem.operands[0]
    for op, value, result in zip(problem.ops, problem.operands[1:], values, strict=True):
        if rng is not None and p_wrong > 0 and rng.random() < p_wrong:
            wrong = result + rng.choice((-10, -1, 1, 10))
            if wrong < 0 or wrong == result:
                wrong = result + 1
            add_step(f"{previous}{op}{value}={wrong}.")
            digits = len(str(wrong))  # the step ends "<digits>." + delimiter
            noise.extend(range(len(ids) - 2 - digits, len(ids) - 2))
            add_step(f"Wait, {previous}{op}{value}={result}.")
        else:
            add_step(f"{previous}{op}{value}={result}.")
        previous = result
    lstar_pos = delimiters[-1]
    previous = problem.operands[0]
    for op, value, result in zip(problem.ops, problem.operands[1:], values, strict=True):
        if skip_checks:
            break
        inverse = "-" if op == "+" else "+"
        add_step(f"Check: {result}{inverse}{value}={previous}.")
        previous = result
    step_end[think_pos] = delimiters[0]
    end_think_pos = len(ids)
    ids.extend(tokenizer.encode(f"{END_THINK}Answer: {problem.answer}{EOS}"))
    step_end.extend([-1] * (len(ids) - len(step_end)))
    return Trace(problem, ids, prompt_len, think_pos, end_think_pos, lstar_pos, delimiters, step_end, noise)


def parse_answer(text: str) -> int | None:
    """The integer after the last ``Answer:`` in a generated text, or None."""
    _, found, tail = text.rpartition("Answer:")
    digits = ""
    for char in tail.strip():
        if not char.isdigit():
            break
        digits += char
    return int(digits) if found and digits else None


def last_computed_value(thinking: str) -> int | None:
    """The result of the last computation step (not a ``Check:``) written so far, or None."""
    for step in reversed(thinking.split(DELIM)):
        step = step.strip()
        if not step or step.startswith("Check:") or "=" not in step:
            continue
        value = step.rpartition("=")[2].rstrip(".")
        return int(value) if value.isdigit() else None
    return None


def median_trace_length(n: int = 200, seed: int = 0) -> int:
    """Median number of completion tokens of clean traces (used to scale the ``remain`` threshold)."""
    tokenizer = TraceTokenizer()
    lengths = [len(t.ids) - t.prompt_len for t in (build_trace(p, tokenizer) for p in sample_problems(n, seed))]
    return int(math.floor(float(np.median(lengths))))
