"""The pixel references, the paired interval and the student's augmentation, against hand-computed values."""

import math

import numpy as np
import pytest
import torch

from zoo._errors import ZooError
from zoo.eval import Run, mean_interval
from zoo.eval.engine import evaluation, measure_task
from zoo.lavid import tune
from zoo.lavid.evaluate import PROTOCOL, interval_claim
from zoo.lavid.references import ClassMean, PixelLogReg, group_accuracies, make_reference
from zoo.lavid.student import augment

# class 0: two images at (0, 0); class 1: one image at (3, 0); overall mean (1, 0)
X = np.array([[0.0, 0.0], [0.0, 0.0], [3.0, 0.0]])
Y = np.array([0, 0, 1])


def test_class_mean_by_hand():
    rule = ClassMean(0.0).fit(X, Y)
    np.testing.assert_allclose(rule.means, [[0.0, 0.0], [3.0, 0.0]])
    assert rule.predict(np.array([[1.4, 0.0], [1.6, 0.0]])).tolist() == [0, 1]  # boundary at 1.5


def test_class_mean_shrinkage_moves_the_boundary_by_hand():
    rule = ClassMean(0.5).fit(X, Y)  # m_c = (1, 0) + 0.5 (mean_c - (1, 0)): (0.5, 0) and (2, 0), boundary 1.25
    np.testing.assert_allclose(rule.means, [[0.5, 0.0], [2.0, 0.0]])
    assert rule.predict(np.array([[1.2, 0.0], [1.4, 0.0]])).tolist() == [0, 1]


def test_logreg_by_hand():
    # x = +1 (label 1), x = -1 (label 0): b = 0 by symmetry and w solves w = 2 C sigmoid(-w) (stationarity of
    # 0.5 w^2 + C sum log(1 + exp(-y w x))); C = 1 by bisection
    lo, hi = 0.0, 2.0
    for _ in range(60):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if mid < 2 / (1 + math.exp(mid)) else (lo, mid)
    rule = PixelLogReg(1.0).fit(np.array([[1.0], [-1.0]]), np.array([1, 0]))
    assert rule.model.coef_[0, 0] == pytest.approx(lo, abs=1e-4)
    assert rule.model.intercept_[0] == pytest.approx(0.0, abs=1e-4)
    assert rule.predict(np.array([[0.5], [-0.5]])).tolist() == [1, 0]


def test_references_read_images_as_flat_pixels():
    images = torch.zeros(4, 1, 28, 28)
    images[2:, 0, 0, 0] = 1.0
    labels = torch.tensor([0, 0, 1, 1])
    rule = make_reference("reference_class_mean", {"shrinkage": 0.0}).fit(images, labels)
    assert rule.means.shape == (2, 784) and rule.means[1, 0] == 1.0
    worst, average, groups = group_accuracies(rule, images, labels, torch.tensor([0, 1, 2, 3]))
    assert (worst, average, groups) == (1.0, 1.0, [1.0, 1.0, 1.0, 1.0])


def test_bad_reference_parameters_raise():
    with pytest.raises(ZooError, match="C must be positive"):
        PixelLogReg(0.0)
    with pytest.raises(ZooError, match="shrinkage"):
        ClassMean(1.0)
    with pytest.raises(ZooError, match="unknown reference"):
        make_reference("reference_knn")


def test_references_get_the_students_tuning_budget():
    assert len(tune.LOGREG_GRID["C"]) == len(tune.CLASS_MEAN_GRID["shrinkage"]) == tune.TRIALS
    assert len(tune.SPURIOUS_LOGREG_GRID["C"]) == len(tune.SPURIOUS_CLASS_MEAN_GRID["shrinkage"]) == 12
    for arm in ("reference_pixel_logreg", "reference_class_mean"):
        assert PROTOCOL.tuning[arm].trials == tune.TRIALS + tune.SPURIOUS_TRIALS


def test_a_reference_piece_has_the_students_metrics():
    small = {"shots": [1, 2], "spurious_seeds": 1, "spurious_size": 100, "test_limit": 100}
    run = Run(PROTOCOL, "lavid", 0, PROTOCOL.resolve(small), evaluation("lavid").entries)
    scores = measure_task(PROTOCOL, run, ("reference_pixel_logreg",))["reference_pixel_logreg"]
    assert set(scores) == {"acc_1shot", "acc_2shot", "worst_group_acc", "avg_acc_spurious"}
    assert 0.0 <= scores["worst_group_acc"] <= scores["avg_acc_spurious"] <= 1.0
    assert len(run.extras["reference_pixel_logreg_group_accs"]) == 4


def test_paired_interval_by_hand():
    mean, low, high = mean_interval([0.01, 0.02, 0.03])  # sd 0.01, t(0.975, 2) = 4.302653
    half = 4.302653 * 0.01 / math.sqrt(3)
    assert (mean, low, high) == pytest.approx((0.02, 0.02 - half, 0.02 + half), abs=1e-7)
    with pytest.raises(ValueError):
        mean_interval([0.1])


def _result(gains):
    per_seed = {"lavid": {}, "ce": {}}
    for seed, gain in enumerate(gains):
        per_seed["lavid"][str(seed)] = {"acc_10shot": 0.5 + gain}
        per_seed["ce"][str(seed)] = {"acc_10shot": 0.5}
    return {"per_seed": per_seed}


def test_interval_claim_fails_when_the_interval_reaches_zero():
    assert interval_claim(_result([0.01, 0.02, 0.03]), "acc_10shot", "ce").holds is False  # low end -0.0048
    claim = interval_claim(_result([0.02, 0.021, 0.022]), "acc_10shot", "ce")
    assert claim.holds is True and claim.kind == "paper" and claim.versus == "ce"


def test_augment_is_a_shift_and_flip_drawn_from_its_generator():
    images = torch.arange(2 * 28 * 28, dtype=torch.float32).reshape(2, 1, 28, 28)
    assert torch.equal(augment(images, torch.Generator().manual_seed(0), shift=0, flip=False), images)
    a = augment(images, torch.Generator().manual_seed(3))
    b = augment(images, torch.Generator().manual_seed(3))
    assert torch.equal(a, b) and a.shape == images.shape
    flipped = augment(images, torch.Generator().manual_seed(1), shift=0, flip=True)
    for out, image in zip(flipped, images):
        assert torch.equal(out, image) or torch.equal(out, image.flip(-1))


def test_interval_claim_on_one_seed_does_not_hold():
    claim = interval_claim(_result([0.05]), "acc_10shot", "ce")
    assert claim.holds is False and "needs >= 2 seeds" in claim.text
