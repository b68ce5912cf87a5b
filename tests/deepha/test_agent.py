"""KV cache vs recompute, the agent's context vs the compression rule, determinism, and limits."""

import numpy as np
import pytest
import torch

from zoo.deepha.agent import Policy, run_episode
from zoo.deepha.sequences import context


@pytest.mark.parametrize("window", [None, 4])
def test_cached_and_uncached_logits_agree(coa_module, window):
    runs = {}
    for use_cache in (True, False):
        policy = coa_module.policy(window=window, use_cache=use_cache)
        runs[use_cache] = (run_episode(policy, "Synth", 3, horizon=12), policy.last_logits)
    (cached, cached_logits), (plain, plain_logits) = runs[True], runs[False]
    assert cached["actions"] == plain["actions"]
    assert len(cached_logits) == len(plain_logits) == 6 * 12
    for a, b in zip(cached_logits, plain_logits, strict=True):
        torch.testing.assert_close(a, b, atol=1e-5, rtol=0)


@pytest.mark.parametrize("window", [None, 2, 4])
def test_agent_context_is_the_compression_rule(random_coa, window):
    policy = random_coa.policy(window=window)
    result = run_episode(policy, "Synth", 4, horizon=10)
    for t in range(result["steps"]):
        # at the motor decision the context is the rule's context of step t minus the MOT token itself
        assert policy.context_lengths[t] == len(context(policy.mission, policy.steps, t, window)) - 1


def test_greedy_rollout_is_deterministic(coa_module):
    first = run_episode(coa_module.policy(window=4), "PutNextLocal", 7, horizon=20)
    second = run_episode(coa_module.policy(window=4), "PutNextLocal", 7, horizon=20)
    assert first["actions"] == second["actions"] and first["context"] == second["context"]


def test_context_past_the_maximum_length_is_refused():
    from zoo.deepha.module import DeepHAModule

    torch.manual_seed(0)
    small = DeepHAModule(arm="coa", max_len=32).eval()
    with pytest.raises(ValueError, match="context: position 3[23] passes the maximum length 32"):
        run_episode(small.policy(), "GoToLocal", 0, horizon=10)


def test_bad_window_and_arm():
    from zoo.deepha.module import DeepHAModule

    with pytest.raises(ValueError, match="W: "):
        DeepHAModule(window=0)
    with pytest.raises(ValueError, match="arm: expected one of"):
        DeepHAModule(arm="vla")
    with pytest.raises(ValueError, match="obs_encoder: expected one of mlp, film, got 'cnn'"):
        DeepHAModule(obs_encoder="cnn")
    with pytest.raises(ValueError, match="W: "):
        Policy(None, None, "coa", window=0)


def test_random_reference_runs():
    from zoo.deepha.agent import RandomPolicy

    result = run_episode(RandomPolicy(0), "GoToLocal", 1)
    assert result["steps"] >= 1 and np.all(np.asarray(result["actions"]) < 7)


@pytest.mark.parametrize(
    "arm,window,encoder", [("coa", None, "mlp"), ("coa", 4, "mlp"), ("decoupled", None, "mlp"), ("coa", 4, "film")]
)
def test_batched_episodes_match_one_at_a_time(arm, window, encoder):
    from zoo.deepha.agent import run_episodes
    from zoo.deepha.demos import split_seed
    from zoo.deepha.module import DeepHAModule

    torch.manual_seed(1)
    module = DeepHAModule(arm=arm, obs_encoder=encoder).eval()
    seeds = [split_seed("validation", "PickupLoc", i) for i in range(4)]
    single = [run_episode(module.policy(window=window), "PickupLoc", s, horizon=9) for s in seeds]
    batch = run_episodes(module.batch_policy(window), "PickupLoc", seeds, horizon=9)
    for a, b in zip(single, batch, strict=True):
        assert a["actions"] == b["actions"] and a["context"] == b["context"] and a["success"] == b["success"]
