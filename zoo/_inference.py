"""What a loaded model needs at inference, travelling with its weights (timm's ``pretrained_cfg``, HF's ``id2label``).

A module that mixes in :class:`PretrainedMixin` carries ``pretrained_cfg``: a dict with the input it takes
(``input_size``, the ``value_range`` raw inputs are scaled to, the ``mean``/``std`` normalisation, a plain-words
``input_format``) and, for a classifier, its ``label_names``. :func:`zoo.save_pretrained` writes it into
``config.json["pretrained_cfg"]`` (and ``id2label``), :func:`zoo.load` puts it back on the module, and the
registry's :class:`~zoo.PretrainedCfg` states the same fields for the published weights.

:class:`ImageClassifierMixin` adds ``transform`` (raw pixels to the model's input), ``predict`` (raw pixels to
class ids) and ``label_names``, and lets ``zoo.load(name, pretrained=True, num_classes=K)`` replace the head
while the rest loads. Both give the huggingface_hub names ``save_pretrained``, ``push_to_hub`` and
``from_pretrained`` (as ``PyTorchModelHubMixin`` does, in the zoo's ``config.json`` + ``model.safetensors`` format).
"""

from __future__ import annotations

import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from zoo._errors import ZooError
from zoo._hooks import ExportHooks

#: Keys of ``pretrained_cfg`` (timm's names where timm has one).
PRETRAINED_CFG_KEYS = ("input_format", "input_size", "value_range", "mean", "std", "label_names")


def clean_cfg(cfg: Mapping[str, Any] | None) -> dict[str, Any]:
    """``cfg`` with tuples as lists and the None values dropped, in :data:`PRETRAINED_CFG_KEYS` order (JSON form)."""
    cfg = dict(cfg or {})
    unknown = sorted(set(cfg) - set(PRETRAINED_CFG_KEYS))
    if unknown:
        raise ZooError(f"pretrained_cfg has unknown keys {unknown}; valid keys: {', '.join(PRETRAINED_CFG_KEYS)}")
    out = {}
    for key in PRETRAINED_CFG_KEYS:
        value = cfg.get(key)
        if value is not None:
            out[key] = list(value) if isinstance(value, tuple | list) else value
    return out


