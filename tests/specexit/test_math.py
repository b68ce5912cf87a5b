"""SpecExit's pieces against hand-computed values: tokenizer, traces and labels, EWMA, acceptance rules, fc rows."""

from __future__ import annotations

import random

import pytest
import torch

from zoo.specexit.acceptance import verify_greedy, verify_sampling
from zoo.specexit.exits import EWMA, ExitConfig, SignalExit
from zoo.specexit.models import DraftConfig, EagleDraft, signal_values
from zoo.specexit.positions import position_ids
from zoo.specexit.tokenizer import TraceTokenizer
from zoo.specexit.traces import (
    Problem,
    build_trace,
    exit_label,
    last_computed_value,
    parse_answer,
    readout,
    sample_problems,
)

TOK = TraceTokenizer()


def test_tokenizer_round_trip_and_single_token_delimiter():
    text = "Q:23+45-12=?<think>+45=68.\n\n-12=56.\n\n56.\n\nCheck: 56+12=68.\n\n</think>Answer: 56<eos>"
    ids = TOK.encode(text)
    assert TOK.decode(ids) == text
    assert ids.count(TOK.delim_id) == 4  # each "\n\n" is one token
    assert ids.count(TOK.end_think_id) == 1
    assert len(TOK) == 25
    assert TraceTokenizer.from_json(TOK.to_json()).tokens == TOK.tokens


def test_tokenizer_rejects_foreign_characters():
    with pytest.raises(ValueError, match="not in the trace vocabulary"):
        TOK.encode("Q:2*3=?")


def test_trace_format_and_lstar():
    problem = Problem((23, 45, 12, 7), ("+", "-", "+"))
    assert problem.running_values() == [68, 56, 63]
    trace = build_trace(problem, TOK)
    text = TOK.decode(trace.ids)
    assert text == (
        "Q:23+45-12+7=?<think>+45=68.\n\n-12=56.\n\n+7=63.\n\n63.\n\n"
        "Check: 63-7=56.\n\nCheck: 56+12=68.\n\nCheck: 68-45=23.\n\n</think>Answer: 63<eos>"
    )
    # L* is the delimiter closing the bare answer line: the answer is written there.
    assert trace.ids[trace.lstar_pos] == TOK.delim_id
    assert TOK.decode(trace.ids[: trace.lstar_pos + 1]).endswith("+7=63.\n\n63.\n\n")
    assert trace.delimiter_pos.index(trace.lstar_pos) == 3 and trace.checks == 3
    assert parse_answer(text) == 63
    assert readout("+45=68.\n\n-12=56.\n\n+7=63.\n\n63.\n\nCheck: 63-7=56.\n\n") == 63
    assert readout("+45=68.\n\n-12=56.\n\n") is None and last_computed_value("+45=68.\n\n-12=56.\n\n") == 56
    assert last_computed_value("+45=68.\n\n63.\n\n") == 63
    assert readout("+45=68.\n\n-12=56.\n\n+7=63.\n\n63.") is None  # an unfinished line states nothing yet
    # every line is short: no line grows with the problem's length
    long = build_trace(Problem((9,) + (1,) * 9, ("+",) * 9), TOK)
    lines = TOK.decode(long.ids[long.prompt_len : long.end_think_pos]).split("\n\n")
    assert max(len(TOK.encode(line)) for line in lines if not line.startswith("Check:")) <= 7
    assert max(len(TOK.encode(line)) for line in lines if line.startswith("Check:")) <= 10


def test_exit_label_of_a_hand_written_trace_is_the_earliest_answer_determining_position():
    """Issue 34: the label is where the answer the full trace gives is fixed, not a surface marker."""
    text = (
        "Q:8+4-7+9=?<think>+4=12.\n\n-7=5.\n\n+9=14.\n\n13.\n\nWait,14.\n\n"
        "Check: 14-9=5.\n\nCheck: 5+7=12.\n\n</think>Answer: 14<eos>"
    )
    ids = TOK.encode(text)
    label = exit_label(ids, TOK)
    # "13." is a bare answer but a wrong one that is corrected later: not determined; "Wait,14." is
    assert TOK.decode(ids[: label + 1]).endswith("13.\n\nWait,14.\n\n")
    delimiters = [i for i, t in enumerate(ids) if t == TOK.delim_id]
    assert label == delimiters[4]
    # the same position in the completion alone (tokens after <think>)
    completion = ids[ids.index(TOK.think_id) + 1 :]
    assert exit_label(completion, TOK) == label - ids.index(TOK.think_id) - 1
    # a trace whose answer disagrees with its thinking, or that never closes thinking, has no label
    assert exit_label(TOK.encode(text.replace("Answer: 14", "Answer: 15")), TOK) is None
    assert exit_label(TOK.encode("Q:1+2=?<think>3.\n\n"), TOK) is None
    # the answer the full trace gives, even when it is wrong: a target that writes 15 keeps 15
    wrong = TOK.encode("Q:8+7=?<think>+7=15.\n\n15.\n\nCheck: 15-7=8.\n\n</think>Answer: 15<eos>")
    assert TOK.decode(wrong[: exit_label(wrong, TOK) + 1]).endswith("<think>+7=15.\n\n15.\n\n")
    for problem in sample_problems(30, seed=5):  # generated traces: the label is L*
        trace = build_trace(problem, TOK, random.Random(2), p_wrong=0.3, p_all_checks=0.5)
        assert exit_label(trace.ids, TOK) == trace.lstar_pos


