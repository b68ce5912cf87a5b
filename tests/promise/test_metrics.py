"""The metrics against MDAnalysis and tmtools, their invariances, hand-computed values and bad inputs."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from zoo.promise import metrics
from zoo.promise.harness import Target, score_ensembles


def test_open_closed_rmsd_is_the_specs_6_91(adk):
    open_state, closed_state = adk["states"]
    assert float(metrics.kabsch_rmsd(open_state, closed_state)) == pytest.approx(6.91, abs=0.05)


def test_rmsd_equals_mdanalysis_to_1e_6(adk):
    from MDAnalysis.analysis import rms

    open_state, closed_state = adk["states"]
    rng = np.random.default_rng(0)
    frames = adk["trajectories"]["tmd"][::9]
    noisy = open_state + rng.normal(0, 2.0, (5, *open_state.shape))
    reflected = closed_state * np.array([1.0, 1.0, -1.0])  # a mirror image: Kabsch must stay proper
    for mobile in [closed_state, reflected, *frames, *noisy]:
        for reference in (open_state, closed_state):
            ours = float(metrics.kabsch_rmsd(mobile, reference))
            theirs = rms.rmsd(mobile, reference, center=True, superposition=True)
            assert ours == pytest.approx(theirs, abs=1e-6)
    batched = metrics.kabsch_rmsd(torch.as_tensor(frames)[:, None], torch.as_tensor(adk["states"])[None])
    assert batched.shape == (len(frames), 2)
    assert float(batched[3, 1]) == pytest.approx(rms.rmsd(frames[3], closed_state, center=True, superposition=True))


def test_tm_d0_of_adk_is_5_44():
    assert metrics.tm_d0(214) == pytest.approx(5.44, abs=0.01)
    assert metrics.tm_d0(10) == 0.5


def _tm_align(a, b):
    import tmtools

    sequence = "A" * len(a)
    return tmtools.tm_align(np.ascontiguousarray(a), np.ascontiguousarray(b), sequence, sequence)


def _aligned_pairs(result) -> np.ndarray:
    """``(P, 2)`` residue index pairs of TM-align's alignment (its gapped strings)."""
    i = j = 0
    pairs = []
    for a, b in zip(result.seqxA, result.seqyA):
        if a != "-" and b != "-":
            pairs.append((i, j))
        i, j = i + (a != "-"), j + (b != "-")
    return np.array(pairs)


def test_tm_score_against_tmtools(adk):
    """Ours is at most TM-align's (+1e-3), read on TM-align's own superposition; equal on near twins.

    TM-align may change the correspondence, so its score bounds a fixed-correspondence score only where its
    alignment search finds the identity. On the AdK end states it returns a gapped alignment (about 30 gaps,
    ~25 residues paired off the identity) that scores *below* the identity correspondence under TM-align's own
    rotation (open vs closed: TM-align 0.68816, identity pairs under its rotation 0.68943, ours 0.68977), so
    there ours exceeds TM-align's number by up to 0.0026. It is TM-align's heuristic, not our d0 or
    normalisation: our formula on TM-align's alignment and rotation reproduces its score to 1e-4. The bound
    is therefore checked against the better of TM-align's two readings of its own superposition (its alignment,
    or the identity pairs), with the issue's +1e-3.
    """
    open_state, closed_state = adk["states"]
    rng = np.random.default_rng(1)
    pairs = [(open_state, closed_state), (adk["trajectories"]["dims1"][-1], closed_state)]
    pairs += [(adk["trajectories"]["tmd"][0], open_state)]
    pairs += [(frame, state) for frame in adk["trajectories"]["dims1"][::24] for state in (open_state, closed_state)]
    pairs += [(open_state + rng.normal(0, s, open_state.shape), open_state) for s in (0.1, 0.5, 1.0)]
    ours = metrics.tm_score(
        torch.as_tensor(np.stack([a for a, _ in pairs])), torch.as_tensor(np.stack([b for _, b in pairs]))
    )
    d0 = metrics.tm_d0(len(open_state))

    def formula(distances):
        return float((1.0 / (1.0 + (distances / d0) ** 2)).sum() / len(open_state))

    gapped = above = 0
    for (a, b), score in zip(pairs, ours.tolist()):
        result = _tm_align(a, b)
        moved = a @ result.u.T + result.t
        aligned = _aligned_pairs(result)
        # Same d0 and normalisation: the formula on TM-align's alignment and rotation gives its score.
        assert formula(np.linalg.norm(moved[aligned[:, 0]] - b[aligned[:, 1]], axis=1)) == pytest.approx(
            result.tm_norm_chain2, abs=1e-4
        )
        identity_under_theirs = formula(np.linalg.norm(moved - b, axis=1))
        identity = "-" not in result.seqxA and "-" not in result.seqyA
        gapped += not identity
        if identity:
            assert score <= result.tm_norm_chain2 + 1e-3, (score, result.tm_norm_chain2)
        assert score <= max(result.tm_norm_chain2, identity_under_theirs) + 1e-3
        if score > result.tm_norm_chain2 + 1e-3:  # only where TM-align's alignment loses to the identity
            above += 1
            assert not identity and identity_under_theirs > result.tm_norm_chain2
    assert 0 < gapped < len(pairs) and above >= 2  # both cases exercised; the end states are the gapped ones
    near = open_state + rng.normal(0, 0.2, open_state.shape)
    assert float(metrics.tm_score(near, open_state)) == pytest.approx(
        _tm_align(near, open_state).tm_norm_chain2, abs=0.01
    )


