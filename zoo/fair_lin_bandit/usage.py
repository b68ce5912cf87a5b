"""The Usage snippet of the fair linear bandit cards: rendered by ``zoo card``, run by ``tests/test_usage.py``.

It ends with ``prediction: P | truth: T | tolerance: E``: the Nash regret of one run on a synthetic instance
against the card's mean Nash regret at that horizon.
"""

from string import Template

SNIPPET = Template("""
import zoo
from zoo.fair_lin_bandit.instances import build_instance
from zoo.fair_lin_bandit.regret import p_means_regret

policy = zoo.load("$name")  # no learned weights: the algorithm and its tuned constants
instance = build_instance("synthetic_decoy", seed=0)  # the card's synthetic test instance for seed 0: 200 arms
result = policy.run(instance.arms, instance.mu, horizon=2000, seed=0)
expected = result["expected"].mean(axis=0)  # per-round expected reward E[mu_x_t], mean over replicates
nash_regret = p_means_regret(expected, instance.mu.max(), p=0.0)  # mu* minus the geometric mean
card = zoo.get_entry("$name").metrics["nash_regret_2k_synthetic_decoy"]  # mean over the card's 10 test seeds
print(f"prediction: {nash_regret:.3f} | truth: {card:.3f} | tolerance: {0.5 * card:.3f}")  # one instance vs ten
""")


def snippet(name: str) -> str:
    """The snippet for the entry ``name``."""
    return SNIPPET.substitute(name=name)
