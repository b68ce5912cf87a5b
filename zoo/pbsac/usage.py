"""The Usage snippet of the PB-SAC cards: rendered by ``zoo card``, run as written by ``tests/test_usage.py``.

It ends with ``prediction: P | truth: T | tolerance: E``: the mean return of ten deterministic Pendulum episodes
against the card's mean return (episode returns vary with the start state, hence the wide tolerance).
"""

from string import Template

SNIPPET = Template("""
import gymnasium as gym
import torch
import zoo

model = zoo.load("$name", pretrained=True)
obs, _ = gym.make("Pendulum-v1").reset(seed=0)  # [cos, sin, angular velocity]
action = model(torch.as_tensor(obs, dtype=torch.float32)[None])  # torque in the environment's units, [-2, 2]
print("observation", obs.round(3), "-> torque", action.squeeze().item())
returns = model.evaluate_returns(list(range(1000, 1010)))  # ten deterministic episodes on unseen start states
card = zoo.get_entry("$name").metrics["return_mean"]
print(f"prediction: {returns.mean():.1f} | truth: {card:.1f} | tolerance: {0.5 * abs(card) + 50:.1f}")
""")


def snippet(name: str) -> str:
    """The snippet for the entry ``name``."""
    return SNIPPET.substitute(name=name)
