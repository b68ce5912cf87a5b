"""Decoding: KV cache vs full recomputation, losslessness, and where the exit rule may fire."""

from __future__ import annotations

import pytest
import torch

import zoo.specexit.decoding as decoding
from zoo.specexit.decoding import SpeculativeDecoder, target_generate
from zoo.specexit.exits import ExitConfig, FirstCheckStop, NoExit, OracleExit, SignalExit
from zoo.specexit.models import (
    DraftConfig,
    EagleDraft,
    KVCache,
    TargetConfig,
    TargetOutput,
    build_target,
    chunk_mask,
    coupled_mask,
    target_forward,
)
from zoo.specexit.positions import position_ids
from zoo.specexit.tokenizer import TraceTokenizer
from zoo.specexit.traces import Problem, build_trace, exit_label, last_computed_value, parse_answer

TOK = TraceTokenizer()
SMALL = TargetConfig(hidden_size=32, num_layers=2, num_heads=2, intermediate_size=64, max_positions=128)
TAPS = (1, 2)


@pytest.fixture(autouse=True)
def one_thread():
    """Batch-1 decoding of these tiny models: a second intra-op thread only adds spin-wait overhead."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(scope="module")
def models():
    torch.manual_seed(0)
    target = build_target(len(TOK), SMALL).eval()
    with torch.no_grad():  # larger logits: clear argmax margins, as in a trained model
        target.model.embed_tokens.weight.mul_(8.0)
    draft = EagleDraft(
        len(TOK), SMALL.hidden_size, DraftConfig(taps=TAPS, num_heads=2, intermediate_size=64), 128
    ).eval()
    return target, draft


@torch.no_grad()
def test_target_kv_cache_equals_full_recomputation(models):
    target, _ = models
    ids = torch.randint(0, len(TOK), (1, 30), generator=torch.Generator().manual_seed(1))
    full = target_forward(target, ids, TAPS)
    hf = target(ids).logits  # transformers' own forward: our layer loop is the same network
    torch.testing.assert_close(full.logits, hf, atol=1e-5, rtol=1e-5)
    cache, outs, start = KVCache(SMALL.num_layers, 64), [], 0
    for size in (10, 1, 4, 1, 7, 7):
        outs.append(target_forward(target, ids[:, start : start + size], TAPS, cache))
        start += size
    torch.testing.assert_close(torch.cat([o.logits for o in outs], 1), full.logits, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(torch.cat([o.features for o in outs], 1), full.features, atol=1e-5, rtol=1e-5)
    # Rolling back and re-feeding gives the same logits (rejected draft tokens leave no trace).
    cache.crop(20)
    again = target_forward(target, ids[:, 20:30], TAPS, cache)
    torch.testing.assert_close(again.logits, full.logits[:, 20:30], atol=1e-5, rtol=1e-5)


@torch.no_grad()
def test_probe_branch_mask_equals_fresh_forward(models):
    target, _ = models
    ids = torch.randint(0, len(TOK), (1, 24), generator=torch.Generator().manual_seed(2))
    suffix = torch.tensor([[TOK.end_think_id, TOK.ids["Answer:"]]])
    cache = KVCache(SMALL.num_layers, 64)
    target_forward(target, ids, TAPS, cache)
    branch = 15  # the probe branches off after position 15, while the cache already holds 24 positions
    mask = chunk_mask(24, 2, visible=branch + 1)
    out = target_forward(target, suffix, TAPS, cache, positions=torch.arange(branch + 1, branch + 3), mask=mask)
    fresh = target_forward(target, torch.cat((ids[:, : branch + 1], suffix), 1), TAPS)
    torch.testing.assert_close(out.logits, fresh.logits[:, -2:], atol=1e-5, rtol=1e-5)


@torch.no_grad()
def test_draft_kv_cache_equals_full_recomputation(models):
    _, draft = models
    generator = torch.Generator().manual_seed(3)
    fused, embeds = torch.randn(1, 20, 32, generator=generator), torch.randn(1, 20, 32, generator=generator)
    full = draft(fused, embeds, torch.arange(20))
    cache, outs = KVCache(1, 64), []
    for start, stop in ((0, 12), (12, 13), (13, 20)):
        outs.append(draft(fused[:, start:stop], embeds[:, start:stop], torch.arange(start, stop), cache))
    torch.testing.assert_close(torch.cat(outs, 1), full, atol=1e-5, rtol=1e-5)


@torch.no_grad()
def test_cached_greedy_generation_equals_recomputation(models):
    """KV-cached decoding with coupled ids and the attention window equals recomputing the whole sequence."""
    target, _ = models
    prompt = TOK.encode(Problem((12, 3, 5, 7, 1, 2, 8, 4, 6, 9), ("+", "-") * 4 + ("+",)).prompt)
    cached = target_generate(target, prompt, TAPS, TOK, max_new_tokens=25).tokens
    sequence = list(prompt)
    for _ in range(25):
        positions = torch.tensor(position_ids(TOK, sequence))
        logits = target_forward(target, torch.tensor([sequence]), TAPS, positions=positions, key_positions=positions)
        sequence.append(int(logits.logits[0, -1].argmax()))
    assert cached == sequence[len(prompt) :]
    # the coupled ids and the window matter: plain 0..T-1 ids, or no window, give another network
    positions = torch.tensor(position_ids(TOK, sequence))
    coupled = target_forward(target, torch.tensor([sequence]), TAPS, positions=positions, key_positions=positions)
    assert not torch.allclose(target_forward(target, torch.tensor([sequence]), TAPS).logits, coupled.logits)
    unwindowed = target_forward(target, torch.tensor([sequence]), TAPS, positions=positions)
    assert not torch.allclose(unwindowed.logits, coupled.logits)


def test_coupled_mask_is_causal_and_windowed():
    positions = torch.tensor([0, 65, 10, 55])
    mask = coupled_mask(None, 0, positions, positions)[0, 0]
    expected = torch.tensor(
        [[1, 0, 0, 0], [0, 1, 0, 0], [1, 0, 1, 0], [0, 1, 1, 1]], dtype=torch.bool
    )  # 0-65, 10-65 and 0-55 are more than WINDOW = 48 ids apart
    assert torch.equal(mask, expected)


@torch.no_grad()
def test_speculative_greedy_is_lossless_on_random_models(models):
    target, draft = models
    for k, expression in ((1, (12, 34, 5)), (3, (7, 8, 9, 10)), (5, (12, 34, 5)), (4, (9, 8, 7, 6, 5, 4, 3, 2, 1, 2))):
        decoder = SpeculativeDecoder(target, draft, TOK, k=k, max_new_tokens=40)
        prompt = TOK.encode(Problem(expression, ("+",) * (len(expression) - 1)).prompt)
        reference = target_generate(target, prompt, TAPS, TOK, max_new_tokens=40)
        result = decoder.generate(prompt)
        assert result.tokens == reference.tokens
        assert result.target_forwards <= reference.target_forwards


class ScriptedTarget:
    """Patches ``target_forward`` so the "target" follows a trace: a controlled stand-in for a trained LM.

    Before ``</think>`` it predicts the next token of the trace; after ``</think>`` it writes
    ``Answer: <last computed value>\\n\\n<eos>`` (with a delimiter after thinking, which must never trigger an exit).
    """

    def __init__(self, trace_ids: list[int]) -> None:
        self.trace = trace_ids
        self.sequence: dict[int, int] = {}

    def next_token(self, prefix: list[int]) -> int:
        if prefix == self.trace[: len(prefix)] and len(prefix) < len(self.trace):
            return self.trace[len(prefix)]
        if TOK.end_think_id in prefix:
            from zoo.specexit.traces import last_computed_value

            thinking = TOK.decode(prefix[: prefix.index(TOK.end_think_id)]).rpartition("<think>")[2]
            value = last_computed_value(thinking)
            if value is None:  # a rejected draft path: anything goes
                return TOK.eos_id
            post = TOK.encode(f"Answer: {value}\n\n") + [TOK.eos_id]
            done = len(prefix) - prefix.index(TOK.end_think_id) - 1
            return post[done] if done < len(post) else TOK.eos_id
        return TOK.eos_id

    def __call__(self, target, input_ids, taps, cache=None, positions=None, mask=None, key_positions=None):
        past = cache.get_seq_length()
        q = input_ids.shape[1]
        # sequence indices (not position ids): a probe pass branches off after the cached tokens it may see
        visible = past if mask is None else int(mask[0, 0, 0, :past].sum())
        logits = torch.full((1, q, len(TOK)), -10.0)
        for i, (pos, token) in enumerate(zip(range(visible, visible + q), input_ids[0].tolist(), strict=True)):
            self.sequence[pos] = token
            logits[0, i, self.next_token([self.sequence[j] for j in range(pos + 1)])] = 10.0
        cache.lengths = [past + q] * len(cache.lengths)
        return TargetOutput(
            logits, torch.zeros(1, q, SMALL.hidden_size), torch.randn(1, q, len(taps) * SMALL.hidden_size)
        )


class Recorder(NoExit):
    """Never exits; records where the decoder asked."""

    def __init__(self) -> None:
        self.calls: list[tuple[list[int], int]] = []

    def decide(self, engine, new_tokens, delimiter) -> bool:
        self.calls.append((list(engine.emitted_through(delimiter)), delimiter))
        return False


def _scripted(monkeypatch, models, problem):
    target, draft = models
    trace = build_trace(problem, TOK)
    script = ScriptedTarget(trace.ids)
    monkeypatch.setattr(decoding, "target_forward", script)
    return trace, SpeculativeDecoder(target, draft, TOK, k=3, max_new_tokens=120)


def test_exit_rule_asked_only_at_delimiters_while_thinking(monkeypatch, models):
    problem = Problem((23, 45, 12, 7), ("+", "-", "+"))
    trace, decoder = _scripted(monkeypatch, models, problem)
    recorder = Recorder()
    result = decoder.generate(trace.ids[: trace.prompt_len], recorder)
    assert trace.ids[trace.prompt_len :][: len(result.tokens)] == result.tokens  # no exit: the full trace
    assert result.exit_at is None and parse_answer(TOK.decode(result.tokens)) == 63
    assert recorder.calls, "the decoder never consulted the exit policy"
    for prefix, position in recorder.calls:
        assert prefix[position] == TOK.delim_id  # only at a step delimiter
        assert TOK.end_think_id not in prefix  # only while thinking
    asked = {position for _, position in recorder.calls}
    assert asked <= set(trace.delimiter_pos)


def test_exit_fires_at_first_delimiter_and_forces_end_of_thinking(monkeypatch, models):
    problem = Problem((23, 45, 12, 7), ("+", "-", "+"))
    trace, decoder = _scripted(monkeypatch, models, problem)
    always = SignalExit(ExitConfig(alpha=1.0, confidence=-1.0, progress=-1.0, remain=1e9))
    result = decoder.generate(trace.ids[: trace.prompt_len], always)
    tokens = result.tokens
    text = TOK.decode(tokens)
    assert result.exit_at is not None
    assert tokens[result.exit_at] == TOK.delim_id and tokens[result.exit_at + 1] == TOK.end_think_id
    assert tokens.count(TOK.end_think_id) == 1
    assert text.startswith("+45=68.\n\n</think>")  # cut at the first delimiter of the thinking block
    assert text.endswith("Answer: 68\n\n<eos>")  # the delimiter after </think> did not trigger anything


def test_never_ready_signal_exit_is_lossless(monkeypatch, models):
    problem = Problem((5, 6, 7), ("+", "+"))
    trace, decoder = _scripted(monkeypatch, models, problem)
    never = SignalExit(ExitConfig(confidence=2.0))
    result = decoder.generate(trace.ids[: trace.prompt_len], never)
    assert result.exit_at is None
    assert result.tokens == trace.ids[trace.prompt_len :]


def test_first_check_reference_stops_at_the_first_check_token(monkeypatch, models):
    problem = Problem((23, 45, 12, 7), ("+", "-", "+"))
    trace, decoder = _scripted(monkeypatch, models, problem)
    result = decoder.generate(trace.ids[: trace.prompt_len], FirstCheckStop(TOK))
    text = TOK.decode(result.tokens)
    assert text == "+45=68.\n\n-12=56.\n\n+7=63.\n\n63.\n\nCheck:"
    assert last_computed_value(text) == 63 and result.exit_at is None


def test_oracle_exit_fires_at_the_exit_label(monkeypatch, models):
    problem = Problem((23, 45, 12, 7), ("+", "-", "+"))
    trace, decoder = _scripted(monkeypatch, models, problem)
    result = decoder.generate(trace.ids[: trace.prompt_len], OracleExit(TOK, 63))
    assert result.exit_at == exit_label(trace.ids, TOK) - trace.prompt_len
    assert TOK.decode(result.tokens) == "+45=68.\n\n-12=56.\n\n+7=63.\n\n63.\n\n</think>Answer: 63\n\n<eos>"
    never = decoder.generate(trace.ids[: trace.prompt_len], OracleExit(TOK, 64))  # an answer never stated
    assert never.exit_at is None and never.tokens == trace.ids[trace.prompt_len :]
