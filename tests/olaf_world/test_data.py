"""Clips, the datamodule (no actions in training batches) and the evaluation metrics on hand-made inputs."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from zoo.olaf_world.clips import ACTION_NAMES, behaviour_actions, collect, context_of
from zoo.olaf_world.data import LatentActionVideoDataModule
from zoo.olaf_world.metrics import halves, probe_accuracies, prototype_gap


@pytest.fixture(scope="module")
def tiny_datamodule():
    dm = LatentActionVideoDataModule(  # use_cache=False: renders and featurises 2 x 7 frames, writes nothing
        steps_per_seed=6, train_seeds_per_context=1, eval_seeds_per_context=2, batch_size=2, use_cache=False
    )
    dm.setup("fit")
    return dm


def test_training_batch_carries_no_actions(tiny_datamodule):
    batch = next(iter(tiny_datamodule.train_dataloader()))
    assert set(batch) == {"videos", "tau"}
    assert batch["videos"].shape == (2, 4, 64, 64, 3) and batch["videos"].dtype == torch.float32
    assert float(batch["videos"].min()) >= 0 and float(batch["videos"].max()) <= 1
    torch.testing.assert_close(batch["tau"].norm(dim=1), torch.ones(2))
    val = next(iter(tiny_datamodule.val_dataloader()))
    assert {"actions", "context", "world_seed"} <= set(val)
    assert set(val["world_seed"].tolist()) == {40, 41, 90, 91}
    assert val["context"].tolist() == context_of(val["world_seed"].numpy()).tolist()


def test_clips_line_up_with_the_episode_and_its_actions():
    clips = collect([3], steps=7, length=4, stride=3)
    assert clips["videos"].shape == (2, 4, 64, 64, 3) and clips["actions"].shape == (2, 3)
    np.testing.assert_array_equal(clips["videos"][1, 0], clips["videos"][0, 3])  # stride T-1 shares an end frame
    np.testing.assert_array_equal(clips["videos"], clips["frames"][clips["frame_index"]])
    assert clips["context"].tolist() == [0, 0]


def test_behaviour_policy_is_persistent_and_mostly_moves():
    actions = behaviour_actions(4000, np.random.default_rng(0))
    assert set(actions.tolist()) == set(range(len(ACTION_NAMES)))
    assert 0.7 < np.isin(actions, [1, 2, 3, 4]).mean() < 0.9
    changes = (np.diff(actions) != 0).mean()
    assert 0.3 < changes < 0.45  # segments of 1-4 steps (mean 2.5) -> about 1 change in 2.5 minus repeats


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"env": "doom"}, "unknown environment"),
        ({"clip_length": 1}, "T >= 2"),
        ({"teacher": "vjepa2"}, "teacher="),
        ({"target": "future"}, "target="),
        ({"train_seeds_per_context": 31}, "train_seeds_per_context"),
        ({"teacher_size": 100}, "teacher_size"),
        ({"teacher_size": 64, "teacher_grid": 4}, "teacher_grid"),
        ({"teacher_readout": "flow"}, "teacher_readout"),
        ({"context_b": "flip"}, "context_b="),
        ({"teacher": "phase_correlation", "target": "static"}, "only target='delta'"),
    ],
)
def test_bad_datamodule_arguments_raise_one_clear_line(kwargs, message):
    with pytest.raises(ValueError, match=message):
        LatentActionVideoDataModule(**kwargs)


def test_probes_separate_within_but_not_across_a_context_shift():
    rng = np.random.default_rng(0)
    n = 600
    actions = rng.integers(0, 6, n)
    world = np.concatenate([rng.integers(30, 40, n // 2), rng.integers(80, 90, n // 2)])
    context = context_of(world)
    # the action is one-hot on axes 0-5 in A and on axes 6-11 in B: a probe fit in one context fails in the other
    mu = rng.normal(scale=0.05, size=(n, 12))
    mu[np.arange(n), actions + 6 * context] += 1.0
    scores = probe_accuracies(mu, actions, context, world)
    assert scores["probe_acc_within"] > 0.95
    assert scores["probe_acc_cross"] < 0.5
    shared = rng.normal(scale=0.05, size=(n, 12))
    shared[np.arange(n), actions] += 1.0
    assert probe_accuracies(shared, actions, context, world)["probe_acc_cross"] > 0.95


def test_prototype_gap_hand_values():
    eye = np.eye(6)
    actions = np.tile(np.arange(6), 2)
    context = np.repeat([0, 1], 6)
    # identical orthogonal prototypes in both contexts: diag 1, offdiag 0
    assert prototype_gap(np.concatenate([eye, eye]), actions, context) == pytest.approx(1.0)
    # one shared vector for every action: every cosine is 1, the gap is 0
    assert prototype_gap(np.ones((12, 6)), actions, context) == pytest.approx(0.0)


def test_halves_split_each_context_by_world_seed():
    world = np.array([30, 31, 32, 33, 80, 81, 82, 83])
    assert halves(world).tolist() == [0, 0, 1, 1, 0, 0, 1, 1]


def test_terrain_split_starts_context_b_in_a_cave_away_from_lava():
    import crafter

    from zoo.olaf_world.clips import start_material, start_tile

    assert start_material(7, "world") is None
    assert start_material(7, "terrain") == "grass" and start_material(57, "terrain") == "path"
    with pytest.raises(ValueError, match="split="):
        start_material(7, "biome")
    env = crafter.Env(size=(64, 64), seed=57)
    env.reset()
    tile = start_tile(env, "path", np.random.default_rng(0))
    world = env._world
    assert world[tuple(tile)] == ("path", None)
    lava = np.argwhere(world._mat_map == world._mat_ids["lava"])
    assert not len(lava) or np.abs(lava - tile).max(axis=1).min() > 4


def test_spatial_teacher_map_pools_to_the_global_feature():
    from zoo.common import efficientnet

    frames = np.random.default_rng(0).integers(0, 256, (2, 64, 64, 3), dtype=np.uint8)
    maps = efficientnet.features(frames, size=128, grid=4)
    assert maps.shape == (2, 1280 * 16)
    pooled = efficientnet.features(frames, size=128)
    # the 4 x 4 map at 128 px is the whole map: its cell mean is the global average
    np.testing.assert_allclose(maps.reshape(2, 1280, 16).mean(axis=2), pooled, rtol=1e-4, atol=1e-5)
    with pytest.raises(ValueError, match="grid=0"):
        efficientnet.features(frames, grid=0)


def test_delta_tau_of_the_datamodule_equals_the_mean_step_formula(tiny_datamodule):
    train = tiny_datamodule.clips("train")
    tag_free = LatentActionVideoDataModule(
        steps_per_seed=6, train_seeds_per_context=1, eval_seeds_per_context=2, use_cache=False
    )
    from zoo.olaf_world.clips import tau_from_features, teacher_features

    features = teacher_features(train["frames"])
    expected = tau_from_features(features[train["frame_index"]])
    np.testing.assert_allclose(tag_free.tau(train), expected, atol=1e-5)


def test_keypoint_readout_moves_with_the_view():
    from zoo.olaf_world.clips import teacher_dim, teacher_features

    rng = np.random.default_rng(0)
    world = np.full((96, 160, 3), 60, dtype=np.uint8)
    world[40:56, 64:80] = rng.integers(0, 256, (16, 16, 3), dtype=np.uint8)  # one textured object on a flat ground
    frames = np.stack([world[16:80, 40:104], world[16:80, 48:112]])  # the second view is 8 px further right
    kp = teacher_features(frames, readout="keypoints")
    assert kp.shape == (2, teacher_dim(readout="keypoints")) == (2, 80)
    dx, dy = kp[1, :40] - kp[0, :40], kp[1, 40:] - kp[0, 40:]
    # the content moved left: most channel centroids move left, and more in x than in y
    assert (dx < 0).mean() > 0.7 and np.abs(dx).mean() > 2 * np.abs(dy).mean()
    with pytest.raises(ValueError, match="readout="):
        teacher_features(frames, readout="flow")


def test_ale_clips_play_mspacman_in_a_and_alien_in_b_with_five_actions():
    pytest.importorskip("ale_py")
    from zoo.olaf_world.clips import ALE_GAMES, ale_rom

    assert ALE_GAMES == ("ms_pacman", "alien")
    clips = collect([3, 53], steps=10, length=4, stride=3, env="ale")
    assert clips["videos"].shape == (6, 4, 64, 64, 3) and clips["videos"].dtype == np.uint8
    assert clips["context"].tolist() == [0, 0, 0, 1, 1, 1]
    assert set(clips["actions"].reshape(-1).tolist()) <= {0, 1, 2, 3, 4}  # no "do" in ALE
    np.testing.assert_array_equal(clips["videos"], clips["frames"][clips["frame_index"]])
    # the two games look different: mean colours of the first frames differ
    assert np.abs(clips["videos"][0, 0].mean((0, 1)) - clips["videos"][3, 0].mean((0, 1))).max() > 10
    assert ale_rom("alien").endswith("alien.bin")
    actions = behaviour_actions(2000, np.random.default_rng(0), still=(0,))
    assert set(actions.tolist()) == {0, 1, 2, 3, 4}


def test_missing_ale_rom_raises_one_clear_line(monkeypatch):
    roms = pytest.importorskip("ale_py.roms")
    from zoo.olaf_world.clips import ale_rom

    monkeypatch.setattr(roms, "get_rom_path", lambda game: None)
    with pytest.raises(FileNotFoundError, match="ALE ROM 'ms_pacman' is missing"):
        ale_rom("ms_pacman")


def test_prototype_gap_of_five_ale_actions():
    eye = np.eye(5)
    actions = np.tile(np.arange(5), 2)
    context = np.repeat([0, 1], 5)
    assert prototype_gap(np.concatenate([eye, eye]), actions, context) == pytest.approx(1.0)
    with pytest.raises(ValueError, match="no held-out transition of action 5"):
        prototype_gap(np.concatenate([eye, eye]), actions, context, num_actions=6)


def test_phase_shift_reads_the_displacement_later_minus_earlier():
    from zoo.olaf_world.clips import phase_shift

    rng = np.random.default_rng(0)
    before = rng.integers(0, 255, (3, 64, 64, 3)).astype(np.uint8)
    after = np.stack([np.roll(before[0], 3, axis=1), np.roll(before[1], -7, axis=0), before[2]])
    np.testing.assert_array_equal(phase_shift(before, after), [[3, 0], [0, -7], [0, 0]])
    with pytest.raises(ValueError, match="one shape"):
        phase_shift(before, after[:, :32])


def test_motion_teacher_tau_is_the_normalised_mean_shift_and_the_gate_sees_the_actions():
    from zoo.olaf_world import clips as clip_lib

    dm = LatentActionVideoDataModule(teacher="phase_correlation", steps_per_seed=6, use_cache=False)
    assert dm.teacher_dim == 2
    rng = np.random.default_rng(1)
    base = rng.integers(0, 255, (64, 64, 3)).astype(np.uint8)
    frames = np.stack([np.roll(base, -7 * k, axis=1) for k in range(4)])  # the view scrolls 7 px left each step
    clips = {"frames": frames, "frame_index": np.array([[0, 1, 2, 3]]), "world_seed": np.array([0])}
    np.testing.assert_allclose(dm.tau(clips), [[-1.0, 0.0]], atol=1e-6)
    np.testing.assert_allclose(dm.transition_targets(clips), [[-1.0, 0.0]] * 3, atol=1e-6)
    assert clip_lib.motion_features(frames)[-1].tolist() == [0.0, 0.0]  # the last frame has no successor


def test_recoloured_context_b_changes_only_b_and_keeps_the_motion():
    from zoo.olaf_world.clips import phase_shift, recolour

    same = LatentActionVideoDataModule(split="world", steps_per_seed=4, eval_seeds_per_context=1, use_cache=False)
    other = LatentActionVideoDataModule(
        split="world", steps_per_seed=4, eval_seeds_per_context=1, use_cache=False, context_b="recolour"
    )
    a, b = same.clips("val"), other.clips("val")
    in_b = b["context"] == 1
    np.testing.assert_array_equal(a["videos"][~in_b], b["videos"][~in_b])
    np.testing.assert_array_equal(recolour(a["videos"][in_b]), b["videos"][in_b])
    assert not np.array_equal(a["videos"][in_b], b["videos"][in_b])
    v = b["videos"][in_b]
    np.testing.assert_array_equal(
        phase_shift(v[:, 0], v[:, 1]), phase_shift(a["videos"][in_b][:, 0], a["videos"][in_b][:, 1])
    )


def test_zoomed_context_b_renders_smaller_tiles_only_in_b():
    from zoo.olaf_world.clips import collect

    normal = collect([50], steps=1, length=2, stride=1)
    zoomed = collect([0, 50], steps=1, length=2, stride=1, view_b=11)
    np.testing.assert_array_equal(normal["frames"][:2], collect([50], 1, 2, 1)["frames"][:2])
    np.testing.assert_array_equal(zoomed["frames"][:2], collect([0], 1, 2, 1)["frames"][:2])  # A is untouched
    assert not np.array_equal(zoomed["frames"][2:], normal["frames"])


def test_crafter_chunks_iterate_in_insertion_order_after_every_reset():
    """Crafter despawns random.choice of a chunk's creatures listed from a set hashed by id(): in a set, that
    order (and so the world) changed between processes. ordered_chunks keeps insertion order from every reset."""
    import crafter

    from zoo.olaf_world.clips import InsertionOrderedSet, ordered_chunks

    items = InsertionOrderedSet()
    for item in (object(), object(), object()):
        items.add(item)
    first, second, third = list(items)
    items.remove(second)
    assert list(items) == [first, third]
    env = crafter.Env(size=(64, 64), seed=3)
    ordered_chunks(env._world)
    for _ in range(2):  # the wrapped reset holds on every episode
        env.reset()
        chunks = env._world.chunks
        assert chunks and all(isinstance(objs, InsertionOrderedSet) for objs in chunks.values())
        assert sum(len(objs) for objs in chunks.values()) == len(env._world.objects)


def test_a_crafter_episode_renders_the_same_frames_in_another_process():
    import os
    import subprocess
    import sys

    from zoo.olaf_world.clips import play_crafter, start_material

    episode = "play_crafter(30, 120, 0, start_material(30, 'terrain'))"  # a world that despawns a creature
    code = f"import sys; from zoo.olaf_world.clips import *; sys.stdout.buffer.write({episode}[0].tobytes())"
    env = {**os.environ, "PYTHONHASHSEED": "7"}
    other = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, env=env)
    assert other.stdout == play_crafter(30, 120, 0, start_material(30, "terrain"))[0].tobytes()
