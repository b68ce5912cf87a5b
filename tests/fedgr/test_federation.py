"""The noisy federation: reproducible from its seed, noise models as specified, clear errors."""

from __future__ import annotations

import numpy as np
import pytest

from zoo.fedgr.federation import PAIR_FLIPS, FederationSpec, build_federation

RNG = np.random.default_rng(0)
IMAGES = RNG.integers(0, 256, size=(3000, 28, 28), dtype=np.uint8)
LABELS = np.repeat(np.arange(10), 300)


def build(**spec):
    return build_federation(FederationSpec(samples_per_client=200, val_size=100, **spec), IMAGES, LABELS)


def test_reproducible_from_the_seed_and_different_across_seeds():
    a, b, c = build(seed=3), build(seed=3), build(seed=4)
    assert np.array_equal(a.noisy_labels, b.noisy_labels) and np.array_equal(a.images, b.images)
    assert all(np.array_equal(x, y) for x, y in zip(a.client_samples, b.client_samples))
    assert not np.array_equal(a.noisy_labels, c.noisy_labels)


def test_symmetric_noise_per_client_rates_and_other_classes():
    fed = build(noise="symmetric", noise_low=0.4, noise_high=0.7)
    assert fed.images.shape == (2000, 28, 28) and len(fed.val_labels) == 100
    covered = np.sort(np.concatenate(fed.client_samples))
    assert np.array_equal(covered, np.arange(2000))  # every pool sample belongs to exactly one client
    assert ((fed.noise_rates >= 0.4 - 1e-9) & (fed.noise_rates <= 0.7 + 1e-9)).all()
    assert len(set(np.round(fed.noise_rates, 3))) > 5  # heterogeneous
    client = fed.client(0)
    assert not hasattr(client, "true_labels")
    assert np.array_equal(client.labels, fed.noisy_labels[client.sample_ids])
    assert client.noise_rate == pytest.approx(np.mean(client.labels != fed.true_labels[client.sample_ids]))


def test_pair_noise_flips_only_the_listed_classes():
    fed = build(noise="pair", noise_low=0.3, noise_high=0.3)
    wrong = fed.is_noisy
    for true, noisy in zip(fed.true_labels[wrong], fed.noisy_labels[wrong]):
        assert PAIR_FLIPS[int(true)] == noisy
    mappable = np.isin(fed.true_labels, list(PAIR_FLIPS))
    assert wrong[mappable].mean() == pytest.approx(0.3, abs=0.01) and not wrong[~mappable].any()


def test_mixed_partly_clean_and_clean_settings():
    fed = build(noise="mixed", noise_low=0.2, noise_high=0.4, noisy_client_fraction=0.6)
    assert sum(kind != "none" for kind in fed.noise_types) == 6
    assert {kind for kind in fed.noise_types if kind != "none"} <= {"symmetric", "pair"}
    assert all(fed.noise_rates[k] == 0 for k, kind in enumerate(fed.noise_types) if kind == "none")
    assert not build(noise="none").is_noisy.any()


def test_dirichlet_partition_is_skewed_and_complete():
    fed = build(partition="dirichlet", dirichlet_alpha=0.3)
    sizes = [len(ids) for ids in fed.client_samples]
    assert sum(sizes) == 2000 and min(sizes) >= 10 and max(sizes) > 1.5 * min(sizes)
    shares = np.array([np.bincount(fed.true_labels[ids], minlength=10) / len(ids) for ids in fed.client_samples])
    assert shares.max() > 0.3  # some client is dominated by a class, unlike IID's ~0.1


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ({"noise": "gaussian"}, "noise must be one of"),
        ({"partition": "shards"}, "partition must be one of"),
        ({"noise_low": 0.7, "noise_high": 0.4}, "noise_low <= noise_high"),
        ({"noisy_client_fraction": 1.5}, "noisy_client_fraction"),
    ],
)
def test_bad_specs_raise_clear_errors(spec, message):
    with pytest.raises(ValueError, match=message):
        FederationSpec(**spec)


def test_too_large_a_federation_is_refused():
    with pytest.raises(ValueError, match="lower samples_per_client"):
        build_federation(FederationSpec(samples_per_client=400), IMAGES, LABELS)
    with pytest.raises(ValueError, match="client_id must be in"):
        build().client(10)


def test_client_validation_split_holds_out_noisy_samples_of_each_client():
    whole, held = build(seed=2), build(seed=2, client_val_fraction=0.1)
    assert np.array_equal(whole.noisy_labels, held.noisy_labels)  # the same labels: the split comes after the noise
    for full, train, val in zip(whole.client_samples, held.client_samples, held.client_val_samples):
        assert len(val) == 20 and len(train) == 180 and not set(train) & set(val)
        assert np.array_equal(np.sort(np.r_[train, val]), full)
    images, labels = held.client_validation()
    assert images.shape == (200, 28, 28) and (labels != held.true_labels[np.concatenate(held.client_val_samples)]).any()
    assert whole.client_val_samples == [] and len(whole.client_validation()[1]) == 0
