"""The LAM's math: tau, the KL term, the causal mask, lambda = 0 equals the baseline, and bad inputs."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from zoo.olaf_world.clips import tau_from_features
from zoo.olaf_world.lam import (
    SHIFT_GAIN,
    LatentActionModel,
    TrajectoryHead,
    align_loss,
    kl_divergence,
    lam_losses,
    shift_frames,
)
from zoo.olaf_world.module import OlafLAMModule

TINY = {"model_dim": 32, "encoder_blocks": 2, "decoder_blocks": 1, "heads": 2}


def test_tau_is_unit_norm_with_the_sign_of_later_minus_earlier():
    rng = np.random.default_rng(0)
    direction = rng.normal(size=8)
    base = rng.normal(size=8)
    # s_k = base + k * direction: every step adds `direction`, so tau = direction / |direction|
    features = np.stack([base + k * direction for k in range(4)])[None]
    tau = tau_from_features(features)
    assert np.linalg.norm(tau) == pytest.approx(1.0, abs=1e-6)
    np.testing.assert_allclose(tau[0], direction / np.linalg.norm(direction), atol=1e-6)
    # played backwards the clip's tau flips sign
    np.testing.assert_allclose(tau_from_features(features[:, ::-1])[0], -tau[0], atol=1e-6)
    # hand value: s = (0, 0), (1, 0), (1, 2) -> mean step (0.5, 1) -> (1, 2) / sqrt(5)
    tau = tau_from_features(np.array([[[0.0, 0.0], [1.0, 0.0], [1.0, 2.0]]]))
    np.testing.assert_allclose(tau[0], np.array([1.0, 2.0]) / np.sqrt(5), atol=1e-6)
    # the static ablation: normalize(mean_k s_k) = (2/3, 2/3) / |.| = (1, 1) / sqrt(2)
    static = tau_from_features(np.array([[[0.0, 0.0], [1.0, 0.0], [1.0, 2.0]]]), target="static")
    np.testing.assert_allclose(static[0], np.array([1.0, 1.0]) / np.sqrt(2), atol=1e-6)


def test_kl_is_zero_at_the_prior_and_matches_hand_values():
    zeros = torch.zeros(3, 2, 32)
    assert float(kl_divergence(zeros, zeros)) == 0.0
    # mu = 1, logvar = 0: 0.5 per dimension, summed over 32 dims, averaged over latents
    assert float(kl_divergence(torch.ones(3, 2, 32), zeros)) == pytest.approx(16.0)
    # mu = 0, logvar = log 2: -0.5 (1 + log 2 - 2) per dim
    value = float(kl_divergence(torch.zeros(1, 4), torch.full((1, 4), np.log(2.0))))
    assert value == pytest.approx(-0.5 * 4 * (1 + np.log(2.0) - 2.0), rel=1e-6)


def test_align_loss_is_one_minus_cosine():
    a = torch.tensor([[1.0, 0.0], [1.0, 1.0]])
    b = torch.tensor([[1.0, 0.0], [-1.0, 0.0]])
    assert float(align_loss(a, b)) == pytest.approx((0.0 + (1 + 1 / np.sqrt(2))) / 2, rel=1e-6)


@pytest.mark.parametrize(
    ("motion_tokens", "stem", "readout", "encoder"),
    [
        (False, "linear", "prompt", "transformer"),
        (True, "linear", "prompt", "transformer"),
        (False, "conv", "prompt", "transformer"),
        (False, "conv", "tokens", "transformer"),
        (False, "linear", "prompt", "conv"),
    ],
)
def test_causal_mask_z_t_ignores_later_frames(motion_tokens, stem, readout, encoder):
    torch.manual_seed(0)
    lam = LatentActionModel(
        **TINY, motion_tokens=motion_tokens, encoder_stem=stem, latent_readout=readout, encoder=encoder
    ).eval()
    videos = torch.rand(2, 5, 64, 64, 3)
    mu, _ = lam.encode(videos)
    for t in range(1, 4):  # z_t (index t - 1) is the action into frame t: frames > t must not matter
        perturbed = videos.clone()
        perturbed[:, t + 1 :] = torch.rand_like(perturbed[:, t + 1 :])
        mu_p, _ = lam.encode(perturbed)
        torch.testing.assert_close(mu_p[:, :t], mu[:, :t])
        assert not torch.allclose(mu_p[:, t:], mu[:, t:])
    # and the non-causal encoder does see the future (the test can fail)
    torch.manual_seed(0)
    acausal = LatentActionModel(**TINY, causal=False).eval()
    perturbed = videos.clone()
    perturbed[:, 2:] = torch.rand_like(perturbed[:, 2:])
    assert not torch.allclose(acausal.encode(perturbed)[0][:, 0], acausal.encode(videos)[0][:, 0])


def test_lambda_zero_equals_the_baseline():
    batch = {"videos": torch.rand(3, 4, 64, 64, 3), "tau": torch.nn.functional.normalize(torch.randn(3, 1280), dim=1)}
    vae = OlafLAMModule(align_weight=0.0, seed=3, **TINY)
    aligned = OlafLAMModule(align_weight=0.02, seed=3, **TINY)
    for key, value in vae.state_dict().items():  # same seed -> same initial weights, head included
        assert torch.equal(value, aligned.state_dict()[key]), key
    aligned.hparams.align_weight = 0.0
    torch.manual_seed(1)
    loss_vae = vae.losses(batch)["loss"]
    torch.manual_seed(1)
    loss_zero = aligned.losses(batch)["loss"]
    assert torch.equal(loss_vae, loss_zero)
    aligned.hparams.align_weight = 0.02
    torch.manual_seed(1)
    losses = aligned.losses(batch)
    torch.testing.assert_close(losses["loss"], loss_vae + 0.02 * losses["align"])


def test_lam_losses_decomposes_into_mse_kl_align():
    torch.manual_seed(0)
    lam, head = LatentActionModel(**TINY), TrajectoryHead(32, 16)
    videos, tau = torch.rand(2, 3, 64, 64, 3), torch.nn.functional.normalize(torch.randn(2, 16), dim=1)
    torch.manual_seed(5)
    losses = lam_losses(lam, head, videos, tau, beta=0.5, align_weight=0.1)
    torch.testing.assert_close(losses["loss"], losses["mse"] + 0.5 * losses["kl"] + 0.1 * losses["align"])
    assert 0 <= float(losses["align"].detach()) <= 2


@pytest.mark.parametrize(
    ("videos", "message"),
    [
        (torch.rand(2, 1, 64, 64, 3), "T >= 2"),
        (torch.rand(2, 4, 64, 64, 3) * 2, r"\[0, 1\]"),
        (torch.rand(2, 4, 32, 32, 3), "videos must be"),
        (torch.rand(4, 64, 64, 3), "videos must be"),
    ],
)
def test_bad_videos_raise_one_clear_line(videos, message):
    model = OlafLAMModule(**TINY)
    with pytest.raises(ValueError, match=message):
        model(videos)


def test_tau_width_that_does_not_match_the_head_raises():
    model = OlafLAMModule(**TINY)
    with pytest.raises(ValueError, match="tau has width 64 but the trajectory head predicts 1280"):
        model.losses({"videos": torch.rand(2, 4, 64, 64, 3), "tau": torch.randn(2, 64)})


def test_residual_decoder_starts_as_the_copy_of_the_previous_frame():
    torch.manual_seed(0)
    videos = torch.rand(2, 3, 64, 64, 3)
    recon = LatentActionModel(**TINY).eval()(videos, sample=False)["recon"]
    torch.testing.assert_close(recon, videos[:, :-1].clamp(1e-3, 1 - 1e-3), atol=1e-5, rtol=0)
    plain = LatentActionModel(**TINY, residual=False).eval()(videos, sample=False)["recon"]
    assert (plain - videos[:, :-1]).abs().mean() > 0.1


def test_shift_frames_moves_content_by_the_one_hot_tap_and_blurs_by_hand_values():
    frames = torch.arange(2 * 5 * 6 * 1, dtype=torch.float32).reshape(2, 5, 6, 1)
    k = torch.zeros(2, 5)
    kx, ky = k.clone(), k.clone()
    kx[:, 4], ky[:, 2] = 1.0, 1.0  # tap r + 2 in x: out[y, x] = in[y, x + 2] (replicated right edge)
    moved = shift_frames(frames, kx, ky)
    torch.testing.assert_close(moved[:, :, :4], frames[:, :, 2:])
    torch.testing.assert_close(moved[:, :, 4:], frames[:, :, 5:].expand(-1, -1, 2, -1))
    kx, ky = k.clone(), k.clone()
    kx[:, 2], ky[:, 1], ky[:, 2] = 1.0, 0.5, 0.5  # half of the row above: out[y] = (in[y - 1] + in[y]) / 2
    blurred = shift_frames(frames, kx, ky)
    torch.testing.assert_close(blurred[:, 1:], (frames[:, :-1] + frames[:, 1:]) / 2)
    torch.testing.assert_close(blurred[:, 0], frames[:, 0])


def test_shift_decoder_applies_the_shift_its_latent_picks():
    torch.manual_seed(0)
    lam = LatentActionModel(**TINY, shift_kernel=15).eval()
    previous = torch.rand(2, 1, 64, 64, 3) * 0.8 + 0.1
    with torch.no_grad():
        lam.to_shift.weight.zero_()
        lam.to_shift.weight[7 + 7, 0] = 2.0  # z[0] = 1 -> x-kernel logit at tap 14 (+7 px) = 20, centre = 4
        lam.to_shift.weight[15 + 7, 0] = 2.0  # and the y-kernel's centre tap to 24: no vertical move
        lam.shift_mask.fill_(2.0)  # sigmoid(20): every pixel moves
    z = torch.zeros(2, 1, 32)
    z[:, :, 0] = 1.0
    base = lam.shifted(previous, z)
    torch.testing.assert_close(base[..., :57, :], previous[..., 7:, :], atol=1e-4, rtol=0)
    # z = 0 keeps the near-identity kernel of the init bias; the output layer starts at zero, so recon = base
    recon = lam.decode(previous, torch.zeros(2, 1, 32))
    expected = lam.shifted(previous, torch.zeros(2, 1, 32)).clamp(1e-3, 1 - 1e-3)
    torch.testing.assert_close(recon, expected, atol=1e-5, rtol=0)
    assert SHIFT_GAIN * float(lam.to_shift.bias[7]) == pytest.approx(4.0)


@pytest.mark.parametrize("kernel", [4, 1])
def test_bad_shift_kernel_raises_one_clear_line(kernel):
    with pytest.raises(ValueError, match="shift_kernel"):
        LatentActionModel(**TINY, shift_kernel=kernel)
    with pytest.raises(ValueError, match="residual=True"):
        LatentActionModel(**TINY, shift_kernel=15, residual=False)


def test_conv_stem_tokens_line_up_with_the_patch_grid_and_see_the_change():
    from zoo.olaf_world.lam import MotionStem

    torch.manual_seed(0)
    stem = MotionStem(3, patch=16, model_dim=32)
    videos = torch.rand(2, 3, 64, 64, 3)
    tokens = stem(videos)
    assert tokens.shape == (2, 3, 16, 32)  # 4 x 4 cells of 16 px, one token each
    # a change confined to the top-left 16 x 16 cell of frame 1 moves the tokens of frames 1 and 2 (whose change
    # reads frame 1), mostly in the top-left corner's neighbourhood, and never frame 0's
    edited = videos.clone()
    edited[:, 1, :16, :16] = torch.rand(2, 16, 16, 3)
    moved = (stem(edited) - tokens).abs().amax(dim=-1)
    assert float(moved[:, 0].max()) == 0.0
    assert float(moved[:, 1, 0].min()) > 0 and float(moved[:, 1, 15].max()) == 0.0  # the far corner's receptive
    assert float(moved[:, 2, 0].min()) > 0  # field does not reach the edit
    with pytest.raises(ValueError, match="power of two"):
        MotionStem(3, patch=12, model_dim=32)
    with pytest.raises(ValueError, match="encoder_stem"):
        LatentActionModel(**TINY, encoder_stem="vit")
    with pytest.raises(ValueError, match="latent_readout"):
        LatentActionModel(**TINY, latent_readout="mean")
    with pytest.raises(ValueError, match="encoder="):
        LatentActionModel(**TINY, encoder="rnn")


def test_conv_encoder_reads_only_its_two_frames_and_starts_near_deterministic():
    torch.manual_seed(0)
    lam = LatentActionModel(**TINY, patch=16, encoder="conv", logvar_init=-6.0).eval()
    assert not hasattr(lam, "encoder_norm")  # no unused transformer weights in the checkpoint
    videos = torch.rand(2, 4, 64, 64, 3)
    mu, logvar = lam.encode(videos)
    assert mu.shape == (2, 3, 32)
    assert float(logvar.mean()) == pytest.approx(-6.0, abs=0.5)
    # z_2 (frames 1 -> 2) ignores frame 0 and frame 3
    edited = videos.clone()
    edited[:, [0, 3]] = torch.rand(2, 2, 64, 64, 3)
    torch.testing.assert_close(lam.encode(edited)[0][:, 1], mu[:, 1])


def test_tokens_readout_reads_every_patch_token_of_the_frame():
    torch.manual_seed(0)
    lam = LatentActionModel(**TINY, patch=16, latent_readout="tokens").eval()
    assert lam.to_latent.in_features == 32 * (16 + 1)  # the prompt and 16 patch tokens (patch 16 at 64 px)
    prompt = LatentActionModel(**TINY).eval()
    assert prompt.to_latent.in_features == 32


def test_kl_warmup_ramps_beta_from_zero():
    model = OlafLAMModule(**TINY, beta=1e-3, kl_warmup_steps=100)
    assert model.beta_now(0) == 0.0
    assert model.beta_now(50) == pytest.approx(5e-4)
    assert model.beta_now(100) == model.beta_now(1000) == pytest.approx(1e-3)
    assert model.beta_now() == pytest.approx(1e-3)  # outside a trainer: the full beta
    assert OlafLAMModule(**TINY, beta=1e-3).beta_now(0) == pytest.approx(1e-3)  # no warm-up: beta from the start
    # the loss uses it: at step 0 of a warm-up the KL term is off
    batch = {"videos": torch.rand(2, 4, 64, 64, 3)}
    torch.manual_seed(0)
    losses = lam_losses(model.lam, model.head, batch["videos"], None, model.beta_now(0), 0.0)
    torch.testing.assert_close(losses["loss"], losses["mse"])
    with pytest.raises(ValueError, match="kl_warmup_steps"):
        OlafLAMModule(**TINY, kl_warmup_steps=-1)
