"""Issue 62: the unmarked trace grammar, the regex stops, their tuning and the headroom gate (no model; fast)."""

from __future__ import annotations

import pytest
import torch

from zoo.specexit.grammar import (
    RegexStop,
    RegexStopPolicy,
    StopPattern,
    build_unmarked_trace,
    headroom,
    make_trace,
    partial_checks,
    pattern_named,
    regex_family,
    stated_value,
    thinking_of,
    tune_regex,
    verification_line,
)
from zoo.specexit.tokenizer import TraceTokenizer
from zoo.specexit.traces import Problem, build_trace

TOK = TraceTokenizer()
# 8+4-7+9: running values 12, 5, 14; steps 1..3 consume 4, 7, 9
PROBLEM = Problem((8, 4, 7, 9), ("+", "-", "+"))


def thinking_text(trace) -> str:
    return TOK.decode(thinking_of(trace))


def test_unmarked_trace_by_hand():
    """Step 1 is followed by min(1, 2) = 1 partial check (next operand 7), step 2 by min(2, 2) = 2 (next operand 9),
    then 3 redundant verifications walk back from step 3; odd operands re-derive, even ones undo."""
    assert [partial_checks(PROBLEM, j) for j in (1, 2)] == [1, 2]  # min(1, 2) and min(2, 2)
    assert verification_line(PROBLEM, 1) == "Check: 12-4=8."  # even operand: undo
    assert verification_line(PROBLEM, 2) == "12-7=5."  # odd operand: re-derivation
    trace = build_unmarked_trace(PROBLEM, TOK)
    lines = thinking_text(trace).split("\n\n")[:-1]
    assert lines == [
        "+4=12.", "Check: 12-4=8.",
        "-7=5.", "12-7=5.", "Check: 12-4=8.",
        "+9=14.", "5+9=14.", "12-7=5.", "Check: 12-4=8.",
    ]  # fmt: skip
    assert TOK.decode(trace.ids[: trace.lstar_pos + 1]).endswith("+9=14.\n\n")  # L*: the last step line
    assert TOK.decode(trace.ids[trace.end_think_pos :]) == "</think>Answer: 14<eos>"
    assert trace.checks == 3 and trace.delimiter_pos[-1] == trace.end_think_pos - 1


def test_unmarked_trace_check_counts_and_unknown_grammar():
    assert (
        build_unmarked_trace(PROBLEM, TOK, checks=0).end_think_pos == build_unmarked_trace(PROBLEM, TOK).lstar_pos + 1
    )
    assert build_unmarked_trace(PROBLEM, TOK, checks=9).checks == 3  # clipped to the steps
    assert make_trace(PROBLEM, TOK, "checks").ids == build_trace(PROBLEM, TOK).ids
    with pytest.raises(ValueError, match="unknown trace grammar"):
        make_trace(PROBLEM, TOK, "marked")
    with pytest.raises(ValueError, match="no regex stop called"):
        pattern_named("stop_anywhere")


def test_stated_value_reads_step_and_bare_lines_only():
    assert stated_value("+4=12.\n\n-7=5.\n\n12-7=5.\n\nCheck: 5+7=12.\n\n") == 5
    assert stated_value("+4=12.\n\n14.\n\nCheck: 14-9=5.\n\n") == 14
    assert stated_value("+4=12.\n\n-7=") == 12  # an unfinished line states nothing
    assert stated_value("Check: 12-4=8.\n\n") is None


def test_family_size_is_within_specexits_tuning_budget():
    names = [p.name for p in regex_family()]
    assert len(names) == len(set(names)) == 31 <= 36


def test_first_verification_stops_at_the_first_check_line_of_the_checks_grammar():
    trace = build_trace(PROBLEM, TOK)  # +4=12. -7=5. +9=14. 14. Check: ...
    rule = RegexStop(pattern_named("first_verification"), TOK)
    thinking = thinking_of(trace)
    index = rule.stop_index(thinking)
    assert TOK.decode(thinking[: index + 1]) == "+4=12.\n\n-7=5.\n\n+9=14.\n\n1"  # the bare line's first digit
    assert rule.answer(thinking, index) == 14


def test_consecutive_three_stops_before_the_third_line_of_a_walk_back():
    trace = build_unmarked_trace(PROBLEM, TOK)
    thinking = thinking_of(trace)
    rule = RegexStop(pattern_named("consecutive_3"), TOK)
    index = rule.stop_index(thinking)
    text = TOK.decode(thinking[: index + 1])
    # the mid block after step 2 (two lines) does not fire; the third redundant line does
    assert text.endswith("+9=14.\n\n5+9=14.\n\n12-7=5.\n\nCheck:")
    assert rule.answer(thinking, index) == 14
    early = RegexStop(pattern_named("first_verification"), TOK)
    assert early.answer(thinking, early.stop_index(thinking)) == 12  # a partial check: stopped before the answer


