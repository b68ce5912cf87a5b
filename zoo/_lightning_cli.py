"""The zoo's LightningCLI (imports Lightning: the registry commands and the harness import this module lazily).

``ZooCLI`` runs in subclass mode for both model and data, so a recipe names any LightningModule /
LightningDataModule by class path. Beyond LightningCLI it

* keeps a :class:`~zoo._run.RunRecord` (command, recipes, the fully resolved config) and hands it to every
  ``ExportPretrained`` callback, which records its export there;
* loads an exported folder's weights into the recipe's model (``weights=``, ``zoo test --weights DIR``);
* refuses to validate, test or predict with a model that was never trained, unless ``untrained=True``;
* turns ``--ckpt_path`` at a safetensors file or an exported folder into a one-line error.
"""

from __future__ import annotations

import logging
from pathlib import Path

from lightning.pytorch import LightningDataModule, LightningModule
from lightning.pytorch.cli import LightningCLI

from zoo._errors import ZooError
from zoo._hooks import ExportHooks
from zoo._run import RunRecord

logger = logging.getLogger("zoo.cli")


class ZooCLI(LightningCLI):
    """LightningCLI with subclass mode for model and data, and one-line errors for bad recipes.

    Args:
        args: Command-line arguments (default: ``sys.argv``).
        run: Run the subcommand.
        weights: An exported folder (config.json + model.safetensors) whose weights are loaded into
            the recipe's model before the subcommand runs.
        untrained: Allow validate/test/predict on a trainable model without weights or checkpoint.
        record: The command's record (a new one by default); exports are added to it.
        **kwargs: As for ``LightningCLI``.
    """

    def __init__(
        self,
        args=None,
        run: bool = True,
        *,
        weights: str | None = None,
        untrained: bool = False,
        record: RunRecord | None = None,
        **kwargs,
    ) -> None:
        self.zoo_weights = weights
        self.zoo_untrained = untrained
        self.record = record if record is not None else RunRecord()
        kwargs.setdefault("save_config_kwargs", {"overwrite": True})
        kwargs.setdefault("parser_kwargs", {"exit_on_error": False})
        super().__init__(
            LightningModule,
            LightningDataModule,
            subclass_mode_model=True,
            subclass_mode_data=True,
            args=args,
            run=run,
            **kwargs,
        )

    def parse_arguments(self, parser, args) -> None:
        # LightningCLI warns when it gets args while the host process has its own argv (the zoo's harness and
        # its tests); the zoo always passes the arguments it means, so parse them without the warning.
        self.config = parser.parse_args(args)

    def before_instantiate_classes(self) -> None:
        self.record.config = self._resolved_config()

    def instantiate_classes(self) -> None:
        super().instantiate_classes()
        from zoo.callbacks import ExportPretrained

        for callback in self.trainer.callbacks:
            if isinstance(callback, ExportPretrained):
                callback.record = self.record

    def _resolved_config(self) -> dict | None:
        """The config the run uses (recipe, overrides and defaults) as plain data, or None if it cannot dump."""
        import yaml

        subcommand = self.subcommand
        config = self.config.get(str(subcommand), self.config) if subcommand else self.config
        try:
            parser = self._parser(subcommand)
            return yaml.safe_load(parser.dump(config, skip_none=False, skip_check=True))
        except Exception as error:  # a record, not worth failing the run over
            logger.debug("could not dump the resolved config: %s", error)
            return None

    def _ckpt_path(self, subcommand: str):
        config = self.config.get(subcommand, self.config)
        ckpt_path = config.get("ckpt_path") if hasattr(config, "get") else None
        if ckpt_path is None:
            return None
        path = Path(str(ckpt_path))
        if path.suffix == ".safetensors" or (path / "config.json").is_file():
            folder = path.parent if path.suffix == ".safetensors" else path
            raise ZooError(
                f"--ckpt_path {ckpt_path} is an exported folder's weights, not a Lightning .ckpt checkpoint; "
                f"pass --weights {folder} instead"
            )
        if self.zoo_weights:
            raise ZooError(f"pass either --weights {self.zoo_weights} or --ckpt_path {ckpt_path}, not both")
        return ckpt_path

    def _load_zoo_weights(self) -> None:
        from zoo._serialization import import_object, load_weights, module_init_args, read_config

        folder = Path(self.zoo_weights)
        config = read_config(folder)
        cls = type(self.model)
        built = f"{cls.__module__}.{cls.__qualname__}"
        stored = config.get("class_path")
        if stored != built and (stored is None or import_object(stored) is not cls):
            raise ZooError(f"--weights {folder} holds a {stored}, but the recipe builds a {built}; use its recipe")
        differing = sorted(
            key
            for key, value in config.get("init_args", {}).items()
            if module_init_args(self.model).get(key, value) != value
        )
        if differing:
            logger.warning(
                "--weights %s was exported with other init args (%s) than the recipe's; the recipe's are used",
                folder,
                ", ".join(differing),
            )
        if isinstance(self.model, ExportHooks):
            self.model.import_files(folder)
        load_weights(self.model, folder)
        logger.info("loaded the weights of %s into %s", folder, cls.__name__)

    def before_fit(self) -> None:
        self._ckpt_path("fit")
        if self.zoo_weights:
            self._load_zoo_weights()

    def _before_evaluation(self, subcommand: str) -> None:
        from lightning.pytorch.utilities.model_helpers import is_overridden

        ckpt_path = self._ckpt_path(subcommand)
        if self.zoo_weights:
            self._load_zoo_weights()
        elif ckpt_path is None and not self.zoo_untrained and is_overridden("training_step", self.model):
            raise ZooError(
                f"zoo {subcommand} would run an untrained {type(self.model).__name__}: pass --weights DIR (the "
                "folder `zoo fit` exported) or --ckpt_path FILE.ckpt, or --untrained to run it as initialised"
            )

    def before_validate(self) -> None:
        self._before_evaluation("validate")

    def before_test(self) -> None:
        self._before_evaluation("test")

    def before_predict(self) -> None:
        self._before_evaluation("predict")
