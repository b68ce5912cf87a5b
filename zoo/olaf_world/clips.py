"""Offline video clips with ground-truth actions (Crafter), and the teacher target tau cached per clip.

Plain numpy / torch, no Lightning. Crafter (``crafter==1.8.3``) renders a 64 x 64 top-down view; we play it with
the spec's persistent behaviour policy and keep the true actions for evaluation only.

* **Actions** (6 classes, Crafter's own indices 0-5): noop, move_left, move_right, move_up, move_down, do.
* **Behaviour policy** (the spec; the segment lengths for noop / do are our choice): each segment picks a
  movement with probability 0.8 (uniform over the four) and otherwise noop or do (uniform), and repeats it
  for 1-4 steps (uniform).
* **Determinism**: Crafter keeps each chunk's creatures in a ``set`` of objects hashed by ``id()`` and despawns
  ``random.choice`` of its list, so its worlds drifted apart between processes (the same seed rendered other
  frames after the first despawn). :func:`play_crafter` makes those sets iterate in insertion order
  (:class:`InsertionOrderedSet`), so a world seed gives the same frames in every process; ``CLIPS_VERSION`` keys
  the clip cache by it.
* **Contexts**: world seed ``s`` is context A when ``s < 50`` and context B otherwise. One episode of
  ``steps`` steps per world seed (an episode that ends early is reset with the same world seed).
* **Clips** of ``T`` frames: stride 1 windows for training (unlabeled), non-overlapping windows (stride
  ``T - 1``) for evaluation.

tau (SeqDelta-REPA's target) is ``normalize(mean_k (s_{k+1} - s_k))`` with ``s_k`` the spatially pooled frozen
features of frame ``k`` (EfficientNet-Lite0 at 64 px, 1280-d, per frame: the paper's V-JEPA 2 pools tubelets
of 2 frames). ``target="static"`` is the ablation ``normalize(mean_k s_k)``.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import numpy as np

from zoo.olaf_world.crafter_order import InsertionOrderedSet, ordered_chunks  # noqa: F401 (InsertionOrderedSet: API)

ACTION_NAMES = ("noop", "move_left", "move_right", "move_up", "move_down", "do")
NUM_ACTIONS = len(ACTION_NAMES)
ENVIRONMENTS = ("crafter", "ale")
# ALE (the spec's second domain): context A plays MsPacman, context B Alien (ale-py's bundled ROMs); they share
# the joystick directions. Labels use ACTION_NAMES' indices (no "do" in ALE: 5 classes).
ALE_GAMES = ("ms_pacman", "alien")
ALE_LABEL_ACTIONS = ("NOOP", "LEFT", "RIGHT", "UP", "DOWN")  # ACTION_NAMES[i] -> ALE joystick action
ALE_FRAMESKIP = 4  # emulator frames per policy step (ALE v5's default)
# emulator frames of NOOP after a reset before the policy plays: the games' intros (MsPacman's lasts ~270
# frames, Alien's ~40), plus 0-29 policy steps of NOOP drawn per episode so episodes start apart
ALE_INTRO_FRAMES = {"ms_pacman": 280, "alien": 60}
SPLITS = ("world", "terrain")
CONTEXT_B_FIRST_SEED = 50
TEACHERS = ("efficientnet_lite0", "random_efficientnet_lite0", "phase_correlation")
# how context B differs from A beyond the split: "same", "recolour" (inverted, channels rotated) or "zoom" (Crafter's
# view 11 x 11 tiles of 5 px instead of 9 x 9 of 7 px: a move scrolls 5 px instead of 7, every sprite is smaller)
CONTEXT_STYLES = ("same", "recolour", "zoom")
ZOOM_VIEW = 11
MOTION_RADIUS = 10  # largest shift (px) the phase-correlation readout looks for
MOTION_ROWS = 44  # rows of the frame it reads: the local view, not Crafter's static inventory rows below it
PLAYER_BOX = (slice(16, 34), slice(22, 42))  # rows, columns zeroed: the player sprite at the view's centre
TARGETS = ("delta", "static")
READOUTS = ("pooled", "keypoints")
CLIPS_VERSION = 2  # 2: Crafter's object sets iterate in insertion order (version 1 differed between processes)


def cache_dir() -> Path:
    """Rendered clips and teacher features: ``zoo._paths.cache_dir("olaf_world")`` (``$ZOO_CACHE_DIR/olaf_world``)."""
    from zoo._paths import cache_dir as paper_cache

    return paper_cache("olaf_world")


def check_env(env: str) -> None:
    """Raise a one-line ValueError naming ``env`` unless it is a supported environment."""
    if env not in ENVIRONMENTS:
        raise ValueError(f"env={env!r}: unknown environment; choose one of {', '.join(ENVIRONMENTS)}")


def context_of(world_seed: int | np.ndarray) -> int | np.ndarray:
    """0 (context A, world seeds 0-49) or 1 (context B, 50-99)."""
    return (np.asarray(world_seed) >= CONTEXT_B_FIRST_SEED).astype(np.int64)


def behaviour_actions(
    steps: int, rng: np.random.Generator, p_move: float = 0.8, max_repeat: int = 4, still: tuple = (0, 5)
) -> np.ndarray:
    """The persistent behaviour policy's action sequence of length ``steps``.

    Args:
        steps: Number of actions.
        rng: Random generator.
        p_move: Probability that a segment is a movement.
        max_repeat: Longest segment (segments last 1..max_repeat steps, uniform).
        still: The non-movement actions (uniform): noop and do in Crafter, noop only in ALE.
    """
    out = np.empty(steps, dtype=np.int64)
    t = 0
    while t < steps:
        action = int(rng.integers(1, 5)) if rng.random() < p_move else int(rng.choice(list(still)))
        length = int(rng.integers(1, max_repeat + 1))
        out[t : t + length] = action
        t += length
    return out


def start_tile(env, material: str, rng: np.random.Generator, clearance: int = 4) -> np.ndarray:
    """A free tile of ``material`` at least ``clearance`` tiles from lava and from the map's edge."""
    world = env._world
    ids = world._mat_map
    lava = np.argwhere(ids == world._mat_ids["lava"])
    tiles = np.argwhere(ids == world._mat_ids[material])
    inner = (tiles >= clearance).all(axis=1) & (tiles < np.array(world.area) - clearance).all(axis=1)
    tiles = tiles[inner]
    if len(lava):
        far = np.abs(tiles[:, None, :] - lava[None, :, :]).max(axis=2).min(axis=1) > clearance
        tiles = tiles[far]
    tiles = [t for t in tiles if world[tuple(t)][1] is None]
    if not tiles:
        raise RuntimeError(f"world has no free {material} tile away from lava")
    return np.array(tiles[int(rng.integers(len(tiles)))])