def test_tm_is_symmetric_bounded_and_one_on_identical(adk):
    open_state, closed_state = adk["states"]
    frame = adk["trajectories"]["tmd"][40]
    forward = float(metrics.tm_score(open_state, closed_state))
    assert forward == pytest.approx(float(metrics.tm_score(closed_state, open_state)), abs=1e-9)
    assert float(metrics.tm_score(frame, open_state)) == pytest.approx(
        float(metrics.tm_score(open_state, frame)), abs=1e-9
    )
    assert 0 < forward <= 1
    assert float(metrics.tm_score(open_state, open_state)) == pytest.approx(1.0, abs=1e-12)
    assert 0.6 < forward < 0.75  # the spec measured about 0.69


def test_every_metric_is_invariant_to_rotation_and_translation(adk):
    open_state, closed_state = adk["states"]
    generator = torch.Generator().manual_seed(0)
    ensemble = torch.as_tensor(adk["trajectories"]["dims2"][::20])
    path = torch.as_tensor(adk["trajectories"]["tmd"][::25])
    moved_ensemble = torch.stack([metrics.rigid_motion(x, generator) for x in ensemble])
    moved_closed = metrics.rigid_motion(closed_state, generator)
    states = torch.as_tensor(adk["states"])
    moved_states = torch.stack([metrics.rigid_motion(open_state, generator), moved_closed])
    checks = [
        (metrics.kabsch_rmsd(ensemble, closed_state), metrics.kabsch_rmsd(moved_ensemble, moved_closed)),
        (metrics.tm_score(ensemble, closed_state), metrics.tm_score(moved_ensemble, moved_closed)),
        (metrics.distance_matrix(ensemble, states), metrics.distance_matrix(moved_ensemble, moved_states)),
        (metrics.path_fidelity(path, ensemble), metrics.path_fidelity(path, moved_ensemble)),
        (metrics.state_coverage(ensemble, states, 2.0), metrics.state_coverage(moved_ensemble, moved_states, 2.0)),
        (metrics.state_preference(ensemble, closed_state, open_state),
         metrics.state_preference(moved_ensemble, moved_states[1], moved_states[0])),
    ]  # fmt: skip
    for before, after in checks:
        assert torch.allclose(before, after, atol=1e-6, rtol=0)


def test_coverage_success_preference_delta_and_path_by_hand():
    # Two 4-residue "states": B is A stretched fourfold along x.
    base = np.array([[0.0, 0, 0], [3.8, 0, 0], [0, 3.8, 0], [0, 0, 3.8]])
    stretch = np.diag([4.0, 1.0, 1.0])  # RMSD(A, B) = 4.82 A after superposition
    state_a, state_b = base, base @ stretch
    near_a = [state_a + 0.01 * k for k in range(3)]  # translations: RMSD 0
    target = Target("toy", np.stack([state_a, state_b]), ("a", "b"), holo_state=1, apo_state=0)
    only_a = np.stack(near_a)
    both = np.stack([*near_a, state_b])
    assert metrics.state_coverage(only_a, target.states).tolist() == [1.0, 0.0]
    assert float(metrics.multistate_success(metrics.state_coverage(both, target.states))) == 1.0
    assert float(metrics.state_preference(both, state_b, state_a)) == pytest.approx(0.25)
    assert float(metrics.context_delta(both, only_a, state_b, state_a)) == pytest.approx(0.25)
    fidelity = metrics.path_fidelity(np.stack([state_a, state_b]), only_a)
    assert float(fidelity[0]) == pytest.approx(0.0, abs=1e-9)
    assert float(fidelity[1]) == pytest.approx(float(metrics.kabsch_rmsd(state_a, state_b)))
    scores = score_ensembles(target, {"apo": [only_a, both], "ligand": [both, both]})
    assert scores["multistate_success"] == 0.5 and scores["coverage_a"] == 1.0 and scores["coverage_b"] == 0.5
    assert scores["context_delta"] == pytest.approx((0.25 - 0.0 + 0.25 - 0.25) / 2)


def test_bad_inputs_give_clear_errors(adk):
    open_state, closed_state = adk["states"]
    states = adk["states"]
    with pytest.raises(ValueError, match="200 residues, but the reference states have 214"):
        metrics.distance_matrix(np.zeros((3, 200, 3)), states)
    with pytest.raises(ValueError, match="residue counts differ"):
        metrics.kabsch_rmsd(open_state[:200], closed_state)
    bad = open_state.copy()
    bad[5, 1] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        metrics.kabsch_rmsd(bad, closed_state)
    with pytest.raises(ValueError, match="empty"):
        metrics.state_coverage(np.zeros((0, 214, 3)), states)
    with pytest.raises(ValueError, match=r"shape \(N, 3\)"):
        metrics.kabsch_rmsd(open_state.reshape(-1), closed_state.reshape(-1))
    with pytest.raises(ValueError, match=r"\(N, 3\)"):
        metrics.tm_score(np.zeros((214, 4)), np.zeros((214, 4)))
    with pytest.raises(ValueError, match="numeric"):
        metrics.check_coords([["a", "b", "c"]])
    target = Target("adk", states, ("open", "closed"), holo_state=1, apo_state=0)
    with pytest.raises(ValueError, match="unknown context 'holo'"):
        score_ensembles(target, {"apo": [states], "holo": [states]})
