"""The numpy ANM: a valid Hessian, a soft mode along AdK's closure, calibrated samples."""

import numpy as np
import pytest

from zoo.promise.anm import ANMSampler, anm_hessian, anm_modes, overlap
from zoo.promise.metrics import kabsch_rmsd


def test_hessian_is_symmetric_with_six_rigid_zero_modes(adk):
    open_state = adk["states"][0]
    hessian = anm_hessian(open_state)
    assert hessian.shape == (642, 642)
    np.testing.assert_allclose(hessian, hessian.T, atol=1e-12)
    values = np.linalg.eigvalsh(hessian)
    assert np.all(np.abs(values[:6]) < 1e-8) and values[6] > 1e-3
    # A translation is a zero mode.
    shift = np.tile([1.0, 0.0, 0.0], 214)
    assert np.abs(hessian @ shift).max() < 1e-10


def test_a_soft_mode_overlaps_the_open_to_closed_change(adk):
    open_state, closed_state = adk["states"]  # closed is superposed onto open
    _, modes = anm_modes(open_state, 3)
    overlaps = [abs(overlap(mode, closed_state - open_state)) for mode in modes]
    assert max(overlaps) >= 0.5  # measured 0.79 (mode 1); the literature says about 0.6


def test_sampler_is_calibrated_and_seeded(adk):
    open_state = adk["states"][0]
    sampler = ANMSampler(open_state, target_rmsd=3.0)
    first = sampler.sample(200, np.random.default_rng(0))
    assert np.array_equal(first, sampler.sample(200, np.random.default_rng(0)))
    assert float(kabsch_rmsd(first, open_state).mean()) == pytest.approx(3.0, abs=0.3)


def test_bad_anm_input():
    with pytest.raises(ValueError, match=r"\(L, 3\)"):
        anm_hessian(np.zeros((10, 2)))
    with pytest.raises(ValueError, match="disconnected"):
        anm_modes(np.array([[0.0, 0, 0], [1, 0, 0], [50, 0, 0], [51, 1, 0], [100, 0, 0]]) * 3, 3, cutoff=5.0)
