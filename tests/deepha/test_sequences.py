"""The token stream, compression (dedup, W-blocks, positions) and teacher-forcing targets, by hand."""

import numpy as np
import pytest

from zoo.deepha.sequences import IGNORE, compressed_prefix, context, step_tokens, to_arrays, training_sequences
from zoo.deepha.vocab import GND_F, LAYOUTS, MOT, OBS, SKILL_COLOUR, SKILL_OBJ, SKILL_TYPE, WORD, mission_tokens


def _steps(skills, layout="coa"):
    return [step_tokens(LAYOUTS[layout], s, (0, 1), 2, t) for t, s in enumerate(skills)]


def test_step_layout_and_drop():
    tokens = step_tokens(LAYOUTS["coa"], (1, 3, 2), (-12, 5), 6, obs_row=9)
    assert tokens == [
        (OBS, 9),
        (SKILL_TYPE, 1),
        (SKILL_OBJ, 3),
        (SKILL_COLOUR, 2),
        (GND_F, 0),
        (GND_F + 1, 17),
        (MOT, 6),
    ]
    assert step_tokens(LAYOUTS["coa"], (1, 3, 2), (0, 0), 6, 9, drop=True) == [(OBS, 9), (MOT, 6)]
    assert step_tokens(LAYOUTS["flat"], (1, 3, 2), (0, 0), 6, 9) == [(OBS, 9), (MOT, 6)]


def test_compressed_prefix_deduplicates_consecutive_skills():
    steps = _steps([(1, 2, 3), (1, 2, 3), (4, 0, 0), (1, 2, 3), (1, 2, 3)])
    assert compressed_prefix(steps, 5) == [
        (SKILL_TYPE, 1), (SKILL_OBJ, 2), (SKILL_COLOUR, 3),
        (SKILL_TYPE, 4), (SKILL_OBJ, 0), (SKILL_COLOUR, 0),
        (SKILL_TYPE, 1), (SKILL_OBJ, 2), (SKILL_COLOUR, 3),
    ]  # fmt: skip
    # a step whose skill was dropped contributes nothing
    steps[2] = step_tokens(LAYOUTS["coa"], (4, 0, 0), (0, 0), 2, 2, drop=True)
    assert len(compressed_prefix(steps, 5)) == 3


@pytest.mark.parametrize("window", [1, 2, 4, 8])
def test_compressed_context_never_holds_obs_older_than_w(window):
    rng = np.random.default_rng(window)
    steps = _steps([tuple(rng.integers(1, 3, size=3)) for _ in range(30)])
    for t in range(30):
        ctx = context([1, 2, 3], steps, t, window)
        obs_steps = [v for k, v in ctx if k == OBS]  # an OBS token's id is its step
        assert obs_steps and min(obs_steps) > t - window and max(obs_steps) == t
        full = context([1, 2, 3], steps, t, None)
        assert len(ctx) <= len(full)
    # full context holds every step: 7 tokens each
    assert len(context([1, 2, 3], steps, 29, None)) == 3 + 7 * 30


def test_training_blocks_are_the_inference_contexts():
    steps = _steps([(1, 1, 1), (1, 1, 1), (2, 1, 1), (2, 1, 1), (3, 0, 0)])
    seqs = training_sequences([5, 6], steps, window=2)
    assert len(seqs) == 3
    for b, (tokens, is_target) in enumerate(seqs):
        last = min(2 * b + 1, 4)
        assert tokens == context([5, 6], steps, last, 2)
        n_head = len(context([5, 6], steps, 2 * b, 2)) - 7
        assert not any(is_target[:n_head]) and all(is_target[n_head + 1 : n_head + 7])
    ((full, _),) = training_sequences([5, 6], steps, window=None)
    assert full == context([5, 6], steps, 4, None)


def test_targets_sit_one_position_early():
    tokens = [(WORD, 3), (OBS, 0), (SKILL_TYPE, 1), (MOT, 4)]
    types, ids, targets, target_types = to_arrays((tokens, [False, False, True, True]))
    assert targets.tolist() == [IGNORE, 1, 4, IGNORE]
    assert target_types.tolist() == [-1, SKILL_TYPE, MOT, -1]


def test_mission_vocabulary_errors_name_the_words():
    assert mission_tokens("go to the red ball, then open a door")[:4] == [1, 2, 3, 15]
    with pytest.raises(ValueError, match="words outside the vocabulary: diamond, mine"):
        mission_tokens("mine the diamond")


def test_window_below_one_is_refused():
    from zoo.deepha.sequences import block_start

    with pytest.raises(ValueError, match="W: the compression window must be >= 1"):
        block_start(3, 0)


def test_thought_noise_changes_inputs_only():
    from zoo.deepha.vocab import GROUNDING, SKILL, TYPE_SIZES

    steps = _steps([(1, 2, 3)] * 40)
    sequence = training_sequences([5, 6], steps, window=None)[0]
    clean = to_arrays(sequence)
    types, ids, targets, target_types = to_arrays(sequence, np.random.default_rng(0), p_noise=0.5)
    assert np.array_equal(types, clean[0]) and np.array_equal(targets, clean[2])
    assert np.array_equal(target_types, clean[3])
    thought = np.isin(types, (*SKILL, *GROUNDING))
    changed = ids != clean[1]
    assert not changed[~thought].any()  # words, OBS rows and motor tokens are never touched
    assert 0.2 < changed[thought].mean() < 0.6  # about p_noise, less the draws that hit the true id
    assert all(0 <= v < TYPE_SIZES[k] for k, v in zip(types[thought], ids[thought], strict=True))
