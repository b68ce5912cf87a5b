"""reference_oracle_coa: forced tokens, the bot's labels at inference equal the demos' labels, the #71 gates."""

import numpy as np
import pytest
import torch

from zoo.deepha import evaluate as E
from zoo.deepha import oracle as O
from zoo.deepha.demos import bot_episode, make_env, reset, split_seed
from zoo.eval.result import assemble


class Heads:
    def logits(self, hidden, kind):
        return hidden  # the "logits" are the hidden states themselves

    def __call__(self, *args, **kwargs):
        return "called", args


def test_forcing_decoder_forces_rows_with_a_value_and_leaves_the_others():
    forcing = O.ForcingDecoder(Heads())
    hidden = torch.tensor([[0.0, 5.0, 1.0], [3.0, 0.0, 1.0], [0.0, 0.0, 9.0]])
    assert forcing.logits(hidden, 2).argmax(-1).tolist() == [1, 0, 2]  # nothing forced: the decoder's own
    forcing.forced = {2: [2, -1, 0]}
    assert forcing.logits(hidden, 2).argmax(-1).tolist() == [2, 0, 0]  # row 1 (-1) keeps its own choice
    assert forcing.logits(hidden, 3).argmax(-1).tolist() == [1, 0, 2]  # another token type is not forced
    forcing.forced = {2: [1]}
    assert forcing.logits(hidden[0], 2).argmax(-1).item() == 1  # one row without a batch axis (Policy)
    assert forcing(1, x=2) == ("called", (1,))


@pytest.mark.parametrize("level", ["GoToLocal", "PutNextLocal", "UnlockLocal"])
def test_bot_tokens_equal_the_demo_labels_when_the_agent_follows_the_bot(level):
    """Played along the bot's own actions, the oracle's tokens are exactly the demo's skill and hindsight grounding
    (with and without the end cell kept from the previous step)."""
    from minigrid.utils.baby_ai_bot import BabyAIBot

    seed = split_seed("validation", level, 3)
    demo = bot_episode(level, seed)
    for keep in (True, False):
        env = make_env(level)
        reset(env, seed)
        bot = BabyAIBot(env)
        known, actions = None, []
        for t in range(len(demo["motor"])):
            skill, gnd, action, end = O.bot_tokens(env, bot, None, known if keep else None)
            known = (skill, end)
            assert skill == tuple(int(v) for v in demo["skills"][t]), (keep, t)
            assert gnd == tuple(int(v) for v in demo["grounding"][t]), (keep, t)
            actions.append(action)
            env.step(action)
        assert actions == [int(a) for a in demo["motor"]]


def test_bot_tokens_follow_an_agent_that_deviates():
    """After an action the bot did not suggest, the bot replans from the new state (advising mode)."""
    from minigrid.utils.baby_ai_bot import BabyAIBot

    env = make_env("GoToLocal")
    reset(env, split_seed("validation", "GoToLocal", 0))
    bot = BabyAIBot(env)
    _, _, suggested, _ = O.bot_tokens(env, bot, None)
    other = 0 if suggested != 0 else 1  # turn the other way
    env.step(other)
    skill, gnd, _, _ = O.bot_tokens(env, bot, other)
    assert all(-12 <= g <= 12 for g in gnd) and skill[0] != 0  # a plan, not "none"


def _result(flat, oracle):
    """A result whose flat / oracle per-level successes are given per seed; the other arms are filler."""
    levels = ("gotolocal", "pickuploc", "putnextlocal", "unlocklocal", "synth")
    pieces = []
    for arm in E.PROTOCOL.arms:
        for seed in (0, 1, 2):
            scores = {f"success_{lv}": 0.5 for lv in levels}
            scores.update(success_multistep=0.5, success_all=0.5, context_tokens_mean=10.0, ms_per_step=1.0)
            if arm == "coa_compressed":
                scores.update(kv_speedup=2.0, identical_actions=1.0)
            if arm in ("flat", "reference_oracle_coa"):
                values = (flat if arm == "flat" else oracle)[seed]
                scores.update({f"success_{lv}": v for lv, v in zip(("putnextlocal", "unlocklocal", "synth"), values)})
                scores["success_multistep"] = float(np.mean(values))
            pieces.append({"arm": arm, "seed": seed, "scores": scores})
    settings = E.PROTOCOL.resolve()
    result = assemble(E.PROTOCOL, "deepha", pieces, settings, seeds=[0, 1, 2])
    return {claim["id"]: claim for claim in result["claims"]}


def test_gates_hold_only_when_every_level_and_seed_holds():
    good = {0: (0.6, 0.9, 0.5), 1: (0.5, 0.8, 0.7), 2: (0.7, 0.9, 0.6)}
    oracle = {seed: tuple(v + 0.2 for v in values) for seed, values in good.items()}
    claims = _result(good, oracle)
    flat_gate, oracle_gate = claims["headroom_flat_each_multistep_level"], claims["headroom_oracle_coa_above_flat"]
    assert flat_gate["holds"] and flat_gate["kind"] == "headroom" and flat_gate["value"] == pytest.approx(0.5)
    assert oracle_gate["holds"] and oracle_gate["value"] == pytest.approx(0.2)
    bad = {**good, 1: (0.5, 0.8, 0.49)}  # one level of one seed under 0.5
    assert not _result(bad, oracle)["headroom_flat_each_multistep_level"]["holds"]
    close = {**oracle, 2: tuple(v + 0.05 for v in good[2])}  # one seed's oracle only 5 points above flat
    gate = _result(good, close)["headroom_oracle_coa_above_flat"]
    assert not gate["holds"] and gate["value"] == pytest.approx(0.05)


def test_the_oracle_rollout_feeds_the_bots_tokens_not_the_models(monkeypatch):
    """A toy CoA model whose own grounding is always -12 forward (never the bot's in a local room): every step the
    policy puts in its context carries the bot's skill and grounding tokens."""
    from zoo.deepha import agent
    from zoo.deepha.demos import split_seed
    from zoo.deepha.module import DeepHAModule
    from zoo.deepha.vocab import GND_F, GND_MAX, GND_R, SKILL

    torch.manual_seed(0)
    model = DeepHAModule(arm="coa", d_model=32, n_layer=1, n_head=2, max_len=1024).eval()
    with torch.no_grad():
        head = model.decoder.heads[str(GND_F)]
        head.weight.zero_()
        head.bias.fill_(-10.0)
        head.bias[0] = 10.0  # the model's own choice: offset -12
    given, policies = [], []

    original = O.bot_tokens

    def recording_bot_tokens(*args, **kwargs):
        given.append(original(*args, **kwargs))
        return given[-1]

    monkeypatch.setattr(O, "bot_tokens", recording_bot_tokens)

    class Recording(agent.BatchPolicy):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            policies.append(self)

    monkeypatch.setattr(agent, "BatchPolicy", Recording)
    seed = split_seed("validation", "GoToLocal", 1)
    runs = O.oracle_episodes(model, "GoToLocal", [seed], horizon=6, window=4)
    steps = policies[0].steps[0]
    assert runs[0]["bot_failed"] == 0.0 and len(steps) == runs[0]["steps"] == len(given)
    for step, (skill, gnd, _, _) in zip(steps, given, strict=True):
        tokens = dict(step)
        assert tuple(tokens[k] for k in SKILL) == skill
        assert (tokens[GND_F] - GND_MAX, tokens[GND_R] - GND_MAX) == gnd
    assert any(dict(step)[GND_F] != 0 for step in steps)  # the model's own value would be 0 (-12) everywhere