class PretrainedMixin(ExportHooks):
    """``pretrained_cfg`` and the huggingface_hub methods for a LightningModule of the zoo.

    A class sets ``DEFAULT_PRETRAINED_CFG`` (what its published weights take); a loaded module carries the
    ``pretrained_cfg`` of its ``config.json``.
    """

    DEFAULT_PRETRAINED_CFG: Mapping[str, Any] = {}

    @property
    def pretrained_cfg(self) -> dict[str, Any]:
        """Input format, size, value range, normalisation and label names (see :mod:`zoo._inference`)."""
        cfg = self.__dict__.get("_zoo_pretrained_cfg")
        return dict(cfg) if cfg is not None else clean_cfg(self.DEFAULT_PRETRAINED_CFG)

    @pretrained_cfg.setter
    def pretrained_cfg(self, cfg: Mapping[str, Any]) -> None:
        self.__dict__["_zoo_pretrained_cfg"] = clean_cfg(cfg)

    # ------------------------------------------------------------------------------ huggingface_hub names

    def save_pretrained(
        self,
        save_directory: str | Path,
        *,
        config: Mapping[str, Any] | None = None,
        repo_id: str | None = None,
        push_to_hub: bool = False,
        **push_to_hub_kwargs: Any,
    ) -> str | None:
        """Write ``config.json`` + ``model.safetensors`` (+ the module's extra files) into ``save_directory``.

        Args:
            save_directory: Destination folder (created).
            config: Extra JSON facts, stored under ``config.json["metadata"]``.
            repo_id: Hub repo for ``push_to_hub`` (default: the folder's name).
            push_to_hub: Also upload the folder with :meth:`push_to_hub`.
            **push_to_hub_kwargs: Passed to :meth:`push_to_hub`.

        Returns:
            The commit URL when pushed, else None (as huggingface_hub's ``save_pretrained``).
        """
        from zoo._serialization import save_pretrained

        save_pretrained(self, save_directory, **dict(config or {}))
        if push_to_hub:
            return self.push_to_hub(repo_id or Path(save_directory).name, config=config, **push_to_hub_kwargs)
        return None

    def push_to_hub(
        self,
        repo_id: str,
        *,
        config: Mapping[str, Any] | None = None,
        commit_message: str = "Push model using icml26-zoo.",
        private: bool | None = None,
        token: str | None = None,
        branch: str | None = None,
        create_pr: bool | None = None,
        allow_patterns: list[str] | str | None = None,
        ignore_patterns: list[str] | str | None = None,
        delete_patterns: list[str] | str | None = None,
    ) -> str:
        """Create ``repo_id`` if needed and upload the module's exported folder to it (one commit).

        Args:
            repo_id: ``org/name``.
            config: Extra JSON facts for ``config.json["metadata"]``.
            commit_message: Message of the commit.
            private: Create the repo private.
            token: Hub token (default: the logged-in one).
            branch: Branch to push to (default: the repo's main branch).
            create_pr: Open a pull request instead of committing.
            allow_patterns: Upload only the files matching these patterns.
            ignore_patterns: Skip the files matching these patterns.
            delete_patterns: Delete the remote files matching these patterns in the same commit.

        Returns:
            The URL of the commit (or pull request).
        """
        from huggingface_hub import HfApi, constants

        from zoo._errors import HubUnavailableError

        api = HfApi(token=token)
        with tempfile.TemporaryDirectory(prefix="zoo-push-") as folder:
            self.save_pretrained(folder, config=config)
            try:
                repo_id = api.create_repo(repo_id, private=private, exist_ok=True).repo_id
                info = api.upload_folder(
                    repo_id=repo_id,
                    folder_path=folder,
                    commit_message=commit_message,
                    revision=branch,
                    create_pr=create_pr,
                    allow_patterns=allow_patterns,
                    ignore_patterns=ignore_patterns,
                    delete_patterns=delete_patterns,
                )
            except Exception as error:
                if not _network_error(error):
                    raise
                raise HubUnavailableError(
                    f"could not reach the Hub at {constants.ENDPOINT} to push {repo_id} ({type(error).__name__}: "
                    f"{error}); check the network or HF_ENDPOINT, or save_pretrained(FOLDER) and push later"
                ) from None
        return info.pr_url or info.commit_url

    @classmethod
    def from_pretrained(
        cls,
        pretrained_model_name_or_path: str | Path,
        *,
        revision: str | None = None,
        map_location: str = "cpu",
        strict: bool = True,
        **model_kwargs: Any,
    ):
        """Load a folder or Hub repo written by :meth:`save_pretrained` / :meth:`push_to_hub` as this class.

        Args:
            pretrained_model_name_or_path: A local folder, or a Hub repo id ``org/name`` (``hf-hub:`` optional).
            revision: Hub revision (branch, tag or commit).
            map_location: Device of the weights.
            strict: Missing or unexpected weight keys are errors.
            **model_kwargs: Init arguments that replace the stored ones.

        Raises:
            ZooError: If the files build another class.
        """
        from zoo._serialization import HF_HUB_PREFIX, build_module

        source = str(pretrained_model_name_or_path)
        if not Path(source).is_dir() and not source.startswith(HF_HUB_PREFIX):
            if source.count("/") != 1 or source.startswith((".", "/")):
                raise ZooError(
                    f"{source} is neither a folder here (config.json + model.safetensors) nor a Hub repo id ORG/NAME; "
                    "check the path"
                )
            source = HF_HUB_PREFIX + source
        module = build_module(source, revision=revision, map_location=map_location, strict=strict, **model_kwargs)
        if not isinstance(module, cls):
            raise ZooError(
                f"{pretrained_model_name_or_path} holds a {type(module).__name__}, not a {cls.__name__}; "
                f"load it with zoo.load({str(pretrained_model_name_or_path)!r})"
            )
        return module


def _network_error(error: BaseException) -> bool:
    """No network, no DNS, a refused connection: an OSError, or an httpx transport error (huggingface_hub's client,
    whichever httpx build it uses)."""
    return isinstance(error, OSError) or any(cls.__name__ == "TransportError" for cls in type(error).__mro__)


