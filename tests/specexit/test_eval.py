"""The evaluation protocol: problem splits, settings overrides and their errors, one cheap measured run."""

from __future__ import annotations

import pytest
import torch

import zoo
from zoo._errors import ZooError
from zoo._eval import Run, paper_arms
from zoo.specexit.data import make_splits
from zoo.specexit.evaluate import PROTOCOL, measure, validation_problems
from zoo.specexit.evaluate import test_problems as held_out_problems


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


def _run(**overrides) -> Run:
    return Run(paper_arms("specexit"), PROTOCOL, 0, PROTOCOL.resolve(overrides))


def test_operand_range_upside_down_is_refused_before_any_work():
    with pytest.raises(ZooError, match="operands_min=8 is above operands_max=5"):
        measure("specexit", _run(operands_min=8, operands_max=5))
    with pytest.raises(ZooError, match="long_operands_min=9 is above long_operands_max=7"):
        measure("specexit", _run(long_operands_min=9, long_operands_max=7))


@pytest.fixture()
def small():
    if not (zoo.get_entry("specexit").mirror_dir / "model.safetensors").is_file():
        pytest.skip("no published checkpoint in hub_cards/ yet")
    threads = torch.get_num_threads()
    yield {"test_problems": 2, "long_test_problems": 2, "latency_repeats": 1}
    torch.set_num_threads(threads)


def test_set_operands_changes_what_is_measured(small, hf_cache, hf_offline, monkeypatch):
    """--set selects the problem lengths: longer problems make every arm think longer; all arms come back."""
    monkeypatch.delenv("ZOO_SPECEXIT_EVAL_CACHE", raising=False)
    run = _run(**small, operands_min=4, operands_max=4, long_operands_min=8, long_operands_max=8)
    assert measure("speculative", run)["lossless_match"] == 100.0
    assert set(run.cache["arms"]) == set(PROTOCOL.arms)
    for arm in ("target_greedy", "speculative", "reference_first_check"):
        scores = measure(arm, run)
        assert scores["long_thinking_tokens_mean"] > scores["thinking_tokens_mean"], arm
    assert {"forced_acc_lstar_m1", "forced_acc_lstar_p3"} <= set(measure("target_greedy", run))
