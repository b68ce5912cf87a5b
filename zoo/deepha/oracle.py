"""``reference_oracle_coa`` (issue #71): CoA acting with the bot's skill and grounding tokens forced at every step.

Teacher forcing at inference, the hierarchy's upper bound: :class:`ForcingDecoder` answers the skill and grounding
heads with given tokens, :func:`bot_tokens` asks the BabyAI bot for them at the agent's current state (labelled as
the demos label them), and :func:`oracle_episodes` plays lockstep episodes with them; the model chooses only the
motor token. Scored by :func:`zoo.deepha.evaluate.score_oracle`.
"""

from __future__ import annotations

import numpy as np


class ForcingDecoder:
    """A decoder whose heads answer given tokens: ``forced[kind]`` holds one value per row, -1 where the row's
    own greedy choice stands (every other call goes to ``decoder``)."""

    def __init__(self, decoder):
        self.decoder, self.forced = decoder, {}

    def __call__(self, *args, **kwargs):
        return self.decoder(*args, **kwargs)

    def logits(self, hidden, kind: int):
        import torch

        logits = self.decoder.logits(hidden, kind)
        if kind not in self.forced:
            return logits
        values = torch.as_tensor(self.forced[kind], dtype=torch.long).reshape(logits.shape[:-1])
        rows = values >= 0
        chosen = torch.full_like(logits, float("-inf"))
        chosen[rows, values[rows]] = 0.0
        return torch.where(rows[..., None], chosen, logits)


def bot_tokens(env, bot, taken: int | None, known: tuple | None = None, horizon: int = 128) -> tuple:
    """The bot's skill triple, hindsight grounding and suggested action at the current state (as the demos label).

    ``bot.replan`` is told the agent's last action ``taken`` (None: the bot's own suggestion was taken), so the
    bot follows the agent. The grounding is the cell where the agent would stand when the bot, acting from here on
    a copy of the episode, ends the current skill segment (:func:`~zoo.deepha.demos.hindsight_grounding`), in
    the current egocentric frame, clipped to +-GND_MAX. ``known`` is the previous step's ``(skill, end cell)`` when
    the agent took the bot's suggestion: the bot's copy already played this segment, so an unchanged skill keeps
    its end cell (MiniGrid's steps are deterministic) instead of playing it again.

    Returns:
        ``(skill, (forward, right), suggested action, end cell)``.
    """
    import contextlib
    import copy
    import io

    from minigrid.core.constants import DIR_TO_VEC

    from zoo.deepha.demos import bot_skill, egocentric
    from zoo.deepha.vocab import GND_MAX

    with contextlib.redirect_stdout(io.StringIO()):
        suggested = action = int(bot.replan(taken))
        skill = bot_skill(bot)
        base = env.unwrapped
        pos, direction = tuple(int(x) for x in base.agent_pos), int(base.agent_dir)
        end = known[1] if known is not None and known[0] == skill else None
        sim_env, sim_bot = copy.deepcopy((env, bot)) if end is None else (env, None)
        for _ in range(horizon if end is None else 0):
            _, _, terminated, truncated, _ = sim_env.step(action)
            end = tuple(int(x) for x in sim_env.unwrapped.agent_pos)
            if terminated or truncated:
                break
            action = int(sim_bot.replan())
            if bot_skill(sim_bot) != skill:
                break
    end = pos if end is None else end
    dir_vec = DIR_TO_VEC[direction]
    offset = egocentric(end, pos, dir_vec, np.array((-dir_vec[1], dir_vec[0])))
    return skill, tuple(int(np.clip(v, -GND_MAX, GND_MAX)) for v in offset), suggested, end


def oracle_episodes(model, level: str, seeds: list[int], horizon: int, window: int | None) -> list[dict]:
    """Greedy episodes in lockstep with the bot's skill and grounding tokens forced at every step (teacher forcing
    at inference); the model chooses only the motor token. ``bot_failed`` counts steps where the bot could not
    follow the agent (an assertion in its plan): from there the row's model predicts its own tokens."""
    from minigrid.utils.baby_ai_bot import BabyAIBot

    from zoo.deepha.agent import BatchPolicy, run_episodes
    from zoo.deepha.vocab import GND_F, GND_MAX, GND_R, SKILL

    model.eval()
    forcing = ForcingDecoder(model.decoder)
    policy = BatchPolicy(model.embedder, forcing, model.layout, window, model.low)
    n = len(seeds)
    bots, suggested, failed, known = [], [None] * n, [False] * n, [None] * n
    tokens = [(-1, -1, -1, -1, -1)] * n

    def force_bot_tokens(envs, observations, actions, done) -> None:
        if not bots:  # after the reset: the bot reads the episode's mission and grid
            bots.extend(BabyAIBot(env) for env in envs)
        for i in range(n):
            if done[i] or failed[i]:
                continue
            taken = actions[i][-1] if actions[i] else None
            try:
                followed = taken == suggested[i]
                skill, gnd, suggested[i], end = bot_tokens(envs[i], bots[i], None if followed else taken,
                                                           known[i] if followed else None)  # fmt: skip
                tokens[i], known[i] = (*skill, gnd[0] + GND_MAX, gnd[1] + GND_MAX), (skill, end)
            except (AssertionError, AttributeError, TypeError, ValueError, IndexError):
                failed[i], tokens[i] = True, (-1, -1, -1, -1, -1)
        forcing.forced = {kind: [row[j] for row in tokens] for j, kind in enumerate((*SKILL, GND_F, GND_R))}

    runs = run_episodes(policy, level, seeds, horizon, before_act=force_bot_tokens)
    return [{"success": r["success"], "steps": r["steps"], "bot_failed": float(failed[i])}
            for i, r in enumerate(runs)]  # fmt: skip
