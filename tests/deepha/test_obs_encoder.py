"""The OBS token's encoders: the FiLM encoder reads the mission (word order included) and not its padding; the
MLP encoder ignores it; both fit the same parameter budget."""

import numpy as np
import pytest
import torch

from zoo.deepha.model import Embedder
from zoo.deepha.vocab import mission_tokens

PUT = mission_tokens("put the red ball next to the blue box")
SWAPPED = mission_tokens("put the blue ball next to the red box")  # the same words: a mean of them is equal


def _grids(n: int, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    images = torch.stack(
        [torch.randint(0, 11, (n, 7, 7), generator=g), torch.randint(0, 6, (n, 7, 7), generator=g),
         torch.randint(0, 3, (n, 7, 7), generator=g)], dim=-1,
    )  # fmt: skip
    return images, torch.randint(0, 4, (n,), generator=g)


def _ids(*missions, width: int | None = None) -> torch.Tensor:
    out = torch.zeros(len(missions), width or max(len(m) for m in missions), dtype=torch.long)
    for i, mission in enumerate(missions):
        out[i, : len(mission)] = torch.tensor(mission)
    return out


@torch.no_grad()
def test_film_obs_changes_with_the_mission_and_not_with_its_padding():
    torch.manual_seed(0)
    embedder = Embedder(128, obs_encoder="film").eval()
    images, dirs = _grids(1)
    base = embedder.observe(images, dirs, _ids(PUT))
    torch.testing.assert_close(embedder.observe(images, dirs, _ids(PUT, width=len(PUT) + 5)), base)
    for other in (SWAPPED, mission_tokens("pick up the red ball")):
        assert (embedder.observe(images, dirs, _ids(other)) - base).abs().max() > 1e-3
    # rows of a batch with different missions (and padding) each see their own mission only
    images2, dirs2 = _grids(2, seed=1)
    batch = embedder.observe(torch.cat([images, images2[:1]]), torch.cat([dirs, dirs2[:1]]), _ids(PUT, SWAPPED[:4]))
    torch.testing.assert_close(batch[:1], base)
    torch.testing.assert_close(batch[1:], embedder.observe(images2[:1], dirs2[:1], _ids(SWAPPED[:4])))
    # precomputed codes (the agents compute them once per episode) give the same embeddings
    codes = embedder.mission_codes(_ids(PUT))
    torch.testing.assert_close(embedder.observe(images, dirs, codes=codes), base)


@torch.no_grad()
def test_mlp_obs_ignores_the_mission():
    torch.manual_seed(0)
    embedder = Embedder(128).eval()
    images, dirs = _grids(3)
    plain = embedder.observe(images, dirs)
    assert torch.equal(embedder.observe(images, dirs, _ids(PUT, SWAPPED, PUT)), plain)
    assert not hasattr(embedder, "obs_film") and not embedder.needs_mission


def test_bad_obs_encoder_and_missing_mission():
    with pytest.raises(ValueError, match="obs_encoder: expected one of mlp, film, got 'cnn'"):
        Embedder(128, obs_encoder="cnn")
    images, dirs = _grids(1)
    with pytest.raises(ValueError, match="missions: the film OBS encoder needs"):
        Embedder(128, obs_encoder="film").observe(images, dirs)
    with pytest.raises(ValueError, match="does not read the mission"):
        Embedder(128).mission_codes(_ids(PUT))


def test_film_encoder_fits_the_mlp_budget():
    from zoo.deepha.module import DeepHAModule

    def count(module):
        return sum(p.numel() for p in module.parameters())

    mlp, film = Embedder(128), Embedder(128, obs_encoder="film")
    assert count(mlp.obs_mlp) == 317_696 and count(film.obs_film) == 324_640
    for arm in ("coa", "flat", "decoupled"):  # the arms' budgets among themselves: test_module.py
        totals = [count(DeepHAModule(arm=arm, obs_encoder=enc)) for enc in ("mlp", "film")]
        assert 1 < totals[1] / totals[0] < 1.01, (arm, totals)


@pytest.mark.parametrize("arm", ["coa", "flat", "decoupled"])
def test_film_loss_trains_the_mission_encoder(arm, tiny_demos):
    from zoo.deepha.module import DeepHAModule

    module = DeepHAModule(arm=arm, obs_encoder="film")
    episodes = [tiny_demos.episode(e) for e in range(len(tiny_demos))]
    batch = module.collate(episodes, np.random.default_rng(0))
    rows = np.cumsum([0] + [len(ep["images"]) for ep in episodes])
    for ep, start, end in zip(episodes, rows[:-1], rows[1:], strict=True):  # every image carries its mission
        mission = batch["missions"][start:end]
        assert torch.equal(mission[:, : len(ep["mission"])], torch.as_tensor(ep["mission"]).expand(end - start, -1))
        assert not mission[:, len(ep["mission"]) :].any()
    loss, _ = module.loss(batch)
    loss.backward()
    assert np.isfinite(loss.item()) and module.embedder.obs_film.gru.weight_ih_l0.grad.abs().sum() > 0
    assert torch.isfinite(module(*module.example_input_array)).all()  # forward reads the example's missions
