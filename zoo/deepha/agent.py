"""Greedy DeepHA agents acting in BabyAI: full context, compressed memory, KV cache or full recompute.

At each step the agent appends ``OBS_t``, then generates the layout's action tokens in order (SKILL -> GND ->
MOT for CoA), each from the head of its type, greedily; it executes MOT. Earlier skills and groundings stay in
the context as "thoughts". The MOT token joins the cache together with the next step's OBS (one decoder call).

``use_cache=True`` extends transformers' KV cache by the new tokens; ``use_cache=False`` recomputes the whole
context for every generated token (the reference the cache must match). With ``window=W`` the context is
compressed (see :mod:`zoo.deepha.sequences`): at every multiple of ``W`` the cache is rebuilt from the
compressed prefix, in between it is extended.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import numpy as np
import torch

from zoo.deepha.demos import make_env, reset
from zoo.deepha.sequences import block_start, compressed_prefix
from zoo.deepha.vocab import GND_MAX, LAYOUTS, MOT, OBS, WORD, mission_tokens

HORIZON = 128  # every arm's episodes are cut here (a cut episode failed): 7 x 128 tokens fit the 1024 positions


@torch.no_grad()
def mission_codes(embedder, missions: list[list[int]]) -> torch.Tensor | None:
    """The OBS encoder's codes of each row's mission, or None when it does not read the mission (``mlp``)."""
    if not getattr(embedder, "needs_mission", False):  # also embedders without the attribute (the Crafter adapter)
        return None
    ids = torch.zeros(len(missions), max(len(m) for m in missions), dtype=torch.long)
    for i, mission in enumerate(missions):
        ids[i, : len(mission)] = torch.as_tensor(mission, dtype=torch.long)
    return embedder.mission_codes(ids)


def observe(embedder, images: torch.Tensor, dirs: torch.Tensor, codes: torch.Tensor | None) -> torch.Tensor:
    """OBS embeddings; ``codes`` (from :func:`mission_codes`, once per episode) only for a mission-aware encoder."""
    if codes is None:
        return embedder.observe(images, dirs)
    return embedder.observe(images, dirs, codes=codes)


class Policy:
    """A greedy agent over one decoder (``low`` adds the decoupled low-level decoder).

    Args:
        embedder: The token embedder.
        decoder: The (high-level) decoder.
        layout: Token types of a step (a ``LAYOUTS`` key or a tuple).
        window: Compression window W, or None for the full context.
        use_cache: Extend a KV cache (True) or recompute the context for every token (False).
        low: Decoupled arm's low-level decoder: maps the step's [OBS, skill, grounding] alone to MOT.
    """

    def __init__(self, embedder, decoder, layout="coa", window: int | None = None, use_cache=True, low=None):
        if window is not None and window < 1:
            raise ValueError(f"W: the compression window must be >= 1, got {window}")
        self.embedder, self.decoder, self.low = embedder, decoder, low
        self.layout = LAYOUTS[layout] if isinstance(layout, str) else tuple(layout)
        self.window, self.use_cache = window, use_cache

    # ------------------------------------------------------------------ context bookkeeping

    @torch.no_grad()
    def _embed(self, kind: int, value: int) -> torch.Tensor:
        return self.embedder(torch.tensor([[kind]]), torch.tensor([[value]]))[0, 0]

    def reset(self, mission: str | list[int]) -> None:
        self.mission = mission_tokens(mission) if isinstance(mission, str) else [int(w) for w in mission]
        self.codes = mission_codes(self.embedder, [self.mission])
        self.steps: list[list[tuple[int, int]]] = []
        self.obs: list[torch.Tensor] = []
        self.ctx: list[torch.Tensor] = [self._embed(WORD, w) for w in self.mission]
        self.cache, self.fed = None, 0
        self.context_lengths: list[int] = []
        self.last_logits: list[torch.Tensor] = []

    def _rebuild(self, t: int) -> None:
        prefix = compressed_prefix(self.steps, t)
        self.ctx = [self._embed(WORD, w) for w in self.mission] + [self._embed(k, v) for k, v in prefix]
        self.cache, self.fed = None, 0

    @torch.no_grad()
    def _feed(self) -> torch.Tensor:
        """The last hidden state of the context, through the cache or by recomputing everything."""
        if self.use_cache:
            new = torch.stack(self.ctx[self.fed :])[None]
            hidden, self.cache = self.decoder(new, cache=self.cache, use_cache=True)
            if self.cache is None:
                raise RuntimeError("the decoder returned no cache")
            self.fed = len(self.ctx)
        else:
            hidden, _ = self.decoder(torch.stack(self.ctx)[None])
        return hidden[0, -1]

    # ------------------------------------------------------------------ acting

    @torch.no_grad()
    def act(self, image: np.ndarray, direction: int) -> int:
        """The motor action for the observation (``obs['image']``, ``obs['direction']``)."""
        t = len(self.steps)
        if self.window is not None and t > 0 and block_start(t, self.window) == t:
            self._rebuild(t)
        obs = observe(self.embedder, torch.as_tensor(image)[None], torch.tensor([int(direction)]), self.codes)[0]
        self.obs.append(obs)
        self.ctx.append(obs)
        tokens = [(OBS, t)]
        motor = None
        for kind in self.layout[1:]:
            hidden = self._feed()
            logits = self.decoder.logits(hidden, kind)
            self.last_logits.append(logits)
            value = int(logits.argmax())
            tokens.append((kind, value))
            if kind == MOT:
                self.context_lengths.append(len(self.ctx))
                motor = value
            self.ctx.append(self._embed(kind, value))
        if motor is None:  # decoupled: the low-level decoder sees this step's tokens only
            self.context_lengths.append(len(self.ctx) - 1)
            step = torch.stack([obs] + self.ctx[len(self.ctx) - len(tokens) + 1 :])[None]
            hidden, _ = self.low(step)
            motor = int(self.low.logits(hidden[0, -1], MOT).argmax())
        self.steps.append(tokens)
        return motor

    def grounding(self) -> tuple[int, int] | None:
        """The last generated grounding (forward, right) offset, if the layout has one."""
        found = dict(self.steps[-1]) if self.steps else {}
        from zoo.deepha.vocab import GND_F, GND_R

        if GND_F in found:
            return found[GND_F] - GND_MAX, found[GND_R] - GND_MAX
        return None


class RandomPolicy:
    """The reference arm: uniformly random primitive actions (needs no learning)."""

    def __init__(self, seed: int = 0):
        self.rng = np.random.default_rng(seed)
        self.context_lengths: list[int] = []

    def reset(self, mission) -> None:
        self.context_lengths = []

    def act(self, image, direction) -> int:
        self.context_lengths.append(0)
        return int(self.rng.integers(7))


def run_episode(policy, level: str, seed: int, horizon: int = HORIZON, env=None) -> dict:
    """One greedy episode of ``level`` (environment seed ``seed``) cut at ``horizon`` steps.

    Returns:
        ``success`` (1.0 if the mission was completed), ``steps``, the context length at every motor decision
        (``context``), the policy's seconds (``seconds``) and the ``actions``.
    """
    env = env or make_env(level)
    obs, _ = reset(env, seed)
    policy.reset(obs["mission"])
    actions, seconds, reward, done = [], 0.0, 0.0, False
    limit = min(horizon, env.unwrapped.max_steps)
    while not done and len(actions) < limit:
        start = time.perf_counter()
        action = policy.act(obs["image"], obs["direction"])
        seconds += time.perf_counter() - start
        actions.append(action)
        obs, reward, terminated, truncated, _ = env.step(action)
        done = terminated or truncated
    return {
        "success": float(reward > 0),
        "steps": len(actions),
        "context": list(policy.context_lengths),
        "seconds": seconds,
        "actions": actions,
    }


class BatchPolicy:
    """:class:`Policy` over a batch of episodes in lockstep (for success rates; latency is timed unbatched).

    Rows of different lengths (missions, compressed prefixes) are left-padded and masked; positions are each
    row's own (re-indexed from 0 at its first real token), so a row sees exactly the context of :class:`Policy`.
    Every row appends the same number of tokens per call, and rows rebuild together (all rows are at the same
    step). Finished rows keep stepping on their last observation; their outputs are ignored.
    """

    def __init__(self, embedder, decoder, layout="coa", window: int | None = None, low=None):
        if window is not None and window < 1:
            raise ValueError(f"W: the compression window must be >= 1, got {window}")
        self.embedder, self.decoder, self.low = embedder, decoder, low
        self.layout = LAYOUTS[layout] if isinstance(layout, str) else tuple(layout)
        self.window = window

    @torch.no_grad()
    def _embed(self, kinds, values) -> torch.Tensor:
        return self.embedder(torch.tensor([list(kinds)]), torch.tensor([list(values)]))[0]

    @torch.no_grad()
    def _embed_column(self, kind: int, values) -> torch.Tensor:
        values = torch.as_tensor(values)
        return self.embedder(torch.full_like(values, kind)[:, None], values[:, None])[:, 0]

    def reset(self, missions: list[str]) -> None:
        self.missions = [mission_tokens(m) if isinstance(m, str) else list(m) for m in missions]
        self.codes = mission_codes(self.embedder, self.missions)
        self.steps = [[] for _ in missions]
        self.context_lengths = [[] for _ in missions]

    @torch.no_grad()
    def _start(self, rows: list[torch.Tensor]) -> torch.Tensor:
        """Feed per-row token embeddings of different lengths from scratch (left-padded); last hidden states."""
        longest = max(len(r) for r in rows)
        embeds = torch.zeros(len(rows), longest, rows[0].shape[-1])
        self.mask = torch.zeros(len(rows), longest, dtype=torch.long)
        positions = torch.zeros(len(rows), longest, dtype=torch.long)
        for i, row in enumerate(rows):
            embeds[i, longest - len(row) :] = row
            self.mask[i, longest - len(row) :] = 1
            positions[i, longest - len(row) :] = torch.arange(len(row))
        self.length = torch.tensor([len(r) for r in rows])
        hidden, self.cache = self.decoder(embeds, positions, None, True, self.mask)
        return hidden[:, -1]

    @torch.no_grad()
    def _extend(self, new: torch.Tensor) -> torch.Tensor:
        count = new.shape[1]
        positions = self.length[:, None] + torch.arange(count)[None]
        self.mask = torch.cat([self.mask, torch.ones(len(new), count, dtype=torch.long)], dim=1)
        hidden, self.cache = self.decoder(new, positions, self.cache, True, self.mask)
        self.length = self.length + count
        return hidden[:, -1]

    @torch.no_grad()
    def act(self, images: np.ndarray, dirs: np.ndarray) -> np.ndarray:
        """Motor actions ``[B]`` for the batch's observations ``[B, 7, 7, 3]`` and directions ``[B]``."""
        t = len(self.steps[0])
        obs = observe(self.embedder, torch.as_tensor(np.asarray(images)), torch.as_tensor(np.asarray(dirs)), self.codes)
        if t == 0 or (self.window is not None and block_start(t, self.window) == t):
            rows = []
            for i, mission in enumerate(self.missions):
                prefix = compressed_prefix(self.steps[i], t) if self.window is not None else []
                tokens = [(WORD, w) for w in mission] + prefix
                kinds, values = zip(*tokens, strict=True)
                rows.append(torch.cat([self._embed(kinds, values), obs[i : i + 1]]))
            hidden = self._start(rows)
        else:
            hidden = self._extend(torch.stack([self.pending, obs], dim=1))
        generated = {OBS: [t] * len(obs)}
        last = len(self.layout) - 2
        for n, kind in enumerate(self.layout[1:]):
            values = self.decoder.logits(hidden, kind).argmax(-1)
            generated[kind] = values.tolist()
            embeds = self._embed_column(kind, values)
            if n == last:  # the step's last token joins the cache with the next OBS
                self.pending = embeds
                for i in range(len(obs)):
                    self.context_lengths[i].append(int(self.length[i]))
            else:
                hidden = self._extend(embeds[:, None])
        for i in range(len(obs)):
            self.steps[i].append([(kind, generated[kind][i]) for kind in self.layout])
        if MOT in generated:
            return np.asarray(generated[MOT])
        tokens = [self._embed_column(k, generated[k]) for k in self.layout[1:]]
        hidden, _ = self.low(torch.stack([obs, *tokens], dim=1))
        return self.low.logits(hidden[:, -1], MOT).argmax(-1).numpy()


