"""KV-cached decoding: target-only greedy/sampling, and speculative decoding with a pluggable exit policy.

Speculative decoding (EAGLE chain, depth ``k``, batch 1). Per round:

1. the draft proposes ``d_1..d_k`` (top-1, or sampled from its distribution ``q`` when sampling);
2. the target scores ``[pending, d_1..d_k]`` in **one** forward pass (``pending`` is the last emitted token,
   not yet in the target's cache), giving ``p_0..p_k``;
3. the acceptance rule (:func:`~zoo.specexit.acceptance.verify_greedy`, or
   :func:`~zoo.specexit.acceptance.verify_sampling`, the exact rejection-sampling rule that leaves the target
   distribution unchanged) accepts ``d_1..d_m`` and emits one more token;
4. the **exit policy** (:mod:`zoo.specexit.exits`) looks at the newly accepted tokens ``[pending, d_1..d_m]``
   while thinking; if it fires at a step delimiter, the tokens after that delimiter are dropped and the emitted
   token is replaced by ``</think>`` (SpecExit's rule, as in the paper's ``eagle_generate``);
5. the draft reads the target features of the kept tokens (one draft pass), which also yields SpecExit's
   signals; the policy's predictors are updated **after** the check, so each decision uses the signals of
   earlier rounds, as in the paper.

With the exit disabled and greedy acceptance the output equals target greedy decoding token for token. Every
decoder gives each token its coupled position id (:mod:`zoo.specexit.positions`), computed from the token and the
ones before it: drafted tokens get theirs before verification, and a rolled-back or cut token takes its id with it.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import torch
from torch import nn

from zoo.specexit.acceptance import verify_greedy, verify_sampling
from zoo.specexit.exits import NoExit
from zoo.specexit.models import EagleDraft, KVCache, chunk_mask, signal_values, target_forward
from zoo.specexit.positions import State, coupler, extend
from zoo.specexit.tokenizer import TraceTokenizer


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
            if thinking and (cut := policy.halt(self._sequence[prompt_len:])) is not None:
                self._truncate(prompt_len + cut + 1)  # a stop pattern matched: keep through its last token
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