def test_injected_mistake_moves_lstar_after_the_correction():
    rng = random.Random(0)
    problem = Problem((23, 45, 12), ("+", "-"))
    trace = build_trace(problem, TOK, rng, p_wrong=0.999)
    text = TOK.decode(trace.ids)
    assert text.count("Wait,") == 2
    assert TOK.decode(trace.ids[: trace.lstar_pos + 1]).endswith("Wait,-12=56.\n\n56.\n\n")
    assert parse_answer(text) == 56
    # the wrong digits are masked out of the LM loss; the correction is learned
    lines = text.split("<think>")[1].split("\n\n")
    wrong = [lines[0].partition("=")[2].rstrip("."), lines[2].partition("=")[2].rstrip(".")]
    assert TOK.decode(trace.ids[i] for i in trace.noise_pos) == "".join(wrong)


def test_number_of_checks_is_random_and_all_by_default():
    problem = Problem((2, 3, 4, 5, 6, 7), ("+",) * 5)
    assert build_trace(problem, TOK).checks == 4  # at most 4, one per step
    assert build_trace(Problem((2, 3, 4), ("+", "+")), TOK).checks == 2
    counts = [build_trace(problem, TOK, random.Random(i), p_all_checks=0.5).checks for i in range(400)]
    assert set(counts) == {0, 1, 2, 3, 4}
    assert 0.4 < counts.count(4) / 400 < 0.6  # all checks half of the time, else uniform 0..3
    none = build_trace(problem, TOK, checks=0)
    assert none.end_think_pos == none.lstar_pos + 1 and none.lstar_pos == none.delimiter_pos[-1]
    labels = none.signal_labels()
    assert labels["confidence"][none.lstar_pos] == 1 and labels["remain"][none.lstar_pos] == 0


def test_running_values_stay_in_range_for_any_length():
    for problem in sample_problems(200, seed=1, min_operands=7, max_operands=10, max_running=49):
        assert all(0 <= v <= 49 for v in problem.running_values())
        assert 7 <= len(problem.operands) <= 10


def test_signal_labels_progress_monotone_remain_zero_at_lstar():
    for problem in sample_problems(20, seed=3):
        trace = build_trace(problem, TOK, random.Random(1), p_wrong=0.3, p_all_checks=0.5)
        labels = trace.signal_labels()
        inside = labels["mask"].astype(bool)
        progress, confidence = labels["progress"][inside], labels["confidence"][inside]
        assert (progress[1:] >= progress[:-1]).all()
        assert labels["remain"][trace.lstar_pos] == 0.0 and labels["progress"][trace.lstar_pos] == 1.0
        assert (labels["remain"][trace.lstar_pos : trace.end_think_pos] == 0.0).all()
        assert labels["remain"][trace.think_pos] == pytest.approx(
            float(torch.log(torch.tensor(trace.lstar_pos - trace.think_pos + 1.0)))
        )
        # confidence switches on exactly at L* (the exit label) and stays on
        first_on = int(confidence.argmax()) + trace.think_pos
        assert first_on == trace.lstar_pos
        assert confidence[first_on - trace.think_pos :].all() and not confidence[: first_on - trace.think_pos].any()


def test_ewma_matches_recurrence():
    ewma = EWMA(0.1)
    assert ewma.value is None
    assert ewma.update(1.0) == 1.0  # initialised with the first score
    assert ewma.update(0.0) == pytest.approx(0.9)
    assert ewma.update(0.5) == pytest.approx(0.1 * 0.5 + 0.9 * 0.9)
    with pytest.raises(ValueError, match="alpha"):
        EWMA(0.0)


