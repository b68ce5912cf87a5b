"""The evaluation protocol: problem splits, settings overrides and their errors, one cheap measured run."""

from __future__ import annotations

import pytest
import torch

import zoo
from zoo._errors import ZooError
from zoo.eval import Run
from zoo.eval.engine import evaluation, measure_task
from zoo.specexit.data import make_splits, validation_problems
from zoo.specexit.data import test_problems as held_out_problems
from zoo.specexit.evaluate import PROTOCOL, SHARED_ARMS


@pytest.mark.parametrize("operands", [(3, 6), (7, 10)])
def test_calibration_problems_never_overlap_test_or_training_problems(operands):
    test = {p.expression for p in held_out_problems(100, operands)}
    train = {p.expression for p in make_splits(20000, 256, 0).train}
    assert not test & {p.expression for p in validation_problems(1000, operands)}
    assert not test & train and not train & {p.expression for p in validation_problems(100, operands)}
    assert all(operands[0] <= len(p.operands) <= operands[1] for p in held_out_problems(100, operands))


def test_threshold_calibration_never_sees_a_test_problem(monkeypatch):
    """The draft recipe's calibration decodes validation problems only: every prompt it encodes is checked."""
    from zoo.specexit.module import SpecExitModule

    torch.manual_seed(0)
    module = SpecExitModule(stage="draft", max_new_tokens=12, calibrate_problems=6).eval()
    seen = []
    original = module.encode_prompt
    monkeypatch.setattr(module, "encode_prompt", lambda problem: seen.append(problem.expression) or original(problem))
    chosen = module.calibrate_exit(6)
    assert seen == [p.expression for p in validation_problems(6)]
    test = {p.expression for p in held_out_problems(100)} | {p.expression for p in held_out_problems(50, (7, 10))}
    assert not test & set(seen)
    # the chosen thresholds are stored where the exported config.json takes them from
    assert module.exit_rule.confidence == chosen["specexit"]["confidence"] == module.hparams["exit_rule"].confidence
    assert module.exit_rule.probe_threshold == chosen["probe_exit"]["threshold"]
    assert len(chosen["tables"]["specexit"]) == len(chosen["tables"]["probe_exit"]) == 36


def test_calibrated_thresholds_survive_a_stored_fit(tmp_path):
    """The harness stores fits with save_pretrained and reloads them with load_folder: the exit rule the evaluation
    reads (and reports as the arms' thresholds) must come back."""
    import dataclasses

    from zoo._serialization import load_folder, save_pretrained
    from zoo.specexit.module import SpecExitModule

    torch.manual_seed(0)
    module = SpecExitModule(stage="draft", max_new_tokens=12).eval()
    module.exit_rule = dataclasses.replace(module.exit_rule, confidence=0.15, remain=28.0, probe_threshold=0.93)
    module.hparams["exit_rule"] = module.exit_rule
    save_pretrained(module, tmp_path)
    assert load_folder(tmp_path).exit_rule == module.exit_rule


def test_unknown_setting_and_bad_values_are_one_line_errors():
    for pairs, message in (
        (["operand_max=8"], "unknown setting 'operand_max'; valid keys: test_problems, operands_min"),
        (["test_problems=many"], "--set test_problems=many: expected an integer"),
        (["operands_max=1"], "must be at least 2"),
        (["long_test_problems"], "expected KEY=VALUE"),
    ):
        with pytest.raises(ZooError, match=message) as error:
            PROTOCOL.parse_overrides(pairs)
        assert "\n" not in str(error.value)


def _run(seed: int = 0, **overrides) -> Run:
    return Run(PROTOCOL, "specexit", seed, PROTOCOL.resolve(overrides), evaluation("specexit").entries)


def test_every_arm_is_measured_in_one_timed_pass_and_only_fits_train_on_the_published_target():
    """Every arm but the regex stop shares one interleaved pass; the regex stop (no learning, the published target)
    has its own timed pass beside plain speculative decoding."""
    assert [group.arms for group in PROTOCOL.shared] == [SHARED_ARMS] and PROTOCOL.is_timed("reference_first_check")
    assert set(PROTOCOL.arms) == {*SHARED_ARMS, "reference_regex_stop"} and PROTOCOL.is_timed("reference_regex_stop")
    assert _run().uses_published("specexit") and not _run(1).uses_published("specexit")
    assert not _run(draft_steps=10).uses_published("specexit")  # a setting with a recipe key retrains seed 0 too
    (target,) = PROTOCOL.fit_args(_run(1))
    assert target == f"--model.init_args.target_from={zoo.get_entry('specexit').mirror_dir}"


def test_operand_range_upside_down_is_refused_before_any_work():
    with pytest.raises(ZooError, match="operands_min=8 is above operands_max=5"):
        measure_task(PROTOCOL, _run(operands_min=8, operands_max=5), ["specexit"])
    with pytest.raises(ZooError, match="long_operands_min=9 is above long_operands_max=7"):
        measure_task(PROTOCOL, _run(long_operands_min=9, long_operands_max=7), ["target_greedy"])


@pytest.fixture()
def small():
    if not (zoo.get_entry("specexit").mirror_dir / "model.safetensors").is_file():
        pytest.skip("no published checkpoint in hub_cards/ yet")
    threads = torch.get_num_threads()
    yield {"test_problems": 2, "long_test_problems": 2, "latency_repeats": 1}
    assert torch.get_num_threads() == threads  # the pass decodes on one thread and restores the setting


def test_set_operands_changes_what_is_measured(small, hf_cache, hf_offline):
    """--set selects the problem lengths: longer problems make every arm think longer; all arms come back."""
    run = _run(**small, operands_min=4, operands_max=4, long_operands_min=8, long_operands_max=8)
    scores = measure_task(PROTOCOL, run, ["speculative"])
    assert set(scores) == set(SHARED_ARMS) and scores["speculative"]["lossless_match"] == 100.0
    for arm in ("target_greedy", "speculative", "reference_oracle_exit"):  # a first Check: can come at any length
        assert scores[arm]["long_thinking_tokens_mean"] > scores[arm]["thinking_tokens_mean"], arm
    assert {"forced_acc_lstar_m1", "forced_acc_lstar_p3"} <= set(scores["target_greedy"])
    assert {"confidence_threshold", "remain_threshold"} <= set(scores["specexit"])


def test_regex_stop_arm_measures_its_own_pass_and_the_gates(small, hf_cache, hf_offline):
    """The regex stop decodes beside speculative decoding and cuts tokens, and carries the headroom gates measured on
    validation traces: none on the checks grammar, >= 1 on the unmarked one the published target writes."""
    scores = measure_task(PROTOCOL, _run(**small), ["reference_regex_stop"])["reference_regex_stop"]
    assert 0.0 <= scores["answer_kept"] <= 100.0 and 0.0 < scores["token_reduction_vs_spec"] < 1.0
    assert scores["gate_checks_in"] == scores["gate_checks_long"] == 0.0
    assert scores["gate_unmarked_in"] >= 1.0 and scores["gate_unmarked_long"] >= 1.0
    assert "long_accuracy" in scores
