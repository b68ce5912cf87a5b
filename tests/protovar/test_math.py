"""ProtoVAR's pieces against hand-computed or brute-force values (random weights; no checkpoint needed)."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
import torch

from zoo._errors import ZooError
from zoo.protovar.distill import check_ipc, greedy_k_center, herding, k_center_cost, select
from zoo.protovar.tokenizer import MultiScaleVQVAE, to_model_range, to_pixels
from zoo.protovar.var import VARTransformer, block_causal_mask, check_guidance, sample


@pytest.fixture(scope="module")
def pair():
    torch.manual_seed(0)
    tokenizer = MultiScaleVQVAE().eval()
    var = VARTransformer(dim=32, depth=2, heads=2).eval()
    for p in var.parameters():  # AdaLN gates start at zero; random gates make every block matter
        torch.nn.init.normal_(p, std=0.2)
    return tokenizer, var


def test_block_causal_mask_by_hand():
    mask = block_causal_mask((1, 2))
    expected = torch.tensor(
        [[1, 0, 0, 0, 0]] + [[1, 1, 1, 1, 1]] * 4,
        dtype=torch.bool,
    )
    assert torch.equal(mask, expected)


def test_scale1_logits_ignore_scale8_inputs(pair):
    tokenizer, var = pair
    inputs = torch.randn(3, 84, 32)
    classes = torch.tensor([0, 4, 10])
    with torch.no_grad():
        before = var(classes, inputs)
        perturbed = inputs.clone()
        perturbed[:, 20:] += torch.randn(3, 64, 32) * 5  # the 64 scale-8 tokens (inputs 20..83)
        after = var(classes, perturbed)
    assert torch.equal(before[:, :21], after[:, :21])  # scales 1, 2, 4 (21 tokens) see nothing of scale 8
    assert not torch.allclose(before[:, 21:], after[:, 21:])  # scale 8 does


def test_beta_gamma_zero_is_unguided_sampling(pair):
    tokenizer, var = pair
    classes = torch.arange(6)
    maps = [torch.randn(6, k, k, 32) for k in (1, 2, 4)]
    plain = sample(var, tokenizer, classes, torch.Generator().manual_seed(3))
    zero = sample(
        var, tokenizer, classes, torch.Generator().manual_seed(3), prototypes=maps, beta=(0, 0, 0), gamma=(0, 0, 0)
    )
    guided = sample(var, tokenizer, classes, torch.Generator().manual_seed(3), prototypes=maps, beta=(50, 50, 50))
    assert torch.equal(plain[0], zero[0]) and all(torch.equal(a, b) for a, b in zip(plain[1], zero[1], strict=True))
    assert not torch.equal(plain[1][1], guided[1][1])


def test_large_beta_forces_the_prototype_code(pair):
    tokenizer, var = pair
    proto = torch.randn(2, 1, 1, 32)
    f_hat, codes = sample(var, tokenizer, torch.tensor([1, 2]), torch.Generator().manual_seed(0), prototypes=[proto],
                          beta=(1e4,))  # fmt: skip
    assert torch.equal(codes[0].flatten(), tokenizer.lookup(proto).flatten())  # residual of an empty map = P


def test_kv_cache_gives_the_same_samples(pair):
    tokenizer, var = pair
    classes = torch.arange(10)
    cached = sample(var, tokenizer, classes, torch.Generator().manual_seed(1), use_cache=True)
    full = sample(var, tokenizer, classes, torch.Generator().manual_seed(1), use_cache=False)
    assert all(torch.equal(a, b) for a, b in zip(cached[1], full[1], strict=True))


def test_residual_quantisation_sums_its_scales(pair):
    tokenizer, _ = pair
    x = to_model_range(torch.randint(0, 256, (4, 28, 28), dtype=torch.uint8))
    with torch.no_grad():
        codes, f_hat = tokenizer.quantize(tokenizer.encoder(x))
        assert [c.shape[1:] for c in codes] == [(1, 1), (2, 2), (4, 4), (8, 8)]
        assert torch.allclose(tokenizer.codes_to_fhat(codes), f_hat, atol=1e-6)
        assert tokenizer.var_inputs(codes).shape == (4, 84, 32)


def test_dead_codes_restart_on_batch_vectors_and_live_codes_stay():
    torch.manual_seed(0)
    tokenizer = MultiScaleVQVAE(codebook_size=8, dim=4, hidden=4, dead_threshold=1.0)
    tokenizer.ema_count.copy_(torch.tensor([5.0, 0.5, 3.0, 0.99, 1.0, 2.0, 0.0, 7.0]))
    tokenizer.ema_sum.copy_(tokenizer.codebook * tokenizer.ema_count[:, None])
    before = {name: getattr(tokenizer, name).clone() for name in ("codebook", "ema_sum", "ema_count")}
    vectors = torch.randn(20, 4)
    restarted = tokenizer.restart_dead(vectors)
    assert restarted.tolist() == [1, 3, 6]  # EMA count below 1.0 (1.0 itself is live)
    live = [0, 2, 4, 5, 7]
    for name, value in before.items():
        assert torch.equal(getattr(tokenizer, name)[live], value[live]), name
    rows = [tuple(v.tolist()) for v in vectors]
    moved = [tuple(tokenizer.codebook[c].tolist()) for c in restarted]
    assert all(m in rows for m in moved) and len(set(moved)) == 3  # distinct rows of the batch
    assert torch.equal(tokenizer.ema_count[restarted], torch.ones(3))
    assert torch.allclose(tokenizer.ema_sum[restarted], tokenizer.codebook[restarted])  # sum / count = value


def test_ema_update_restarts_codes_the_batch_missed_onto_its_encoder_outputs():
    import copy

    import torch.nn.functional as F

    torch.manual_seed(1)
    tokenizer = MultiScaleVQVAE(codebook_size=64, dim=8, hidden=4, restart_every=1)
    x = to_model_range(torch.randint(0, 256, (2, 28, 28), dtype=torch.uint8))
    with torch.no_grad():
        f = tokenizer.encoder(x)
        reference = copy.deepcopy(tokenizer)
        residual, looked_up, hit = f, [], []  # the residual vectors of every scale, as quantize() looks them up
        for index, k in enumerate(reference.scales):
            down = F.adaptive_avg_pool2d(residual, k)
            vectors = down.permute(0, 2, 3, 1).reshape(-1, 8)
            ids = reference.lookup(vectors)
            looked_up.append(vectors)
            hit.append(ids)
            residual = residual - reference.code_to_z(ids.reshape(2, k, k), index)
        vectors, ids = torch.cat(looked_up), torch.cat(hit)
        tokenizer.quantize(f, update=True)
    hits = torch.bincount(ids, minlength=64).float()
    live, dead = hits > 0, hits == 0
    assert 0 < int(dead.sum()) <= len(vectors)  # 2 images x 85 tokens leave some of the 64 codes unhit
    ema_sum = 0.99 * reference.ema_sum + 0.01 * F.one_hot(ids, 64).float().T @ vectors
    ema_count = 0.99 + 0.01 * hits  # from 1: below the threshold 1.0 exactly when unhit
    assert torch.allclose(tokenizer.codebook[live], (ema_sum / ema_count[:, None])[live], atol=1e-6)
    assert torch.allclose(tokenizer.ema_count[live], ema_count[live])
    for code in dead.nonzero().flatten():  # each unhit code now sits on one of the batch's encoder residuals
        assert (tokenizer.codebook[code] == vectors).all(-1).any()
    assert torch.equal(tokenizer.ema_count[dead], torch.ones(int(dead.sum())))


def test_restart_every_skips_the_checks_in_between():
    tokenizer = MultiScaleVQVAE(codebook_size=16, dim=4, hidden=4, restart_every=3)
    f = torch.randn(1, 4, 8, 8)
    with torch.no_grad():
        for update in (1, 2, 3):
            start = tokenizer.codebook.clone()
            tokenizer.quantize(f, update=True)
            below = tokenizer.ema_count < 1.0
            assert below.any() == (update < 3), update  # unhit codes stay dead until the third update
    assert not torch.equal(tokenizer.codebook, start)
    with pytest.raises(ZooError, match="restart_every"):
        MultiScaleVQVAE(restart_every=0)


def test_pixels_round_trip_and_padding():
    images = torch.tensor([[[0] * 28] * 28, [[255] * 28] * 28], dtype=torch.uint8)
    x = to_model_range(images)
    assert x.shape == (2, 1, 32, 32) and x[0].max() == -1 and x[1, 0, 2:30, 2:30].min() == 1 and x[1, 0, 0, 0] == -1
    assert torch.equal(to_pixels(x), images)


def _farthest_point_loops(points, k, first):
    chosen = [first]
    while len(chosen) < k:
        best, best_distance = None, -1.0
        for i in range(len(points)):
            nearest = min(float(np.sqrt(((points[i] - points[j]) ** 2).sum())) for j in chosen)
            if nearest > best_distance:
                best, best_distance = i, nearest
        chosen.append(best)
    return chosen


def test_greedy_k_center_equals_brute_force_on_12_points():
    rng = np.random.default_rng(0)
    centres = np.array([[0.0, 0.0], [10.0, 0.0], [0.0, 10.0]])
    points = np.concatenate([c + rng.normal(scale=0.5, size=(4, 2)) for c in centres])  # 12 points, 3 clusters
    greedy = greedy_k_center(points, 3, first=0)
    assert greedy == _farthest_point_loops(points, 3, 0)  # the farthest-point rule, written out
    optimum = min(k_center_cost(points, s) for s in itertools.combinations(range(12), 3))
    assert k_center_cost(points, greedy) == pytest.approx(optimum, rel=0.6)  # one point per cluster
    assert sorted(i // 4 for i in greedy) == [0, 1, 2]
    random_points = rng.normal(size=(12, 3))
    for k in (2, 4, 5):
        optimum = min(k_center_cost(random_points, s) for s in itertools.combinations(range(12), k))
        assert k_center_cost(random_points, greedy_k_center(random_points, k, 0)) <= 2 * optimum + 1e-12


def test_selector_floor_then_k_center_by_hand():
    confidence = np.array([0.9, 0.3, 0.85, 0.95, 0.81])
    features = np.array([[0.0], [100.0], [1.0], [5.0], [-3.0]])
    # passing: 3 (0.95), 0, 2, 4; start at 3 (x=5); farthest passing is 4 (x=-3), then 0 or 2: 2 (x=1, 2 away)
    assert select(confidence, features, 3, floor=0.8) == [3, 4, 2]
    assert select(confidence, features, 2, floor=0.99) == [3, 0]  # too few pass: the most confident


def test_herding_picks_the_real_point_nearest_each_centre():
    points = np.array([[0.0, 0.0], [0.1, 0.0], [0.05, 0.02], [9.0, 9.0], [9.1, 9.0], [9.05, 8.98]], dtype=np.float32)
    assert sorted(herding(points, 2, seed=0)) == [2, 5]


def test_bad_inputs_raise_one_clear_line(pair):
    from zoo.protovar.module import ProtoVARModule
    from zoo.protovar.student import to_unit

    tokenizer, var = pair
    for call, word in (
        (lambda: check_ipc(0, 5), "ipc=0"),
        (lambda: check_ipc(6, 5), "pool size 5"),
        (lambda: select(np.ones(3), np.zeros((3, 1)), 4, 0.5), "ipc=4"),
        (lambda: check_guidance("beta", (1.0, 2.0), (1, 2, 4)), "beta has 2 values"),
        (
            lambda: sample(
                var,
                tokenizer,
                torch.tensor([0]),
                torch.Generator(),
                prototypes=[torch.zeros(1, 1, 1, 32)],
                beta=(1.0, 2.0),
            ),
            "one value per injected scale",
        ),  # fmt: skip
        (lambda: to_model_range(torch.zeros(2, 32, 32)), "28x28"),
        (lambda: to_unit(np.zeros((2, 27, 28), np.uint8)), "28x28"),
        (lambda: ProtoVARModule("var", ipcs=(1,)).generate([3, 10]), "class id 10"),
        (lambda: ProtoVARModule("var", ipcs=(1,)).generate([3], ipc=10), "ipc=10"),
        (lambda: ProtoVARModule("oops"), "stage"),
    ):
        with pytest.raises(ZooError) as error:
            call()
        assert word in str(error.value) and "\n" not in str(error.value)


def augmenter(shift: int):
    """The torchvision reference of the student's augmentation: per-image random shift (a 28x28 crop of the image
    zero-padded by ``shift``) and horizontal flip."""
    from torchvision.transforms import v2

    return v2.Compose([v2.RandomCrop(28, padding=shift), v2.RandomHorizontalFlip()])


def test_augmentation_variants_are_torchvision_random_crop_and_flip():
    from zoo.protovar.student import num_variants, variant_table

    x = torch.rand(1, 1, 28, 28)
    variants, _ = variant_table(x, None, shift=2)
    assert variants.shape == (1, num_variants(2), 1, 28, 28) == (1, 50, 1, 28, 28)
    assert len({v.numpy().tobytes() for v in variants[0]}) == 50  # 25 offsets x 2 flips, all different
    assert torch.equal(variants[0, 2 * 12], x[0])  # offset (2, 2) = the centre crop, unflipped
    assert torch.equal(variants[0, 2 * 12 + 1], x[0].flip(-1))
    assert torch.equal(variants[0, 0, :, 2:, 2:], x[0, :, :26, :26]) and (variants[0, 0, :, :2] == 0).all()
    torch.manual_seed(0)
    for _ in range(40):  # what torchvision's RandomCrop(28, padding=2) + RandomHorizontalFlip makes
        out = augmenter(2)(x[0])
        assert any(torch.equal(out, v) for v in variants[0])


def test_teacher_table_gives_the_on_the_fly_batches_and_student():
    from dataclasses import replace

    from zoo.protovar.student import ConvNet, StudentProtocol, augmented_batches, train_student

    torch.manual_seed(0)
    teacher = ConvNet((8, 8, 8)).eval()
    images = (torch.rand(6, 28, 28) * 255).to(torch.uint8)
    protocol = replace(StudentProtocol(), steps=4, batch_size=8, widths=(4, 4, 4))
    x = images.float()[:, None] / 255
    table = list(augmented_batches(x, teacher, protocol, seed=5, table=True))
    fly = list(augmented_batches(x, teacher, protocol, seed=5, table=False))
    for (pick_a, batch_a, logits_a), (pick_b, batch_b, logits_b) in zip(table, fly, strict=True):
        assert torch.equal(pick_a, pick_b) and torch.equal(batch_a, batch_b)
        assert torch.allclose(logits_a, logits_b, atol=1e-5)
    students = [train_student(images, torch.zeros(6), teacher, protocol, 5, table=t) for t in (True, False)]
    for a, b in zip(students[0].parameters(), students[1].parameters(), strict=True):
        assert torch.allclose(a, b, atol=1e-5)