def test_headroom_by_hand():
    """One trace: the oracle keeps through L*; consecutive_3 keeps 3 tokens less than the full thinking."""
    trace = build_unmarked_trace(PROBLEM, TOK)
    thinking = thinking_of(trace)
    full, lstar = len(thinking), trace.lstar_pos - trace.think_pos
    rule = RegexStop(pattern_named("consecutive_3"), TOK)
    kept = rule.stop_index(thinking) + 1
    scores = headroom(rule, [trace])
    assert scores["oracle_saving"] == full - lstar
    assert scores["regex_saving"] == full - kept == len(TOK.encode("Check: 12-4=8.\n\n")) - 1
    assert scores["accuracy_loss"] == 0.0
    assert scores["saving_missed"] == pytest.approx(1 - (full - kept) / (full - lstar))
    wrong = headroom(RegexStop(pattern_named("after_step_1"), TOK), [trace])
    assert wrong["accuracy_loss"] == 100.0 and wrong["gate"] == 10.0


def test_tuning_picks_the_first_check_on_the_checks_grammar_and_the_gate_fails_there():
    from zoo.specexit.data import validation_problems

    problems = validation_problems(30)
    checks = [make_trace(p, TOK, "checks") for p in problems]
    chosen, trials = tune_regex(checks, TOK)
    assert chosen.name == "first_verification" and len(trials) == 31
    assert headroom(RegexStop(chosen, TOK), checks)["gate"] < 1.0  # the exit is marked: no headroom
    unmarked = [make_trace(p, TOK, "unmarked") for p in problems]
    chosen, _ = tune_regex(unmarked, TOK)
    assert headroom(RegexStop(chosen, TOK), unmarked)["gate"] >= 1.0


def test_gate_claim_fails_on_one_unit():
    from zoo.eval import Claim

    claim = Claim.gate("g", "gate", {"3-6 operands": 1.9, "7-10 operands": 0.4}, 1.0)
    assert not claim.holds and claim.kind == "headroom" and claim.value == 0.4


def test_regex_policy_halts_the_decoder_where_the_pattern_matches():
    """A random tiny target and draft: decoding with the policy is the plain decoding cut right after the match."""
    from zoo.specexit.module import SpecExitModule

    torch.manual_seed(0)
    module = SpecExitModule(stage="draft", max_new_tokens=40).eval()
    prompt = module.encode_prompt(PROBLEM)
    plain = module.decoder().generate(prompt).tokens
    pattern = StopPattern("fifth_think", r"(?:<think>){5}\Z")  # what this random model writes
    rule = RegexStop(pattern, TOK)
    index = rule.stop_index(plain)
    stopped = module.decoder().generate(prompt, RegexStopPolicy(rule)).tokens
    assert index == 4 and len(plain) > 5
    assert stopped == plain[: index + 1]


def test_claims_on_a_result_with_the_regex_arm():
    """The label-free comparison takes the better of tokens and latency against the best stop of each."""
    from zoo.specexit.evaluate import best_label_free

    def arm(tokens, latency):
        return {"tokens_mean": tokens, "latency_ms_mean": latency}

    seeds = {"0": 0, "1": 1, "2": 2}
    per_seed = {
        "specexit": {s: arm(40.0 + i, 60.0 + i) for s, i in seeds.items()},
        "reference_first_check": {s: arm(31.0 + i, 47.0 + i) for s, i in seeds.items()},
        "reference_regex_stop": {s: arm(29.0 + i, 50.0 + i) for s, i in seeds.items()},
    }
    result = {"per_seed": per_seed, "arms": {a: arm(*(st["1"][k] for k in ("tokens_mean", "latency_ms_mean")))
                                             for a, st in per_seed.items()}}  # fmt: skip
    claim = best_label_free(result)
    assert not claim.holds and claim.id == "specexit_beats_best_label_free_stop"
    assert claim.versus in ("reference_regex_stop", "reference_first_check")
    per_seed["specexit"] = {s: arm(20.0 + i, 60.0 + i) for s, i in seeds.items()}
    claim = best_label_free(result)
    assert (
        claim.holds and claim.versus == "reference_regex_stop" and claim.value == pytest.approx(1 - 21 / 30, abs=1e-3)
    )


def test_recorded_tuning_is_what_the_tuning_step_measures_now():
    """tuning.json (the chosen regex stops and the headroom gates the evaluation reads) is not stale."""
    import json

    from zoo.specexit.tune import TUNING_FILE, tune

    recorded = json.loads(TUNING_FILE.read_text())["grammars"]
    for grammar, record in recorded.items():
        assert json.loads(json.dumps(tune(grammar))) == record, f"run `python -m zoo.specexit.tune` ({grammar})"