def play_crafter(
    world_seed: int, steps: int, policy_seed: int = 0, start: str | None = None, view: int = 9
) -> tuple[np.ndarray, np.ndarray]:
    """One episode of the behaviour policy in Crafter world ``world_seed``.

    Args:
        world_seed: Crafter's world seed.
        steps: Policy steps.
        policy_seed: Seed of the behaviour policy (combined with the world seed).
        start: ``None`` (Crafter's spawn, on grass) or a material (``"grass"``, ``"path"`` = caves) the
            player is moved onto after the reset (a random free tile away from lava).
        view: Tiles per side of Crafter's view (9, the default: 7 px tiles at 64 px; 11: 5 px tiles).

    Returns:
        frames ``(steps + 1, 64, 64, 3)`` uint8 and actions ``(steps,)`` int64 (action ``t`` leads from frame
        ``t`` to frame ``t + 1``).
    """
    try:
        import crafter
    except ImportError:
        from zoo._errors import MissingExtraError

        raise MissingExtraError("olaf_world's clips need crafter: pip install 'icml26-zoo[games]'") from None
    rng = np.random.default_rng([policy_seed, world_seed])
    actions = behaviour_actions(steps, rng)
    env = crafter.Env(size=(64, 64), seed=int(world_seed), view=(view, view))
    ordered_chunks(env._world)

    tile_rng = np.random.default_rng([policy_seed, world_seed, 1])

    def reset() -> np.ndarray:
        obs = env.reset()  # Crafter draws each reset's world from (seed, episode count): a new world each time
        if start is None:
            return obs
        env._world.move(env._player, start_tile(env, start, tile_rng))
        return env.render()

    frames = [reset()]
    for action in actions:
        obs, _, done, _ = env.step(int(action))
        frames.append(obs)
        if done:  # rare in 100-odd steps; the next frame is the start of the episode's next world
            frames[-1] = reset()
    return np.stack(frames).astype(np.uint8), actions


