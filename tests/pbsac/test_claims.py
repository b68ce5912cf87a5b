"""The issue's claims on Pendulum-v1 (MountainCar is off by default), as `zoo eval pbsac` measures them (slow)."""

from __future__ import annotations

import pytest

from zoo.eval.engine import Request, evaluation, measure
from zoo.eval.result import assemble


@pytest.mark.slow
def test_pbsac_certificates_separate_learning_and_cover():
    ev = evaluation("pbsac.pendulum")
    protocol = ev.protocol
    pieces = measure(ev.entry.name, Request())
    result = assemble(protocol, ev.entry.name, pieces, protocol.resolve(), seeds=protocol.seeds)
    by_id = {claim["id"]: claim for claim in result["claims"]}
    for claim_id in (
        "return_rel_gap",
        "certificate_non_vacuous",
        "kl_positive",
        "certificate_separates_learning",
        "coverage",
        "pbsac_beats_reference_untrained_return_mean",
        "pbsac_beats_reference_random_policy_return_mean",
        "pbsac_beats_reference_untrained_return_bound",
    ):
        assert by_id[claim_id]["holds"], by_id[claim_id]
    # Reported, not asserted (see the card): whether the i.i.d. bound under-covers on the RL data, and the
    # certificate against the reference critics and the untrained agent's complexity term (they fail here).
    for claim_id in (
        "coverage_iid_lower",
        "certificate_vs_reference_constant_critic",
        "certificate_vs_reference_constant_critic_random",
        "certificate_vs_reference_fitted_last_layer",
        "complexity_differs_from_untrained",
        "free_complexity_differs_from_untrained",
    ):
        assert claim_id in by_id
    assert all(result["arms"][arm]["n_seeds"] == 3 for arm in result["arms"])
