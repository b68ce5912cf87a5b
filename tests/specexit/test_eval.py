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


def test_default_problems_are_the_datamodule_splits():
    splits = make_splits(20000, 256, 200)
    assert held_out_problems(200) == splits.test
    assert validation_problems(256) == splits.val


@pytest.mark.parametrize("operands", [(3, 6), (7, 10)])
def test_calibration_problems_never_overlap_test_problems(operands):
    test = {p.expression for p in held_out_problems(100, operands)}
    assert not test & {p.expression for p in validation_problems(256, operands)}
    assert all(operands[0] <= len(p.operands) <= operands[1] for p in held_out_problems(100, operands))


def test_unknown_setting_and_bad_values_are_one_line_errors():
    for pairs, message in (
        (["operand_max=8"], "unknown setting 'operand_max'; valid keys: test_problems, operands_min"),
        (["test_problems=many"], "--set test_problems=many: expected an integer"),
        (["operands_max=3"], "must be at least 4"),
        (["confidence"], "expected KEY=VALUE"),
    ):
        with pytest.raises(ZooError, match=message) as error:
            PROTOCOL.parse_overrides(pairs)
        assert "\n" not in str(error.value)


def _run(**overrides) -> Run:
    return Run(paper_arms("specexit"), PROTOCOL, 0, PROTOCOL.resolve(overrides))


def test_operand_range_upside_down_is_refused_before_any_work():
    with pytest.raises(ZooError, match="operands_min=8 is above operands_max=5"):
        measure("specexit", _run(operands_min=8, operands_max=5))


@pytest.fixture()
def small():
    if not (zoo.get_entry("specexit").mirror_dir / "model.safetensors").is_file():
        pytest.skip("no published checkpoint in hub_cards/ yet")
    threads = torch.get_num_threads()
    yield {"test_problems": 2, "validation_problems": 1, "latency_repeats": 1}
    torch.set_num_threads(threads)


def test_set_operands_changes_what_is_measured(small, hf_cache, hf_offline):
    """Longer problems (--set operands_min=8 operands_max=8) make every arm think longer; all arms come back."""
    short, long = _run(**small, operands_min=4, operands_max=4), _run(**small, operands_min=8, operands_max=8)
    assert measure("speculative", short)["lossless_match"] == 1.0
    assert set(short.cache["arms"]) == set(PROTOCOL.arms)
    for arm in ("target_greedy", "speculative", "reference_first_check"):
        assert measure(arm, long)["thinking_tokens_mean"] > measure(arm, short)["thinking_tokens_mean"], arm
