"""Demo labels: the token stream round-trips to the bot's actions, hindsight grounding, bad demo files."""

import numpy as np
import pytest
from minigrid.core.constants import DIR_TO_VEC

from zoo.deepha.demos import Demos, hindsight_grounding, make_env, reset, split_seed
from zoo.deepha.sequences import step_tokens
from zoo.deepha.vocab import LAYOUTS, MOT, SKILL


def test_tokenisation_round_trips_to_the_bot_actions(tiny_demos):
    for e in range(len(tiny_demos)):
        ep = tiny_demos.episode(e)
        steps = [
            step_tokens(LAYOUTS["coa"], ep["skills"][t], ep["grounding"][t], ep["motor"][t], t)
            for t in range(len(ep["motor"]))
        ]
        assert all(len(s) == 7 for s in steps)
        motor = [v for s in steps for k, v in s if k == MOT]
        skills = [tuple(v for k, v in s if k in SKILL) for s in steps]
        assert motor == ep["motor"].tolist()
        assert skills == [tuple(x) for x in ep["skills"].tolist()]
        # the decoded motor tokens, replayed in the same seeded environment, solve the mission as the bot did
        level = "PutNextLocal" if tiny_demos.levels[e] == 2 else "Synth"
        env = make_env(level)
        obs, _ = reset(env, int(tiny_demos.seeds[e]))
        reward = 0.0
        for t, action in enumerate(motor):
            assert np.array_equal(obs["image"], ep["images"][t])
            obs, reward, terminated, truncated, _ = env.step(action)
        assert reward > 0 and terminated


def test_hindsight_grounding_hand_computed():
    # agent at (1, 1) facing east (dir 0), walks 2 cells east (segment A = 3 steps: fwd, fwd, right-turn),
    # then faces south (dir 1) and walks 1 cell (segment B): A ends at (3, 1), B at (3, 2)
    skills = np.array([[1, 2, 1], [1, 2, 1], [1, 2, 1], [3, 2, 1]])
    positions = np.array([[1, 1], [2, 1], [3, 1], [3, 1]])
    dirs = np.array([0, 0, 0, 1])
    labels, clipped = hindsight_grounding(skills, positions, (3, 2), dirs)
    # step 0: (3,1)-(1,1) = (2,0) east: forward 2; step 3 faces south: (3,2)-(3,1) = (0,1) south: forward 1
    assert labels.tolist() == [[2, 0], [1, 0], [0, 0], [1, 0]] and clipped == 0
    # facing north (dir 3) the east neighbour is on the right: right offset +1
    labels, _ = hindsight_grounding(np.array([[1, 2, 1]]), np.array([[5, 5]]), (6, 5), np.array([3]))
    assert labels.tolist() == [[0, 1]]


def test_grounding_points_at_the_cell_where_the_subgoal_ended(tiny_demos):
    for e in range(len(tiny_demos)):
        a, b = tiny_demos.starts[e], tiny_demos.starts[e + 1]
        skills, pos, dirs = tiny_demos.skills[a:b], tiny_demos.positions[a:b], tiny_demos.dirs[a:b]
        gnd = tiny_demos.grounding[a:b]
        for t in range(b - a - 1):  # the last step's end cell is after the episode (not stored)
            end = t
            while end + 1 < b - a and np.array_equal(skills[end + 1], skills[t]):
                end += 1
            if end + 1 >= b - a:
                continue
            dir_vec = DIR_TO_VEC[dirs[t]]
            right = np.array((-dir_vec[1], dir_vec[0]))
            cell = pos[t] + gnd[t][0] * dir_vec + gnd[t][1] * right
            if np.abs(gnd[t]).max() < 12:
                assert tuple(cell) == tuple(pos[end + 1]), (e, t)


def test_seeds_are_disjoint_across_splits():
    seen = {split: {split_seed(split, "Synth", i) for i in (0, 99_999)} for split in ("train", "validation", "test")}
    assert seen["train"].isdisjoint(seen["validation"]) and seen["validation"].isdisjoint(seen["test"])
    assert max(seen["train"]) < min(seen["validation"]) and max(seen["validation"]) < min(seen["test"])


def test_bad_demo_file_and_level(tiny_demos, tmp_path):
    path = tmp_path / "bad.npz"
    bad = Demos(**{k: (v.copy() if isinstance(v, np.ndarray) else v) for k, v in vars(tiny_demos).items()})
    bad.grounding[3] = (13, 0)
    bad.save(path)
    with pytest.raises(ValueError, match=r"grounding offsets outside \[-12, 12\]"):
        Demos.load(path)
    tiny_demos.save(tmp_path / "good.npz")
    assert len(Demos.load(tmp_path / "good.npz")) == len(tiny_demos)
    with pytest.raises(ValueError, match="level: unknown BabyAI level 'Minecraft'"):
        make_env("Minecraft")