def run_episodes(
    policy: BatchPolicy, level: str, seeds: list[int], horizon: int = HORIZON, before_act: Callable | None = None
) -> list[dict]:
    """Greedy episodes of ``level``, one per seed, in lockstep (the same actions as :func:`run_episode`).

    Args:
        before_act: Called as ``before_act(envs, observations, actions, done)`` before each lockstep action
            (the oracle reference forces the bot's tokens there).
    """
    envs = [make_env(level) for _ in seeds]
    observations = [reset(env, seed)[0] for env, seed in zip(envs, seeds, strict=True)]
    policy.reset([o["mission"] for o in observations])
    limits = [min(horizon, env.unwrapped.max_steps) for env in envs]
    done = [False] * len(envs)
    rewards, actions = [0.0] * len(envs), [[] for _ in envs]
    while not all(done):
        if before_act is not None:
            before_act(envs, observations, actions, done)
        images = np.stack([o["image"] for o in observations])
        chosen = policy.act(images, np.array([o["direction"] for o in observations]))
        for i, env in enumerate(envs):
            if done[i]:
                continue
            actions[i].append(int(chosen[i]))
            observations[i], rewards[i], terminated, truncated, _ = env.step(int(chosen[i]))
            done[i] = terminated or truncated or len(actions[i]) >= limits[i]
    return [
        {
            "success": float(rewards[i] > 0),
            "steps": len(actions[i]),
            "actions": actions[i],
            "context": policy.context_lengths[i][: len(actions[i])],
        }
        for i in range(len(envs))
    ]
