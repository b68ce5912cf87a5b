"""Exit policies of speculative decoding: whether to stop thinking at a step delimiter, and their thresholds.

:class:`~zoo.specexit.decoding.SpeculativeDecoder` asks its policy (``decide``) at the first step delimiter among
the tokens it has just accepted while thinking; if the policy fires, the tokens after that delimiter are dropped and
``</think>`` is emitted. After the check the decoder passes the round's draft signals to ``observe``, so each
decision uses the signals of earlier rounds, as in the paper (see :mod:`zoo.specexit.decoding` for the loop).

Exit policies: :class:`NoExit`, :class:`SignalExit` (SpecExit: EWMA-smoothed draft signals and thresholds),
:class:`ProbeExit` (the probing baseline: an extra target pass on ``</think>Answer:`` at each delimiter and a
linear probe on the hidden state, i.e. the overhead SpecExit avoids), :class:`OracleExit` (exit at the
earliest boundary after which the answer to keep is determined: the upper bound on savings), the label-free
reference :class:`FirstCheckStop` (stop at the first ``Check:``), and the recorders :class:`SignalRecorder` and
:class:`ProbeRecorder` that never exit and log what the exit rules see (validation calibration). Their thresholds
and smoothing are an :class:`ExitConfig`; the smoothing is an :class:`EWMA`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import torch
from torch import nn

from zoo.specexit.tokenizer import TraceTokenizer
from zoo.specexit.traces import readout, stated_value, steps_done


class DecodingEngine(Protocol):
    """What an exit rule reads of the decoder that asks it (:class:`~zoo.specexit.decoding.SpeculativeDecoder`)."""

    def signals_at(self, position: int) -> torch.Tensor: ...

    def probe_probability(self, probe: nn.Module, suffix: list[int], delimiter: int) -> float: ...

    def emitted_through(self, position: int) -> list[int]: ...


@dataclass
class ExitConfig:
    """Thresholds and smoothing of the exit rules (stored in the checkpoint's config.json).

    Args:
        alpha: EWMA weight of the newest signal (paper: 0.1).
        confidence: Exit needs smoothed confidence above this (paper: 0.8; calibrated on validation problems by
            ``zoo eval specexit``, since with alpha 0.1 over ~10-20 rounds of thinking the EWMA cannot reach 0.8).
        progress: Exit needs smoothed progress above this (paper: 0.3).
        remain: Exit needs smoothed predicted remaining tokens below this (paper: 200 tokens; scaled to about
            0.2 x the median trace length here).
        probe_threshold: The probing baseline exits when its probe's probability exceeds this.
        read_delimiter: Decide on the EWMA extended by the delimiter's own signal (read from the verification
            pass that just accepted it) instead of the earlier rounds' EWMA alone (the paper's order). See
            :class:`SignalExit`.
    """

    alpha: float = 0.1
    confidence: float = 0.8
    progress: float = 0.3
    remain: float = 14.0
    probe_threshold: float = 0.9
    read_delimiter: bool = True


class EWMA:
    """Exponentially weighted moving average, initialised with the first score (the paper's EWMAScorePredictor).

    Args:
        alpha: Weight of the newest score, in (0, 1].
    """

    def __init__(self, alpha: float) -> None:
        if not 0.0 < alpha <= 1.0:
            raise ValueError(f"EWMA alpha must lie in (0, 1], got {alpha}")
        self.alpha = alpha
        self.value: float | None = None

    def peek(self, score: float) -> float:
        """The value :meth:`update` would return for ``score``, without changing the state."""
        return score if self.value is None else self.alpha * score + (1.0 - self.alpha) * self.value

    def update(self, score: float) -> float:
        self.value = self.peek(score)
        return self.value


class NoExit:
    """Never exits early (plain speculative decoding).

    Attributes:
        stop_tokens: Token ids that end the generation like ``<eos>`` (none here; see :class:`FirstCheckStop`).
    """

    name = "none"
    stop_tokens: tuple[int, ...] = ()

    def reset(self, engine: DecodingEngine, prompt: list[int]) -> None:
        pass

    def decide(self, engine: DecodingEngine, new_tokens: list[int], delimiter: int) -> bool:
        return False

    def observe(self, signals: torch.Tensor | None) -> None:
        pass

    def halt(self, completion: list[int]) -> int | None:
        """After each verification round while thinking: the index in ``completion`` (the tokens after the prompt)
        of the last token to keep when decoding is to end there (a stop pattern matched), else None."""
        return None


class SignalExit(NoExit):
    """SpecExit: exit at a delimiter when the EWMA of the draft's signals passes all three thresholds.

    The EWMA is updated with each round's mean signal after the check, as in the paper. With
    ``cfg.read_delimiter`` (our default) the decision at a delimiter also folds in the signal of the delimiter
    itself, whose target feature the verification pass has just computed (one 3-row slice of ``fc``, no extra
    pass): at this scale a reasoning step spans about two verification rounds and the signals inside a step
    only become reliable at its closing delimiter, so the paper's order fires one step late (see the module
    docstring of :mod:`zoo.specexit.module`).

    Args:
        cfg: Thresholds and EWMA weight.
    """

    name = "specexit"

    def __init__(self, cfg: ExitConfig) -> None:
        self.cfg = cfg
        self.reset(None, [])

    def reset(self, engine, prompt) -> None:
        self.confidence, self.progress, self.remain = EWMA(self.cfg.alpha), EWMA(self.cfg.alpha), EWMA(self.cfg.alpha)

    def ready(self, fresh: list[float] | None = None) -> bool:
        """Whether the smoothed signals satisfy the exit thresholds.

        Args:
            fresh: Signals (confidence, progress, remain) to fold into the EWMA for this decision only;
                None: decide on the earlier rounds' values.
        """
        ewmas = (self.confidence, self.progress, self.remain)
        if fresh is None:
            c, p, r = (e.value for e in ewmas)
        else:
            c, p, r = (e.peek(score) for e, score in zip(ewmas, fresh, strict=True))
        if c is None or p is None or r is None:
            return False
        return c > self.cfg.confidence and p > self.cfg.progress and r < self.cfg.remain

    def decide(self, engine, new_tokens, delimiter) -> bool:
        fresh = engine.signals_at(delimiter).tolist() if self.cfg.read_delimiter else None
        return self.ready(fresh)

    def observe(self, signals) -> None:
        if signals is None:
            return
        c, p, r = signals.tolist()
        self.confidence.update(c)
        self.progress.update(p)
        self.remain.update(r)


class ProbeExit(NoExit):
    """Probing baseline: at each delimiter, one extra target pass on ``</think>Answer:`` and a linear probe.

    Args:
        probe: Linear layer (H -> 1) on the target's final hidden state at ``Answer:``.
        threshold: Exit when sigmoid(probe) exceeds this.
        suffix: Token ids appended for the probe pass.
    """

    name = "probe_exit"

    def __init__(self, probe: nn.Module, threshold: float, suffix: list[int]) -> None:
        self.probe, self.threshold, self.suffix = probe, threshold, suffix

    def decide(self, engine, new_tokens, delimiter) -> bool:
        return engine.probe_probability(self.probe, self.suffix, delimiter) > self.threshold


class OracleExit(NoExit):
    """Exit at the first delimiter whose :func:`~zoo.specexit.traces.readout` is ``answer`` (the ceiling on savings).

    Given the answer the full trace gives (``reference_oracle_exit`` passes target greedy's), this is the trace's
    :func:`~zoo.specexit.traces.exit_label`, the earliest point after which its answer is determined (greedy traces
    do not correct themselves after a bare answer line). In the ``unmarked`` grammar (no bare line) it exits at the
    delimiter closing the last step line (as many step lines as the prompt has operators) if that line states
    ``answer``.

    Args:
        tokenizer: To read the thinking text.
        answer: The answer to keep.
    """

    name = "oracle_exit"

    def __init__(self, tokenizer: TraceTokenizer, answer: int) -> None:
        self.tokenizer, self.answer = tokenizer, answer

    def decide(self, engine, new_tokens, delimiter) -> bool:
        prompt, _, thinking = self.tokenizer.decode(engine.emitted_through(delimiter)).rpartition("<think>")
        if self.tokenizer.grammar == "unmarked":
            # No bare line: the exit label is the delimiter closing the last step line (one per prompt operator).
            ops = prompt.count("+") + prompt.count("-")
            return steps_done(thinking) >= ops and stated_value(thinking) == self.answer
        return readout(thinking) == self.answer


class FirstCheckStop(NoExit):
    """Label-free reference: stop decoding at the first ``Check:`` token (the answer is read from the text before it).

    It uses nothing of SpecExit (no signal, no probe, no label): only the trace format, in which the redundant
    checks start right after the last computation line.

    Args:
        tokenizer: To find the ``Check:`` token id.
    """

    name = "first_check"

    def __init__(self, tokenizer: TraceTokenizer) -> None:
        self.stop_tokens = (tokenizer.ids["Check:"],)


class SignalRecorder(SignalExit):
    """Never exits; records at every decision the smoothed signals :class:`SignalExit` would compare.

    Up to its exit, a run of :class:`SignalExit` is the run of plain speculative decoding, so one recorded run gives,
    for every threshold, the delimiter where SpecExit would exit (the validation calibration uses this).

    Attributes:
        records: ``(delimiter position, confidence, progress, remain)`` per decision, in order.
    """

    def reset(self, engine, prompt) -> None:
        super().reset(engine, prompt)
        self.records: list[tuple[int, float, float, float]] = []

    def decide(self, engine, new_tokens, delimiter) -> bool:
        fresh = engine.signals_at(delimiter).tolist() if self.cfg.read_delimiter else None
        ewmas = (self.confidence, self.progress, self.remain)
        if fresh is None:
            values = [e.value for e in ewmas]
        else:
            values = [e.peek(score) for e, score in zip(ewmas, fresh, strict=True)]
        if None not in values:
            self.records.append((delimiter, *values))
        return False


class ProbeRecorder(ProbeExit):
    """Never exits; records the probe's probability at every decision (see :class:`SignalRecorder`).

    Attributes:
        records: ``(delimiter position, probability)`` per decision, in order.
    """

    def reset(self, engine, prompt) -> None:
        self.records: list[tuple[int, float]] = []

    def decide(self, engine, new_tokens, delimiter) -> bool:
        self.records.append((delimiter, engine.probe_probability(self.probe, self.suffix, delimiter)))
        return False
