"""KV-cached decoding: target-only greedy/sampling, and speculative decoding with pluggable exit policies.

Speculative decoding (EAGLE chain, depth ``k``, batch 1). Per round:

1. the draft proposes ``d_1..d_k`` (top-1, or sampled from its distribution ``q`` when sampling);
2. the target scores ``[pending, d_1..d_k]`` in **one** forward pass (``pending`` is the last emitted token,
   not yet in the target's cache), giving ``p_0..p_k``;
3. the acceptance rule (:func:`verify_greedy`, or :func:`verify_sampling`, the exact rejection-sampling rule
   that leaves the target distribution unchanged) accepts ``d_1..d_m`` and emits one more token;
4. the **exit policy** looks at the newly accepted tokens ``[pending, d_1..d_m]`` while thinking; if it fires
   at a step delimiter, the tokens after that delimiter are dropped and the emitted token is replaced by
   ``</think>`` (SpecExit's rule, as in the paper's ``eagle_generate``);
5. the draft reads the target features of the kept tokens (one draft pass), which also yields SpecExit's
   signals; the policy's predictors are updated **after** the check, so each decision uses the signals of
   earlier rounds, as in the paper.

With the exit disabled and greedy acceptance the output equals target greedy decoding token for token. Every
decoder gives each token its coupled position id (:mod:`zoo.specexit.positions`), computed from the token and the
ones before it: drafted tokens get theirs before verification, and a rolled-back or cut token takes its id with it.

Exit policies: :class:`NoExit`, :class:`SignalExit` (SpecExit: EWMA-smoothed draft signals and thresholds),
:class:`ProbeExit` (the probing baseline: an extra target pass on ``</think>Answer:`` at each delimiter and a
linear probe on the hidden state, i.e. the overhead SpecExit avoids), :class:`OracleExit` (exit at the
earliest boundary after which the answer to keep is determined: the upper bound on savings), the label-free
reference :class:`FirstCheckStop` (stop at the first ``Check:``), and the recorders :class:`SignalRecorder` and
:class:`ProbeRecorder` that never exit and log what the exit rules see (validation calibration).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import torch
from torch import nn

from zoo.specexit.models import EagleDraft, KVCache, chunk_mask, signal_values, target_forward
from zoo.specexit.positions import State, coupler, extend
from zoo.specexit.tokenizer import TraceTokenizer
from zoo.specexit.traces import readout


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


@dataclass
class GenerationResult:
    """One generated completion and its cost.

    Args:
        tokens: Emitted token ids (completion only, up to and including ``<eos>``).
        target_forwards: Target passes (prefill, verification and probe passes).
        draft_forwards: Draft passes.
        accept_lengths: Draft tokens accepted per verification round.
        exit_at: Index in ``tokens`` of the delimiter where an early exit fired (None: no early exit).
        wall_time_s: Wall time of the whole call.
        text: The decoded completion (filled by :meth:`SpecExitModule.generate`).
    """

    tokens: list[int]
    target_forwards: int = 0
    draft_forwards: int = 0
    accept_lengths: list[int] = field(default_factory=list)
    exit_at: int | None = None
    wall_time_s: float = 0.0
    text: str = ""


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


# --------------------------------------------------------------------------------------------- acceptance


def verify_greedy(draft_tokens: torch.Tensor, target_logits: torch.Tensor) -> tuple[int, int]:
    """Greedy acceptance: keep the longest prefix of the draft that matches the target's argmax.

    Args:
        draft_tokens: (k,) proposed tokens.
        target_logits: (k+1, vocab) target logits after the pending token and after each draft token.

    Returns:
        ``(m, token)``: the number of accepted draft tokens and the target's next token after them.
    """
    best = target_logits.argmax(-1)
    matches = (best[:-1] == draft_tokens).long()
    m = int(matches.cumprod(0).sum())
    return m, int(best[m])


def verify_sampling(
    draft_tokens: torch.Tensor, draft_probs: torch.Tensor, target_probs: torch.Tensor, generator: torch.Generator | None
) -> tuple[int, int]:
    """Speculative-sampling acceptance (Leviathan et al.; Chen et al.): the output is distributed as the target.

    Draft token ``d_j`` is kept with probability ``min(1, p_j(d_j) / q_j(d_j))``; at the first rejection the
    emitted token is drawn from ``norm(max(0, p_j - q_j))``; if all are kept, from ``p_k``.

    Args:
        draft_tokens: (k,) tokens sampled from ``draft_probs``.
        draft_probs: (k, vocab) draft distributions ``q_1..q_k``.
        target_probs: (k+1, vocab) target distributions ``p_0..p_k`` at the same positions (and one more).
        generator: Source of randomness.

    Returns:
        ``(m, token)``: the number of accepted draft tokens and the emitted token.
    """
    k = draft_tokens.shape[0]
    index = torch.arange(k)
    p = target_probs[index, draft_tokens]
    q = draft_probs[index, draft_tokens]
    u = torch.rand(k, generator=generator, dtype=p.dtype)
    accepted = (u * q <= p).long()  # u < p/q without dividing by a zero q
    m = int(accepted.cumprod(0).sum())
    if m == k:
        dist = target_probs[k]
    else:
        residual = (target_probs[m] - draft_probs[m]).clamp_min(0.0)
        total = residual.sum()
        dist = residual / total if total > 0 else target_probs[m]
    return m, int(torch.multinomial(dist, 1, generator=generator))


# ------------------------------------------------------------------------------------------- exit policies


class NoExit:
    """Never exits early (plain speculative decoding).

    Attributes:
        stop_tokens: Token ids that end the generation like ``<eos>`` (none here; see :class:`FirstCheckStop`).
    """

    name = "none"
    stop_tokens: tuple[int, ...] = ()

    def reset(self, engine: SpeculativeDecoder, prompt: list[int]) -> None:
        pass

    def decide(self, engine: SpeculativeDecoder, new_tokens: list[int], delimiter: int) -> bool:
        return False

    def observe(self, signals: torch.Tensor | None) -> None:
        pass


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
    do not correct themselves after a bare answer line).

    Args:
        tokenizer: To read the thinking text.
        answer: The answer to keep.
    """

    name = "oracle_exit"

    def __init__(self, tokenizer: TraceTokenizer, answer: int) -> None:
        self.tokenizer, self.answer = tokenizer, answer

    def decide(self, engine, new_tokens, delimiter) -> bool:
        text = self.tokenizer.decode(engine.emitted_through(delimiter))
        return readout(text.rpartition("<think>")[2]) == self.answer


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


