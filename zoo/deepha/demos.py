"""BabyAI demonstrations from minigrid's BabyAIBot with skill, hindsight-grounding and motor labels.

Per step ``t`` the demo stores the agent's 7x7x3 egocentric grid and direction (what the policy sees), the
motor action the bot chose, and two labels computed from the bot's plan:

* **skill**: the subgoal on top of the bot's stack when it chose the action (``GoNextTo``, ``Open``,
  ``Pickup``, ``Drop``, ``Explore`` (a ``GoNextTo`` pushed by exploration), ``Close``; ``none`` once the stack is
  empty), with the object's type and colour: from the subgoal's ``ObjDesc`` / object, for ``Open``, ``Pickup``
  and ``Close`` the object in front of the agent, for ``Drop`` the carried object; positions have none.
* **grounding (hindsight)**: a *segment* is a maximal run of steps with the same skill triple. The label of step
  ``t`` is the cell where the agent stands when its segment ends (after the segment's last action), in the
  egocentric frame of step ``t``: ``(forward, right) = ((c - p) . dir_vec, (c - p) . right_vec)``, clipped to
  [-12, 12] (the 22x22 mazes of Synth can place the end up to 20 cells away; clipping keeps the sign and the
  direction to walk, and the generation counts how often it happened).

Seeds: ``split_seed(split, level, i)`` keeps training, validation and test seeds disjoint (three separate
million-wide ranges, one 100k block per level).
"""

from __future__ import annotations

import contextlib
import io
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from zoo.deepha.vocab import COLOURS, GND_MAX, MOTOR, OBJ_TYPES, SKILL_TYPES, mission_tokens, skill_index

#: Appended levels keep every earlier level's seeds (a level's seed block is its index here): at most 10.
LEVELS = (
    "GoToLocal", "PickupLoc", "PutNextLocal", "UnlockLocal", "Synth", "GoTo", "BossLevel", "PutNextLocalS5N3",
    "OpenTwoDoors",
)  # fmt: skip
TRAIN_LEVELS = ("GoToLocal", "PickupLoc", "PutNextLocal", "UnlockLocal", "Synth")
MULTISTEP_LEVELS = ("PutNextLocal", "UnlockLocal", "Synth")


@dataclass(frozen=True)
class LevelSet:
    """The levels a fit trains on and the evaluation's multi-step subset of them.

    Attributes:
        train: Training levels (demos; success per level and ``success_all``).
        multistep: The levels whose mean is ``success_multistep`` (a subset of ``train``).
    """

    train: tuple[str, ...]
    multistep: tuple[str, ...]


#: ``default``: the spec's set (today's). ``two_step`` (issue #71): PutNextLocal (3-7% for every trained arm) and
#: Synth (flat 0.39) give way to two-step levels: PutNextLocalS5N3 (the same put-next task in a 5x5 room with 3
#: objects; bot 6.8 steps, 4.5 skill switches on 20 episodes) and OpenTwoDoors ("open the X door, then open the Y
#: door"; 13.9 steps, 5.0 switches), beside UnlockLocal (pick up the key, open the door; flat 0.85-0.95).
LEVEL_SETS = {
    "default": LevelSet(TRAIN_LEVELS, MULTISTEP_LEVELS),
    "two_step": LevelSet(
        ("GoToLocal", "PickupLoc", "PutNextLocalS5N3", "UnlockLocal", "OpenTwoDoors"),
        ("PutNextLocalS5N3", "UnlockLocal", "OpenTwoDoors"),
    ),
}


def level_set(name: str) -> LevelSet:
    """The level set ``name`` (a :data:`LEVEL_SETS` key)."""
    if name not in LEVEL_SETS:
        raise ValueError(f"level_set: expected one of {', '.join(LEVEL_SETS)}, got {name!r}")
    return LEVEL_SETS[name]


SPLITS = {"train": 0, "validation": 1_000_000, "test": 2_000_000}
MAX_MISSION = 32


def check_level(level: str) -> str:
    if level not in LEVELS:
        raise ValueError(f"level: unknown BabyAI level {level!r}; expected one of {', '.join(LEVELS)}")
    return level


def split_seed(split: str, level: str, index: int) -> int:
    """The environment seed of episode ``index`` of ``level`` in ``split`` (disjoint across splits)."""
    if split not in SPLITS:
        raise ValueError(f"split: expected one of {', '.join(SPLITS)}, got {split!r}")
    if not 0 <= index < 100_000:
        raise ValueError(f"index: expected 0 <= index < 100000, got {index}")
    return SPLITS[split] + LEVELS.index(check_level(level)) * 100_000 + index