def test_signal_exit_thresholds_use_smoothed_values():
    policy = SignalExit(ExitConfig(alpha=0.5, confidence=0.8, progress=0.3, remain=10.0))
    assert not policy.ready()  # nothing observed yet
    policy.observe(torch.tensor([1.0, 0.9, 3.0]))
    assert policy.ready()
    policy.observe(torch.tensor([0.2, 0.9, 3.0]))  # confidence EWMA 0.6 < 0.8
    assert not policy.ready()
    policy.observe(torch.tensor([1.0, 0.9, 40.0]))  # confidence 0.8 (not >), remain 21.5
    assert not policy.ready()


def test_signal_exit_folds_in_the_delimiter_signal_without_committing_it():
    class Engine:  # the decoder's view the policy needs: the signals of the delimiter it stands on
        def signals_at(self, position):
            return torch.tensor([0.9, 0.9, 2.0])

    cfg = ExitConfig(alpha=0.5, confidence=0.8, progress=0.3, remain=10.0)
    policy = SignalExit(cfg)
    policy.observe(torch.tensor([0.8, 0.5, 20.0]))
    # 0.5 * 0.9 + 0.5 * 0.8 = 0.85 > 0.8; remain 0.5 * 2 + 0.5 * 20 = 11 >= 10: not yet
    assert not policy.decide(Engine(), [], 0)
    policy.observe(torch.tensor([0.8, 0.5, 4.0]))  # remain EWMA 12 -> peeked 7
    assert policy.decide(Engine(), [], 0)
    assert policy.confidence.value == pytest.approx(0.8) and policy.remain.value == pytest.approx(12.0)  # untouched
    # the paper's order decides on the earlier rounds only: confidence 0.8 is not > 0.8, remain 12 is not < 10
    paper = SignalExit(ExitConfig(**{**vars(cfg), "read_delimiter": False}))
    for signals in ([0.8, 0.5, 20.0], [0.8, 0.5, 4.0]):
        paper.observe(torch.tensor(signals))
    assert not paper.decide(Engine(), [], 0)
    ewma = EWMA(0.25)
    ewma.update(1.0)
    assert ewma.peek(0.0) == pytest.approx(0.75) and ewma.value == 1.0


def test_verify_greedy_hand_example():
    logits = torch.full((4, 5), -1.0)
    for row, best in enumerate((2, 3, 1, 4)):
        logits[row, best] = 1.0
    assert verify_greedy(torch.tensor([2, 3, 0]), logits) == (2, 1)  # 2, 3 accepted; 0 != 1 -> emit 1
    assert verify_greedy(torch.tensor([2, 3, 1]), logits) == (3, 4)  # all accepted -> bonus from the last row
    assert verify_greedy(torch.tensor([0, 3, 1]), logits) == (0, 2)


def test_sampling_acceptance_preserves_target_distribution():
    """Empirical check: the first emitted token is distributed as the target's p_0, not the draft's q_1."""
    generator = torch.Generator().manual_seed(0)
    vocab, k, trials = 6, 3, 20000
    p = torch.softmax(torch.randn(k + 1, vocab, generator=generator) * 1.5, -1)
    q = torch.softmax(torch.randn(k, vocab, generator=generator) * 1.5, -1)
    assert 0.5 * (p[0] - q[0]).abs().sum() > 0.2  # the test can tell p from q
    first, accepted = torch.zeros(vocab), 0
    for _ in range(trials):
        drafted = torch.multinomial(q, 1, generator=generator)[:, 0]
        m, token = verify_sampling(drafted, q, p, generator)
        first[int(drafted[0]) if m >= 1 else token] += 1
        accepted += m
    empirical = first / trials
    assert 0.5 * (empirical - p[0]).abs().sum() < 0.02
    assert 0 < accepted / trials < k  # both outcomes occur
    # identical distributions: every draft token is accepted
    drafted = torch.tensor([1, 2, 3])
    assert verify_sampling(drafted, p[:k], p, generator)[0] == k