# ------------------------------------------------------------------------------------------------ decoders


def _choose(logits: torch.Tensor, temperature: float, generator: torch.Generator | None) -> int:
    if temperature <= 0:
        return int(logits.argmax(-1))
    return int(torch.multinomial(torch.softmax(logits / temperature, -1), 1, generator=generator))


@torch.inference_mode()
def target_generate(
    target: nn.Module,
    prompt: list[int],
    taps: tuple[int, ...],
    tokenizer: TraceTokenizer,
    max_new_tokens: int = 200,
    temperature: float = 0.0,
    generator: torch.Generator | None = None,
) -> GenerationResult:
    """Target-only decoding with a KV cache, one token per forward pass.

    Args:
        target: The target LM.
        prompt: Prompt token ids.
        taps: Tapped layers (unused outputs; kept so both decoders run the same forward).
        tokenizer: The trace tokenizer (the stop token ``<eos>`` and the coupled position ids).
        max_new_tokens: Budget of emitted tokens.
        temperature: 0 for greedy, else sampling temperature.
        generator: Randomness for sampling.
    """
    started = time.perf_counter()
    cache = KVCache(len(target.model.layers), len(prompt) + max_new_tokens + 1)
    positions, states = extend(tokenizer, State(), prompt)
    state = states[-1]
    keys = torch.tensor(positions)
    out = target_forward(target, torch.tensor([prompt]), taps, cache, positions=keys, key_positions=keys)
    forwards, tokens, step = 1, [], coupler(tokenizer).step
    while True:
        token = _choose(out.logits[0, -1], temperature, generator)
        tokens.append(token)
        if token == tokenizer.eos_id or len(tokens) >= max_new_tokens:
            break
        position, state = step(state, token)
        positions.append(position)
        out = target_forward(
            target,
            torch.tensor([[token]]),
            taps,
            cache,
            torch.tensor([position]),
            key_positions=torch.tensor(positions),
        )
        forwards += 1
    return GenerationResult(tokens, target_forwards=forwards, wall_time_s=time.perf_counter() - started)


