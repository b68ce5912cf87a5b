"""The issue's claims on Pendulum-v1, as `zoo eval pbsac` measures them (slow: about 10 minutes on 2 cores)."""

from __future__ import annotations

import pytest

from zoo.pbsac.evaluate import evaluate


@pytest.mark.slow
def test_pbsac_matches_sac_with_non_vacuous_covering_certificates():
    result = evaluate("pbsac.pendulum", seeds=[0, 1, 2])
    pbsac, sac = result["arms"]["pbsac"], result["arms"]["sac"]
    assert abs(pbsac["return_mean"] - sac["return_mean"]) / abs(sac["return_mean"]) <= 0.10, result["arms"]
    assert pbsac["certificate"] < 1.0, pbsac
    assert pbsac["coverage"] >= 0.95, pbsac