def _resize(frame: np.ndarray, size: int = 64) -> np.ndarray:
    from PIL import Image

    return np.asarray(Image.fromarray(frame).resize((size, size), Image.BILINEAR))


def ale_rom(game: str) -> str:
    """Path of ale-py's bundled ROM of ``game``; a one-line error when ale-py or the ROM is missing."""
    try:
        from ale_py import roms
    except ImportError:
        from zoo._errors import MissingExtraError

        raise MissingExtraError("olaf_world's ALE clips need ale-py: pip install 'icml26-zoo[games]'") from None
    try:
        path = roms.get_rom_path(game)
    except Exception:  # older ale-py raise on unknown ROMs instead of returning None
        path = None
    if path is None or not Path(path).is_file():
        raise FileNotFoundError(f"ALE ROM {game!r} is missing: ale-py>=0.9 bundles it (reinstall ale-py==0.12.1)")
    return str(path)


def play_ale(world_seed: int, steps: int, policy_seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """One episode of the behaviour policy (no ``do``) in MsPacman (world seed < 50) or Alien (>= 50).

    ``world_seed`` seeds the emulator; each policy step holds the joystick for :data:`ALE_FRAMESKIP` frames
    (no sticky actions). Frames are 210 x 160 screens resized to 64 x 64 (bilinear). A game over resets the game.

    Returns:
        frames ``(steps + 1, 64, 64, 3)`` uint8 and actions ``(steps,)`` int64 (indices of :data:`ACTION_NAMES`).
    """
    import ale_py

    game = ALE_GAMES[int(context_of(world_seed))]
    ale = ale_py.ALEInterface()
    ale.setLoggerMode(ale_py.LoggerMode.Error)
    ale.setInt("random_seed", int(world_seed))
    ale.setFloat("repeat_action_probability", 0.0)
    ale.loadROM(ale_rom(game))
    joystick = [getattr(ale_py.Action, name) for name in ALE_LABEL_ACTIONS]
    rng = np.random.default_rng([policy_seed, world_seed])
    actions = behaviour_actions(steps, rng, still=(0,))
    start_rng = np.random.default_rng([policy_seed, world_seed, 1])

    def reset() -> np.ndarray:
        ale.reset_game()
        for _ in range(ALE_INTRO_FRAMES[game] + ALE_FRAMESKIP * int(start_rng.integers(0, 30))):
            ale.act(joystick[0])
        return _resize(ale.getScreenRGB())

    frames = [reset()]
    for action in actions:
        for _ in range(ALE_FRAMESKIP):
            ale.act(joystick[int(action)])
        frames.append(reset() if ale.game_over() else _resize(ale.getScreenRGB()))
    return np.stack(frames).astype(np.uint8), actions


def start_material(world_seed: int, split: str) -> str | None:
    """Where an episode starts: Crafter's spawn (``"world"`` split) or grass (A) / a cave path (B) (``"terrain"``)."""
    if split not in SPLITS:
        raise ValueError(f"split={split!r}: choose one of {', '.join(SPLITS)}")
    if split == "world":
        return None
    return "grass" if world_seed < CONTEXT_B_FIRST_SEED else "path"


def windows(num_frames: int, length: int, stride: int) -> np.ndarray:
    """Start indices of the clips of ``length`` frames in an episode of ``num_frames`` frames."""
    return np.arange(0, num_frames - length + 1, stride)


def collect(
    world_seeds,
    steps: int,
    length: int,
    stride: int,
    policy_seed: int = 0,
    split: str = "world",
    env: str = "crafter",
    view_b: int = 9,
) -> dict[str, np.ndarray]:
    """Clips of ``length`` frames from one episode per world seed (``env="ale"``: MsPacman / Alien; ``split`` is
    then unused: the game is the context; ``view_b``: Crafter's view in context B, see :func:`play_crafter`).

    Returns:
        ``videos`` (N, T, 64, 64, 3) uint8, ``actions`` (N, T-1), ``context`` (N,), ``world_seed`` (N,),
        ``frame_index`` (N, T): the index of each frame in the episode's frame table ``frames`` (E, steps+1, ...),
        which is also returned, so a teacher runs once per frame, not once per clip.
    """
    if length < 2:
        raise ValueError(f"T={length}: a clip needs at least 2 frames (one action)")
    check_env(env)
    seeds = [int(s) for s in world_seeds]
    if env == "ale":
        episodes = [play_ale(s, steps, policy_seed) for s in seeds]
    else:
        views = [view_b if s >= CONTEXT_B_FIRST_SEED else 9 for s in seeds]
        episodes = [play_crafter(s, steps, policy_seed, start_material(s, split), v) for s, v in zip(seeds, views)]
    starts = windows(steps + 1, length, stride)
    offsets = starts[:, None] + np.arange(length)[None, :]
    videos, actions, frame_index, world = [], [], [], []
    for e, (frames, acts) in enumerate(episodes):
        videos.append(frames[offsets])
        actions.append(acts[offsets[:, :-1]])
        frame_index.append(e * (steps + 1) + offsets)
        world.append(np.full(len(starts), seeds[e]))
    world_seed = np.concatenate(world)
    return {
        "videos": np.concatenate(videos),
        "actions": np.concatenate(actions),
        "context": context_of(world_seed),
        "world_seed": world_seed,
        "frame_index": np.concatenate(frame_index),
        "frames": np.concatenate([f for f, _ in episodes]),
    }


def tau_from_features(features: np.ndarray, target: str = "delta") -> np.ndarray:
    """SeqDelta-REPA's target from per-frame features ``(N, T, D)``: unit vectors ``(N, D)``.

    Args:
        features: Spatially pooled teacher features of every frame of every clip.
        target: ``"delta"`` = normalize(mean_k (s_{k+1} - s_k)) (the paper); ``"static"`` = normalize(mean_k s_k)
            (the ablation that aligns to the clip's appearance instead of its change).
    """
    if target not in TARGETS:
        raise ValueError(f"target={target!r}: choose one of {', '.join(TARGETS)}")
    features = np.asarray(features, dtype=np.float64)
    if features.ndim != 3 or features.shape[1] < 2:
        raise ValueError(f"features must be (N, T >= 2, D), got shape {features.shape}")
    raw = np.diff(features, axis=1).mean(axis=1) if target == "delta" else features.mean(axis=1)
    norm = np.linalg.norm(raw, axis=1, keepdims=True)
    return (raw / np.maximum(norm, 1e-12)).astype(np.float32)


def keypoint_features(frames: np.ndarray, model, stride: int = 8, size: int = 64, batch_size: int = 256) -> np.ndarray:
    """Per-channel centroids ``(E[x], E[y])`` in [-1, 1] of the positive activations of EfficientNet-Lite0's last
    block at ``stride`` (40 channels at stride 8: ``(N, 80)``).

    A frozen "where" readout of the frozen network (spatial soft-argmax keypoints, as in deep spatial
    autoencoders): when the view scrolls, every centroid moves with it, whatever the content.
    """
    import torch

    from zoo.common.efficientnet import preprocess

    out = []
    with torch.no_grad():
        for start in range(0, len(frames), batch_size):
            x = preprocess(frames[start : start + batch_size], size=size)
            x = model._swish(model._bn0(model._conv_stem(x)))
            kept = None
            for block in model._blocks:
                x = block(x)
                if size // x.shape[-1] == stride:
                    kept = x
            if kept is None:
                raise ValueError(f"stride={stride}: EfficientNet-Lite0 has no block at that stride")
            m = kept.clamp_min(0)
            m = m / m.sum(dim=(2, 3), keepdim=True).clamp_min(1e-6)
            h, w = m.shape[-2:]
            ys, xs = torch.linspace(-1, 1, h)[:, None], torch.linspace(-1, 1, w)[None, :]
            out.append(np.concatenate([(m * xs).sum(dim=(2, 3)).numpy(), (m * ys).sum(dim=(2, 3)).numpy()], axis=1))
    return np.concatenate(out)


def teacher_features(
    frames: np.ndarray,
    teacher: str = "efficientnet_lite0",
    batch_size: int = 256,
    size: int = 64,
    grid: int | None = None,
    readout: str = "pooled",
) -> np.ndarray:
    """Features ``(N, 1280 * grid**2)`` of frames ``(N, 64, 64, 3)`` uint8 from a frozen EfficientNet-Lite0.

    Args:
        frames: The frames.
        teacher: ``"efficientnet_lite0"`` (ImageNet weights) or ``"random_efficientnet_lite0"`` (random init,
            seed 0: does the pretrained teacher matter?).
        batch_size: Frames per forward pass.
        size: Side the frames are resized to (64: the map is 2 x 2 cells; 128: 4 x 4).
        grid: ``None``: the spatially pooled vector (1280-d); ``g``: the map pooled to ``g x g`` cells, flattened.
        readout: ``"pooled"`` (the paper's spatial mean, or the ``grid`` map) or ``"keypoints"`` (80-d channel
            centroids at stride 8, :func:`keypoint_features`).
    """
    if teacher not in TEACHERS:
        raise ValueError(f"teacher={teacher!r}: choose one of {', '.join(TEACHERS)}")
    if teacher == "phase_correlation":  # a per-transition readout: row i is the motion from frame i to i + 1
        return motion_features(frames)
    from zoo.common import efficientnet

    if readout not in READOUTS:
        raise ValueError(f"readout={readout!r}: choose one of {', '.join(READOUTS)}")
    model = None if teacher == "efficientnet_lite0" else efficientnet.random_efficientnet_lite0(seed=0)
    if readout == "keypoints":
        return keypoint_features(frames, model or efficientnet.efficientnet_lite0(), size=size, batch_size=batch_size)
    return efficientnet.features(frames, size=size, batch_size=batch_size, model=model, grid=grid)


def teacher_dim(grid: int | None = None, readout: str = "pooled", teacher: str = "efficientnet_lite0") -> int:
    """Width of tau for a teacher map of ``grid x grid`` cells (``None``: pooled), 80 for keypoints, 2 for the
    phase-correlation motion readout."""
    if teacher == "phase_correlation":
        return 2
    return 80 if readout == "keypoints" else 1280 * (grid or 1) ** 2


def _key(*parts) -> str:
    return hashlib.sha256(repr(parts).encode()).hexdigest()[:12]


def cached_clips(
    env: str,
    world_seeds,
    steps: int,
    length: int,
    stride: int,
    policy_seed: int = 0,
    use_cache: bool = True,
    split: str = "world",
    view_b: int = 9,
) -> dict[str, np.ndarray]:
    """:func:`collect`, cached as ``.npz`` under :func:`cache_dir` (keyed by every argument)."""
    check_env(env)
    seeds = tuple(int(s) for s in world_seeds)
    key = (
        _key(seeds, steps, length, stride, policy_seed)
        if split == "world" or env == "ale"
        else _key(seeds, steps, length, stride, policy_seed, split)
    )
    if view_b != 9 and env == "crafter":
        key = _key(key, view_b)
    if env == "crafter":
        key = _key(key, f"v{CLIPS_VERSION}")
    path = cache_dir() / f"clips-{env}-{key}.npz"
    if use_cache and path.is_file():
        with np.load(path) as data:
            return {k: data[k] for k in data.files}
    clips = collect(seeds, steps, length, stride, policy_seed, split, env, view_b)
    if use_cache:
        tmp = path.with_suffix(f".tmp{os.getpid()}.npz")
        np.savez(tmp, **clips)
        tmp.replace(path)
    return clips


def cached_frame_features(
    clips: dict[str, np.ndarray],
    teacher: str,
    tag: str,
    use_cache: bool = True,
    size: int = 64,
    grid: int | None = None,
    readout: str = "pooled",
) -> np.ndarray:
    """Teacher features of every frame of ``clips["frames"]``, cached under ``tag`` (the clips' cache key)."""
    variant = "" if (size, grid) == (64, None) else f"-{size}px-g{grid}"
    variant += "" if readout == "pooled" else f"-{readout}"
    path = cache_dir() / f"features-{teacher}{variant}-{tag}.npy"
    if use_cache and path.is_file():
        return np.load(path)
    feats = teacher_features(clips["frames"], teacher, size=size, grid=grid, readout=readout)
    if use_cache:
        tmp = path.with_suffix(f".tmp{os.getpid()}.npy")
        np.save(tmp, feats)
        tmp.replace(path)
    return feats


def recolour(frames: np.ndarray) -> np.ndarray:
    """Context B's recoloured look: inverted intensities with the colour channels rotated (uint8 in, uint8 out)."""
    frames = np.asarray(frames)
    return (255 - frames[..., [2, 0, 1]]).astype(np.uint8)


def phase_shift(
    before: np.ndarray, after: np.ndarray, radius: int = MOTION_RADIUS, rows: int | None = MOTION_ROWS
) -> np.ndarray:
    """The global displacement ``(dx, dy)`` in pixels of ``after`` against ``before`` by phase correlation.

    A frozen, label-free motion readout (ours, a stand-in for the paper's video encoder): the grey frames' top
    ``rows`` rows with the mean removed and the box around the view's centre (where Crafter draws the player,
    who never scrolls) zeroed, the normalised cross-power spectrum ``F_after conj(F_before) / |...|``, and the
    peak of its inverse within ``radius`` pixels of zero. Positive ``dx`` = the content moved right, positive
    ``dy`` = down (later minus earlier). No window: a Hann window weights the static centre most (chosen on
    validation worlds among 8 variants, ``benchmarks/olaf_world/teacher_probe.py``).

    Args:
        before: Frames ``(N, H, W, 3)`` or ``(N, H, W)`` (any numeric type).
        after: Frames of the same shape.
        radius: Largest shift looked for.
        rows: Rows of each frame read (``None``: all).

    Returns:
        ``(N, 2)`` float32 of integer shifts ``(dx, dy)``.
    """
    before, after = np.asarray(before, np.float64), np.asarray(after, np.float64)
    if before.shape != after.shape or before.ndim not in (3, 4):
        raise ValueError(f"frames must be two (N, H, W[, 3]) arrays of one shape, got {before.shape}, {after.shape}")
    if before.ndim == 4:
        before, after = before.mean(axis=-1), after.mean(axis=-1)
    before, after = before[:, :rows], after[:, :rows]
    h, w = before.shape[1:]
    mask = np.ones((h, w))
    mask[PLAYER_BOX] = 0.0
    spectra = [np.fft.rfft2((f - f.mean(axis=(1, 2), keepdims=True)) * mask) for f in (before, after)]
    cross = spectra[1] * np.conj(spectra[0])
    surface = np.fft.irfft2(cross / np.maximum(np.abs(cross), 1e-9), s=(h, w))
    offsets = np.arange(-radius, radius + 1)
    local = surface[:, offsets[:, None] % h, offsets[None, :] % w]  # (N, dy, dx) around zero
    peak = local.reshape(len(local), -1).argmax(axis=1)
    dy, dx = np.unravel_index(peak, local.shape[1:])
    return np.stack([offsets[dx], offsets[dy]], axis=1).astype(np.float32)


def motion_features(frames: np.ndarray, batch_size: int = 1024) -> np.ndarray:
    """Per-frame motion ``(N, 2)`` of a frame table: row ``i`` is :func:`phase_shift` from frame ``i`` to ``i + 1``
    divided by 7 (Crafter's tile at 64 px); the last row is zero (it has no successor and no clip reads it)."""
    frames = np.asarray(frames)
    out = np.zeros((len(frames), 2), np.float32)
    for start in range(0, len(frames) - 1, batch_size):
        stop = min(start + batch_size, len(frames) - 1)
        out[start:stop] = phase_shift(frames[start:stop], frames[start + 1 : stop + 1]) / 7.0
    return out