class SpeculativeDecoder:
    """EAGLE-style chain speculative decoding with an exit policy (see the module docstring).

    Args:
        target: The target LM.
        draft: The draft head.
        tokenizer: The trace tokenizer (special token ids).
        k: Draft tokens per round.
        max_new_tokens: Budget of emitted tokens.
        temperature: 0 for greedy acceptance (lossless w.r.t. target greedy), else the sampling rule.
    """

    def __init__(
        self,
        target: nn.Module,
        draft: EagleDraft,
        tokenizer: TraceTokenizer,
        k: int = 4,
        max_new_tokens: int = 200,
        temperature: float = 0.0,
    ) -> None:
        if k < 1:
            raise ValueError(f"speculative decoding needs k >= 1 draft tokens per round, got {k}")
        self.target, self.draft, self.tokenizer = target, draft, tokenizer
        self.k, self.max_new_tokens, self.temperature = k, max_new_tokens, temperature
        self.taps = draft.taps
        self.embed = target.model.embed_tokens
        self.lm_head = target.lm_head

    # State of one generation, kept on the instance so that exit policies can query it.
    def emitted_through(self, position: int) -> list[int]:
        """All tokens (prompt + completion) up to absolute position ``position`` inclusive."""
        return self._sequence[: position + 1]

    @torch.inference_mode()
    def probe_probability(self, probe: nn.Module, suffix: list[int], delimiter: int) -> float:
        """Extra target pass on ``suffix`` placed right after absolute position ``delimiter`` (then rolled back)."""
        cache = self._target_cache
        length = cache.get_seq_length()
        q = len(suffix)
        suffix_positions = extend(self.tokenizer, self._states[delimiter], suffix)[0]
        visible = self._positions[: delimiter + 1]
        keys = torch.tensor(visible + [0] * (length - len(visible)) + suffix_positions)  # the hidden keys: any id
        mask = chunk_mask(length, q, visible=delimiter + 1)
        out = target_forward(
            self.target, torch.tensor([suffix]), self.taps, cache, torch.tensor(suffix_positions), mask, keys
        )
        cache.crop(length)
        self._result.target_forwards += 1
        return float(torch.sigmoid(probe(out.hidden[0, -1])).squeeze())

    def signals_at(self, position: int) -> torch.Tensor:
        """SpecExit's signals (confidence, progress, remain) of a token accepted in the current round.

        Read from the target features of the verification pass (``fc``'s signal rows only; no extra pass).
        """
        feature = self._round_features[:, position - self._round_start]
        return signal_values(self.draft.fuse(feature)[1][0].float())

    def _append(self, tokens: list[int], positions: list[int] | None = None, states: list[State] | None = None) -> None:
        """Emit ``tokens``: extend the sequence, its coupled position ids and the parser state after each token
        (:mod:`zoo.specexit.positions`; computed from the last state unless the caller already has them)."""
        if positions is None:
            positions, states = extend(self.tokenizer, self._states[-1], tokens)
        self._sequence.extend(tokens)
        self._positions.extend(positions)
        self._states.extend(states)

    def _truncate(self, length: int) -> None:
        """Keep the first ``length`` emitted tokens (prompt included)."""
        del self._sequence[length:], self._positions[length:], self._states[length:]

    def _draft_real(self, features: torch.Tensor, next_tokens: list[int], start: int, prompt_len: int):
        """Draft pass over real target features at ``start..``; returns last hidden and signals.

        Draft position ``i`` reads the embedding of token ``i+1`` and carries that token's coupled position id.
        """
        fused, signal_logits = self.draft.fuse(features)
        keys = torch.tensor(self._positions[1 : start + 1 + features.shape[1]])
        positions = keys[start:]
        embeds = self.embed(torch.tensor([next_tokens]))
        hidden = self.draft(fused, embeds, positions, self._draft_cache, key_positions=keys)
        self._result.draft_forwards += 1
        signals = None
        if self.draft.n_signals:
            # Signals are averaged over the positions read in this pass that lie in the thinking block.
            first = max(prompt_len - 1 - start, 0)
            signals = signal_values(signal_logits[0, first:].float()).mean(0)
        return hidden[:, -1:], signals

    def _propose(self, hidden: torch.Tensor, start: int, generator):
        """Chain ``k`` draft tokens from the draft hidden state at position ``start - 1``."""
        tokens, probs = [], []
        state, step = self._states[-1], coupler(self.tokenizer).step
        keys = self._positions[1 : start + 1]  # ids of the draft cache's keys (draft position i: token i+1)
        for j in range(self.k):
            logits = self.draft.logits(hidden, self.lm_head)[0, -1]
            if self.temperature > 0:
                q = torch.softmax(logits / self.temperature, -1)
                token = int(torch.multinomial(q, 1, generator=generator))
                probs.append(q)
            else:
                token = int(logits.argmax(-1))
            tokens.append(token)
            if j + 1 < self.k:  # the draft's own output stands in for the next target feature
                position, state = step(state, token)
                keys.append(position)
                hidden = self.draft(
                    hidden,
                    self.embed(torch.tensor([[token]])),
                    torch.tensor([position]),
                    self._draft_cache,
                    key_positions=torch.tensor(keys),
                )
                self._result.draft_forwards += 1
        return tokens, (torch.stack(probs) if probs else None)

    @torch.inference_mode()
    def generate(
        self, prompt: list[int], policy: NoExit | None = None, generator: torch.Generator | None = None
    ) -> GenerationResult:
        """Generate a completion of ``prompt`` (which ends with ``<think>``).

        Args:
            prompt: Prompt token ids.
            policy: Exit policy (default: none, i.e. plain speculative decoding).
            generator: Randomness for sampling.
        """
        started = time.perf_counter()
        policy = policy or NoExit()
        tok = self.tokenizer
        budget = len(prompt) + self.max_new_tokens + self.k + 2
        self._target_cache = KVCache(len(self.target.model.layers), budget)
        self._draft_cache = KVCache(1, budget)
        self._result = result = GenerationResult([])
        self._sequence, self._positions, self._states = [], [], []
        self._append(list(prompt), *extend(tok, State(), prompt))
        policy.reset(self, prompt)
        prompt_len = len(prompt)
        stop = {tok.eos_id, *policy.stop_tokens}

        positions = torch.tensor(self._positions)
        out = target_forward(
            self.target, torch.tensor([prompt]), self.taps, self._target_cache, positions, key_positions=positions
        )
        result.target_forwards += 1
        pending = _choose(out.logits[0, -1], self.temperature, generator)
        self._append([pending])
        thinking = pending != tok.end_think_id
        hidden, signals = self._draft_real(out.features, self._sequence[1:], 0, prompt_len)
        if thinking:
            policy.observe(signals)

        while pending not in stop and len(self._sequence) - prompt_len < self.max_new_tokens:
            committed = self._target_cache.get_seq_length()  # == position of `pending`
            drafted, draft_probs = self._propose(hidden, committed, generator)
            self._draft_cache.crop(committed)
            drafted_positions, drafted_states = extend(tok, self._states[-1], drafted)
            keys = torch.tensor([*self._positions[: committed + 1], *drafted_positions])
            out = target_forward(
                self.target,
                torch.tensor([[pending, *drafted]]),
                self.taps,
                self._target_cache,
                keys[committed:],
                key_positions=keys,
            )
            result.target_forwards += 1
            if self.temperature > 0:
                target_probs = torch.softmax(out.logits[0] / self.temperature, -1)
                m, token = verify_sampling(torch.tensor(drafted), draft_probs, target_probs, generator)
            else:
                m, token = verify_greedy(torch.tensor(drafted), out.logits[0])
            result.accept_lengths.append(m)
            new_tokens = [pending, *drafted[:m]]
            self._append(drafted[:m], drafted_positions[:m], drafted_states[:m])
            if stop.intersection(drafted[:m]):
                break

            if thinking and tok.end_think_id in new_tokens:
                thinking = False
            self._round_features, self._round_start = out.features, committed
            if thinking:
                split = next((i for i, t in enumerate(new_tokens) if t == tok.delim_id), None)
                if split is not None and policy.decide(self, new_tokens, committed + split):
                    self._truncate(committed + split + 1)
                    new_tokens = new_tokens[: split + 1]
                    token = tok.end_think_id
                    result.exit_at = committed + split - prompt_len
            self._target_cache.crop(committed + len(new_tokens))
            features = out.features[:, : len(new_tokens)]
            pending = token
            self._append([pending])
            hidden, signals = self._draft_real(features, self._sequence[committed + 1 :], committed, prompt_len)
            if thinking:
                policy.observe(signals)  # after the check: the next decision uses this round's signals
                thinking = pending != tok.end_think_id

        tokens = self._sequence[prompt_len:]
        end = next((i for i, t in enumerate(tokens) if t in stop), None)
        if end is not None:
            tokens = tokens[: end + 1]
        result.tokens = tokens[: self.max_new_tokens]
        result.wall_time_s = time.perf_counter() - started
        return result