def make_env(level: str):
    """A BabyAI environment (``BabyAI-<level>-v0``); import of minigrid registers them."""
    import gymnasium as gym
    import minigrid  # noqa: F401  (registers the BabyAI ids)

    return gym.make(f"BabyAI-{check_level(level)}-v0")


def reset(env, seed: int):
    """``env.reset(seed=seed)`` with the levels' "Sampling rejected" prints silenced."""
    with contextlib.redirect_stdout(io.StringIO()):
        return env.reset(seed=seed)


def egocentric(target, pos, dir_vec, right_vec) -> tuple[int, int]:
    """(forward, right) offset of cell ``target`` seen from ``pos`` facing ``dir_vec``."""
    delta = np.asarray(target) - np.asarray(pos)
    return int(delta @ np.asarray(dir_vec)), int(delta @ np.asarray(right_vec))


def bot_skill(bot) -> tuple[int, int, int]:
    """The skill triple of the subgoal on top of the bot's stack (call right after ``bot.replan()``)."""
    from minigrid.core.world_object import WorldObj
    from minigrid.envs.babyai.core.verifier import ObjDesc

    if not bot.stack:
        return skill_index("none", None, None)
    sub = bot.stack[-1]
    name = type(sub).__name__.removesuffix("Subgoal")
    if name == "GoNextTo" and sub.reason == "Explore":
        name = "Explore"
    obj = None
    if isinstance(sub.datum, ObjDesc):
        return skill_index(name, sub.datum.type, sub.datum.color)
    if isinstance(sub.datum, WorldObj):
        obj = sub.datum
    elif name in ("Open", "Pickup", "Close"):
        env = bot.mission.unwrapped
        obj = env.grid.get(*(env.agent_pos + env.dir_vec))
    elif name == "Drop":
        obj = bot.mission.unwrapped.carrying
    return skill_index(name, getattr(obj, "type", None), getattr(obj, "color", None))


def hindsight_grounding(skills: np.ndarray, positions: np.ndarray, end_position, dirs: np.ndarray):
    """Grounding labels: per step, the end cell of its skill segment in that step's egocentric frame.

    Args:
        skills: ``[T, 3]`` skill triples.
        positions: ``[T, 2]`` agent positions before each step's action.
        end_position: The agent's position after the last action.
        dirs: ``[T]`` agent directions (MiniGrid's 0..3) before each action.

    Returns:
        ``([T, 2] clipped offsets, number of clipped labels)``.
    """
    from minigrid.core.constants import DIR_TO_VEC

    steps = len(skills)
    after = np.concatenate([positions[1:], np.asarray(end_position)[None]], axis=0)  # position after step t
    labels = np.zeros((steps, 2), dtype=np.int64)
    end = steps - 1
    for t in range(steps - 1, -1, -1):
        if t < steps - 1 and not np.array_equal(skills[t], skills[t + 1]):
            end = t
        dir_vec = DIR_TO_VEC[int(dirs[t])]
        right_vec = np.array((-dir_vec[1], dir_vec[0]))
        labels[t] = egocentric(after[end], positions[t], dir_vec, right_vec)
    clipped = int((np.abs(labels) > GND_MAX).any(axis=1).sum())
    return np.clip(labels, -GND_MAX, GND_MAX), clipped


