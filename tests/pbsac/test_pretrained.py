"""The published checkpoints: offline load, score against the card, the stored certificate."""

from __future__ import annotations

import json

import pytest

import zoo
from zoo._serialization import read_config
from zoo.pbsac.evaluate import score_pretrained

ENTRIES = {"pbsac.pendulum": "pbsac", "pbsac.sac_pendulum": "sac"}


def _metrics(name: str) -> dict:
    return json.loads((zoo.get_entry(name).mirror_dir / "metrics.json").read_text())


@pytest.mark.parametrize("name, arm", ENTRIES.items())
def test_pretrained_return_reproduces_card(name, arm, hf_cache, hf_offline):
    """The checkpoint's 10 evaluation episodes are the card's seed-0 run: the eval scores the published weights."""
    metrics = _metrics(name)
    assert metrics["settings"]["eval_episodes"] == 10 and "0" in metrics["per_seed"][arm]
    score = score_pretrained(zoo.load(name, pretrained=True))["return_mean"]
    assert score == pytest.approx(metrics["per_seed"][arm]["0"]["return_mean"], rel=1e-5)


def test_published_certificate_moved_the_posterior_is_non_vacuous_and_covers():
    config = read_config(zoo.get_entry("pbsac.pendulum").mirror_dir)
    certificate = config["metadata"]["certificate"]
    assert certificate["step"] == config["metadata"]["env_steps"] == 15_000 and certificate["final"]
    assert certificate["kl"] > 0 and certificate["empirical_risk"] < certificate["value"] < 1.0
    assert certificate["episodes"] == 200 and certificate["n"] == 40_000 and certificate["delta"] == 0.05
    assert certificate["scale"] == pytest.approx(16.2736044**2, rel=1e-6)  # M from Pendulum's reward bounds
    assert certificate["covered"] and certificate["return_covered"]
    assert certificate["prior_widths"] == [1.0, 0.3, 0.1, 0.03] and certificate["value"] == min(
        certificate["width_values"]
    )
    assert certificate["prior_width"] in certificate["prior_widths"]
    assert certificate["return_bound"] < certificate["fresh_return"]


def test_score_pretrained_limits_episodes():
    module = zoo.load("pbsac.sac_pendulum")
    assert set(score_pretrained(module, limit=1)) == {"return_mean"}