def test_signal_head_is_exactly_the_extra_fc_rows():
    torch.manual_seed(0)
    hidden = 32
    with_signals = EagleDraft(25, hidden, DraftConfig(taps=(1, 2), num_heads=2, intermediate_size=64, n_signals=3))
    plain = EagleDraft(25, hidden, DraftConfig(taps=(1, 2), num_heads=2, intermediate_size=64, n_signals=0))
    state = with_signals.state_dict()
    state["fc.weight"] = state["fc.weight"][:hidden]
    plain.load_state_dict(state)
    features = torch.randn(2, 7, 2 * hidden)
    fused, signal_logits = with_signals.fuse(features)
    fused_plain, no_signals = plain.fuse(features)
    assert no_signals.shape[-1] == 0 and signal_logits.shape[-1] == 3
    torch.testing.assert_close(fused, fused_plain)
    torch.testing.assert_close(signal_logits, features @ with_signals.fc.weight[hidden:].T)
    embeds = torch.randn(2, 7, hidden)
    torch.testing.assert_close(
        with_signals(fused, embeds, torch.arange(7)), plain(fused_plain, embeds, torch.arange(7))
    )
    values = signal_values(torch.tensor([[0.0, 0.0, 0.0], [2.0, -2.0, 1.0]]))
    torch.testing.assert_close(values[0], torch.tensor([0.5, 0.5, 1.0]))
    torch.testing.assert_close(
        values[1], torch.tensor([torch.sigmoid(torch.tensor(2.0)), torch.sigmoid(torch.tensor(-2.0)), torch.e])
    )


def test_position_coupling_hand_example():
    """Each step line carries the ids of the prompt entry it consumes (zoo/specexit/positions.py, STRIDE 12)."""
    trace = build_trace(Problem((8, 4, 7, 9), ("+", "-", "+")), TOK, checks=1)
    ids = position_ids(TOK, trace.ids)
    tokens = [TOK.tokens[i] for i in trace.ids]
    got = list(zip(tokens, ids, strict=True))
    prompt = [("Q:", 12), ("8", 16), ("+", 24), ("4", 25), ("-", 36), ("7", 37), ("+", 48), ("9", 49)]
    assert got[:11] == [*prompt, ("=", 60), ("?", 61), ("<think>", 21)]
    think = got[11:]
    assert think[:7] == [("+", 24), ("4", 25), ("=", 27), ("1", 28), ("2", 29), (".", 30), ("\n\n", 31)]
    assert think[7:12] == [("-", 36), ("7", 37), ("=", 39), ("5", 40), (".", 42)]  # one-digit value: "." stays
    assert think[20:24] == [("1", 64), ("4", 65), (".", 66), ("\n\n", 67)]  # the bare line: block n+1 ("=?")
    # the check restates the value it undoes (ids 6 after it: the 14 of block 4) in slots 8..11 of block 3, which no
    # step line uses, and re-reads entry 4
    assert think[24:30] == [("Check:", 44), (" ", 45), ("1", 46), ("4", 47), ("-", 48), ("9", 49)]
    assert think[-6:] == [("</think>", 73), ("Answer:", 74), (" ", 75), ("1", 76), ("4", 77), ("<eos>", 78)]


def test_position_coupling_is_causal_and_length_invariant():
    for problem in sample_problems(20, seed=7, min_operands=2, max_operands=10):
        trace = build_trace(problem, TOK, random.Random(0), p_wrong=0.3, p_all_checks=0.5)
        ids = position_ids(TOK, trace.ids)
        for cut in (trace.prompt_len, trace.lstar_pos, len(trace.ids) - 3):
            assert position_ids(TOK, trace.ids[:cut]) == ids[:cut]  # a token's id never depends on later tokens
        # every operator of a step line or check sits on the id of its prompt entry, at any length
        prompt_ops = {ids[i] for i in range(trace.prompt_len) if TOK.tokens[trace.ids[i]] in "+-"}
        think_ops = {ids[i] for i in range(trace.prompt_len, trace.end_think_pos) if TOK.tokens[trace.ids[i]] in "+-"}
        assert think_ops == prompt_ops
    # the relation between a step line and the line before it does not depend on the length
    short, long = (
        build_trace(sample_problems(1, seed=s, min_operands=n, max_operands=n)[0], TOK) for s, n in ((1, 3), (2, 10))
    )
    for trace in (short, long):
        ids = position_ids(TOK, trace.ids)
        starts = [i + 1 for i in trace.delimiter_pos[:-1]]
        steps = [
            ids[i] for i in [trace.prompt_len, *starts] if TOK.tokens[trace.ids[i]] in "+-" and i < trace.lstar_pos
        ]
        assert all(b - a == 12 for a, b in zip(steps, steps[1:]))
    # a token the grammar does not expect takes the previous id + 1 (decoding never fails)
    odd = position_ids(TOK, TOK.encode("Q:1+2=?<think>??Answer:"))
    assert odd[-3:] == [odd[-4] + 1, odd[-4] + 2, odd[-4] + 3]