@dataclass
class Demos:
    """Episodes concatenated step-wise; episode ``e`` is rows ``starts[e]:starts[e + 1]``."""

    images: np.ndarray  # [N, 7, 7, 3] uint8
    dirs: np.ndarray  # [N] int64
    skills: np.ndarray  # [N, 3] int64
    grounding: np.ndarray  # [N, 2] int64 offsets in [-12, 12]
    motor: np.ndarray  # [N] int64
    positions: np.ndarray  # [N, 2] int64
    starts: np.ndarray  # [E + 1] int64
    missions: np.ndarray  # [E, MAX_MISSION] int64, 0-padded word ids
    levels: np.ndarray  # [E] int64 index into LEVELS
    seeds: np.ndarray  # [E] int64
    clipped: int = 0

    def __len__(self) -> int:
        return len(self.starts) - 1

    def episode(self, e: int) -> dict[str, np.ndarray]:
        a, b = int(self.starts[e]), int(self.starts[e + 1])
        mission = self.missions[e]
        return {
            "images": self.images[a:b],
            "dirs": self.dirs[a:b],
            "skills": self.skills[a:b],
            "grounding": self.grounding[a:b],
            "motor": self.motor[a:b],
            "mission": mission[mission > 0],
        }

    def lengths(self) -> np.ndarray:
        return np.diff(self.starts)

    def save(self, path: str | Path) -> None:
        np.savez_compressed(path, **{k: v for k, v in vars(self).items() if k != "clipped"}, clipped=self.clipped)

    @classmethod
    def load(cls, path: str | Path) -> Demos:
        """Read a demo file, checking every label's range (a bad file raises a ValueError naming the field)."""
        with np.load(path) as data:
            arrays = {k: data[k] for k in data.files}
        missing = [k for k in cls.__dataclass_fields__ if k not in arrays]
        if missing:
            raise ValueError(f"{path}: demo file lacks {', '.join(missing)}")
        demos = cls(**{k: (int(v) if k == "clipped" else v.astype(np.int64) if k != "images" else v)
                       for k, v in arrays.items()})  # fmt: skip
        demos.check(str(path))
        return demos

    def check(self, where: str = "demos") -> None:
        gnd = self.grounding
        if gnd.size and (gnd.min() < -GND_MAX or gnd.max() > GND_MAX):
            bad = gnd[(np.abs(gnd) > GND_MAX).any(axis=1)][0]
            raise ValueError(
                f"{where}: grounding offsets outside [-{GND_MAX}, {GND_MAX}] (e.g. {tuple(int(x) for x in bad)})"
            )
        for name, values, size in (
            ("motor", self.motor, len(MOTOR)),
            ("skills[:, 0]", self.skills[:, 0], len(SKILL_TYPES)),
            ("skills[:, 1]", self.skills[:, 1], len(OBJ_TYPES)),
            ("skills[:, 2]", self.skills[:, 2], len(COLOURS)),
            ("dirs", self.dirs, 4),
        ):
            if values.size and (values.min() < 0 or values.max() >= size):
                raise ValueError(f"{where}: {name} outside [0, {size - 1}]")
        if self.starts[0] != 0 or self.starts[-1] != len(self.motor) or (np.diff(self.starts) < 1).any():
            raise ValueError(f"{where}: starts must rise from 0 to the number of steps")


def bot_episode(level: str, seed: int, env=None) -> dict | None:
    """Run the bot on one episode; None when it fails (it solves the levels used here)."""
    from minigrid.utils.baby_ai_bot import BabyAIBot

    env = env or make_env(level)
    obs, _ = reset(env, seed)
    bot = BabyAIBot(env)
    base = env.unwrapped
    rec = {"images": [], "dirs": [], "skills": [], "motor": [], "positions": []}
    done, reward = False, 0.0
    while not done:
        with contextlib.redirect_stdout(io.StringIO()):
            action = int(bot.replan())
        rec["images"].append(obs["image"].astype(np.uint8))
        rec["dirs"].append(int(obs["direction"]))
        rec["skills"].append(bot_skill(bot))
        rec["motor"].append(action)
        rec["positions"].append(tuple(int(x) for x in base.agent_pos))
        obs, reward, terminated, truncated, _ = env.step(action)
        done = terminated or truncated
    if reward <= 0:
        return None
    out = {k: np.asarray(v, dtype=np.uint8 if k == "images" else np.int64) for k, v in rec.items()}
    out["grounding"], out["clipped"] = hindsight_grounding(
        out["skills"], out["positions"], tuple(int(x) for x in base.agent_pos), out["dirs"]
    )
    out["mission"] = mission_tokens(obs["mission"])
    return out


def generate(levels, episodes: int, split: str = "train", max_steps: int = 128, first: int = 0) -> Demos:
    """Bot demonstrations: ``episodes`` per level on ``split`` seeds; episodes over ``max_steps`` are skipped."""
    parts, starts, missions, level_ids, seeds, clipped = [], [0], [], [], [], 0
    for level in levels:
        env = make_env(level)
        index = first
        kept = 0
        while kept < episodes:
            seed = split_seed(split, level, index)
            index += 1
            ep = bot_episode(level, seed, env)
            if ep is None or len(ep["motor"]) > max_steps:
                continue
            kept += 1
            parts.append(ep)
            starts.append(starts[-1] + len(ep["motor"]))
            mission = np.zeros(MAX_MISSION, dtype=np.int64)
            mission[: len(ep["mission"])] = ep["mission"][:MAX_MISSION]
            missions.append(mission)
            level_ids.append(LEVELS.index(level))
            seeds.append(seed)
            clipped += ep["clipped"]

    def cat(key):
        return np.concatenate([p[key] for p in parts])

    demos = Demos(
        images=cat("images"), dirs=cat("dirs"), skills=cat("skills"), grounding=cat("grounding"),
        motor=cat("motor"), positions=cat("positions"), starts=np.asarray(starts, dtype=np.int64),
        missions=np.stack(missions), levels=np.asarray(level_ids, dtype=np.int64),
        seeds=np.asarray(seeds, dtype=np.int64), clipped=clipped,
    )  # fmt: skip
    demos.check()
    return demos