class ImageClassifierMixin(PretrainedMixin):
    """Raw images in, class ids and label names out, with the preprocessing of ``pretrained_cfg``.

    ``HEAD`` names the classifier submodule (``"net.fc"``): ``zoo.load(name, pretrained=True, num_classes=K)``
    builds it afresh for K classes and loads every other weight.
    """

    HEAD: str | None = None

    @property
    def label_names(self) -> tuple[str, ...]:
        """Class names by class id: the published names, or ``class_0 ... class_{K-1}`` for a new K-class head (or
        weights that do not name their classes)."""
        names = tuple(self.pretrained_cfg.get("label_names", ()))
        classes = getattr(getattr(self, "hparams", None), "num_classes", None)
        if classes is None or classes == len(names):
            return names
        return tuple(f"class_{i}" for i in range(classes))  # a new head: the published names no longer apply

    @property
    def id2label(self) -> dict[int, str]:
        """``{class id: name}`` as in transformers' configs."""
        return dict(enumerate(self.label_names))

    def transform(self, images: Any):
        """Raw images to the model's input: scale to ``value_range``, add the channel axis, normalise.

        Args:
            images: uint8 pixels (0-255) or floats already in ``value_range`` (as a numpy array, tensor or
                PIL image), one image ``[H, W]`` / ``[C, H, W]`` or a batch ``[N, H, W]`` / ``[N, C, H, W]``.

        Returns:
            A float tensor ``[N, C, H, W]`` on the module's device, ready for ``forward``.

        Raises:
            ZooError: Wrong size, or floats outside ``value_range`` (already normalised images, most often).
        """
        import numpy as np
        import torch

        cfg = self.pretrained_cfg
        x = images if isinstance(images, torch.Tensor) else torch.as_tensor(np.array(images))
        low, high = cfg.get("value_range", (0.0, 1.0))
        if x.dtype == torch.uint8:
            x = x.float() / 255.0 * (high - low) + low
        elif x.is_floating_point():
            lo, hi = float(x.min()), float(x.max())
            if low - 1e-6 <= lo and high + 1e-6 < hi <= 255.0:  # floats holding 0-255 pixels, not normalised ones
                raise ZooError(
                    f"the images are floats in [{lo:.3g}, {hi:.3g}]: 0-255 pixels stored as floats; pass them as uint8 "
                    f"(images.astype('uint8')) or divided by 255, and transform() applies {self._normalisation()}"
                )
            if lo < low - 1e-6 or hi > high + 1e-6:
                raise ZooError(
                    f"the images hold values in [{lo:.3g}, {hi:.3g}], but {type(self).__name__} takes raw pixels "
                    f"(uint8 0-255 or floats in [{low:g}, {high:g}]); pass them unnormalised, transform() "
                    f"applies {self._normalisation()}"
                )
            x = x.float()
        else:
            raise ZooError(f"images of dtype {x.dtype}: pass uint8 pixels or floats in [{low:g}, {high:g}]")
        size = tuple(cfg.get("input_size", x.shape[-3:] if x.dim() >= 3 else (1, *x.shape)))
        channels = size[0]
        if x.dim() == 2 or (x.dim() == 3 and channels != 1 and x.shape[0] == channels):
            x = x.unsqueeze(0)  # one image
        if x.dim() == 3:
            x = x.unsqueeze(1)  # a batch of single-channel images
        if x.dim() != 4 or tuple(x.shape[1:]) != size:
            raise ZooError(
                f"images of shape {tuple(x.shape)} do not fit {type(self).__name__}, which takes {list(size)} "
                "(C, H, W) images: pass [H, W], [N, H, W] or [N, C, H, W]"
            )
        if cfg.get("mean") is not None:
            mean = torch.tensor(cfg["mean"], dtype=x.dtype).view(1, -1, 1, 1)
            std = torch.tensor(cfg["std"], dtype=x.dtype).view(1, -1, 1, 1)
            x = (x - mean) / std
        return x.to(self.device)

    def _normalisation(self) -> str:
        cfg = self.pretrained_cfg
        if cfg.get("mean") is None:
            return "no further normalisation (the network normalises inside forward)"
        return f"mean {cfg['mean']} and std {cfg['std']}"

    def predict(self, images: Any, batch_size: int = 2000):
        """Class ids of raw images (see :meth:`transform`), in batches, in eval mode without gradients.

        Args:
            images: Raw images, as :meth:`transform` takes them.
            batch_size: Images per forward pass.

        Returns:
            A long tensor ``[N]`` of class ids; ``model.label_names[i]`` names class ``i``.
        """
        import torch

        x = self.transform(images)
        was_training = self.training
        self.eval()
        with torch.no_grad():
            ids = torch.cat([self(chunk).argmax(-1).cpu() for chunk in x.split(batch_size)])
        self.train(was_training)
        return ids
