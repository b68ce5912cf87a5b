"""The Usage snippet of the DeepHA cards: rendered by ``zoo card``, run as written by ``tests/test_usage.py``.

It plays one held-out PutNextLocal episode greedily and ends with ``prediction: P | truth: T``: the agent's first
action against the action BabyAIBot takes in the same state.
"""

from string import Template

SNIPPET = Template("""
import contextlib, io
import gymnasium as gym
import minigrid  # registers the BabyAI levels
from minigrid.utils.baby_ai_bot import BabyAIBot
import zoo

model = zoo.load("$name", pretrained=True)
env = gym.make("BabyAI-PutNextLocal-v0")
with contextlib.redirect_stdout(io.StringIO()):  # the level prints "Sampling rejected" while it samples
    obs, _ = env.reset(seed=2_200_000)            # a test seed (training seeds are below 1,000,000)
policy = model.policy($window)                     # greedy Chain-of-Action agent
policy.reset(obs["mission"])
action = policy.act(obs["image"], obs["direction"])
names = ["left", "right", "forward", "pickup", "drop", "toggle", "done"]
print(obs["mission"], "->", names[action], "(skill, grounding):", policy.steps[-1][1:-1])
with contextlib.redirect_stdout(io.StringIO()):
    bot_action = int(BabyAIBot(env).replan())
print(f"prediction: {names[action]} | truth: {names[bot_action]}")
""")


def snippet(name: str) -> str:
    """The snippet for the entry ``name`` (the method acts with the compressed context, W = 4)."""
    return SNIPPET.substitute(name=name, window="window=4" if name != "deepha.flat" else "")
