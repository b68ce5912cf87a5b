"""What a piece of an evaluation sees: :class:`Run` (one seed's settings and ways to get an arm's model)."""

from __future__ import annotations

import json
import logging
import shutil
import tempfile
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from zoo._errors import ZooError
from zoo._registry import ModelEntry, get_entry
from zoo.eval.protocol import Protocol
from zoo.eval.store import FitStore, code_digest, digest


class Run:
    """One seed of an evaluation: the settings, the seed, and the models of the arms.

    ``measure`` functions and ``score`` receive it. ``extras`` collects what a piece records beside its metrics
    (curves, chosen hyperparameters); the harness stores it with the piece and merges it per seed.

    Args:
        protocol: The paper's protocol.
        paper: The paper's package name (its code digest keys the stored fits).
        seed: This run's seed.
        settings: The resolved settings.
        entries: The registered entries of the evaluation, by the arm their weights are.
        retrain: Train every arm instead of loading published weights.
        weights: An exported folder that replaces the method's published weights.
        fits: Where trained modules are kept (shared by every run of the evaluation).
    """

    def __init__(
        self,
        protocol: Protocol,
        paper: str,
        seed: int,
        settings: Mapping[str, Any],
        entries: Mapping[str, ModelEntry],
        retrain: bool = False,
        weights: str | Path | None = None,
        fits: FitStore | None = None,
    ) -> None:
        self.protocol = protocol
        self.paper = paper
        self.seed = seed
        self.settings = dict(settings)
        self.entries = entries
        self.retrain = retrain
        self.weights = weights
        self.fits = fits if fits is not None else FitStore()
        self.extras: dict[str, Any] = {}
        self._memo: dict[Any, Any] = {}

    def for_seed(self, seed: int) -> Run:
        """The same evaluation at another seed (sharing the stored fits), e.g. a target measured over seeds."""
        return Run(self.protocol, self.paper, seed, self.settings, self.entries, self.retrain, self.weights, self.fits)

    def memo(self, key: Any, compute: Callable[[], Any]) -> Any:
        """``compute()`` once per run and key (data several arms of this seed read, such as a test pool)."""
        if key not in self._memo:
            self._memo[key] = compute()
        return self._memo[key]

    def entry(self, arm: str) -> ModelEntry:
        """The registered entry whose weights are ``arm`` (an arm's ``entry=``, or the entry with ``arm=``); a full
        registry name ``paper.tag`` names that entry directly."""
        if "." in arm:
            return get_entry(arm)
        declared = self.protocol.arm(arm).entry if arm in self.protocol.arms else None
        if declared:
            return get_entry(declared if "." in declared else f"{self.paper}.{declared}")
        if arm not in self.entries:
            raise ZooError(f"arm {arm!r} has no registered entry; registered arms: {', '.join(self.entries)}")
        return self.entries[arm]

    def has_entry(self, arm: str) -> bool:
        return bool(self.protocol.arm(arm).entry) or arm in self.entries

    def recipe_overrides(self) -> list[str]:
        """LightningCLI arguments for the settings that differ from the protocol's defaults."""
        args = []
        for key, setting in self.protocol.settings.items():
            if self.settings[key] != setting.default:
                value = self.settings[key]
                text = json.dumps(list(value)) if isinstance(value, list | tuple) else str(value)
                args += [f"--{recipe_key}={text}" for recipe_key in setting.recipe_keys]
        return args

    def uses_published(self, arm: str) -> bool:
        """Whether :meth:`load` returns the published weights (or ``--weights``) rather than training."""
        if arm == self.protocol.method_name and self.weights is not None:
            return True
        spec = self.protocol.arm(arm)
        if spec.base or spec.recipe or spec.overrides or not self.has_entry(arm):
            return False
        return bool(
            self.entry(arm).pretrained_cfg.has_weights
            and not self.retrain
            and not self.recipe_overrides()
            and self.seed == self.protocol.published_seed
        )

    def load(self, arm: str):
        """The trained model of ``arm`` for this seed.

        The published checkpoint when it is this seed's run (seed ``published_seed``, default settings, no
        ``--retrain``); for the method, the ``--weights`` folder when given; otherwise a fit of the arm's recipe
        (its ``base``'s entry's, or its own ``recipe``) with its overrides.
        """
        import zoo

        spec = self.protocol.arm(arm)
        if spec.measure is not None:
            raise ZooError(f"arm {arm!r} is measured by its measure= function; it has no model to load")
        if arm == self.protocol.method_name and self.weights is not None:
            return zoo.load_folder(self.weights).eval()
        if self.uses_published(arm):
            return self.published(arm)
        recipe = spec.recipe or self.entry(spec.base or arm).pretrained_cfg.recipe
        if not recipe:
            raise ZooError(f"arm {arm!r} has no recipe to train from: give its Arm base= or recipe=")
        return self.fit(recipe, spec.fit_overrides(self))

    def published(self, arm: str):
        """The published weights of ``arm``'s entry (or of the entry ``paper.tag``), whatever the seed: for models a
        seed only samples from, or a base every seed's arm starts from."""
        import zoo

        entry = self.entry(arm)
        key = ("published", entry.name)
        if key not in self.fits.memory:
            self.fits.memory[key] = zoo.load(entry.name, pretrained=True)
        return self.fits.memory[key]

    def untrained(self, arm: str, **init_args: Any):
        """The architecture of ``arm``'s entry with fresh weights seeded by this run's seed (a reference arm)."""
        import torch

        import zoo

        torch.manual_seed(self.seed)
        return zoo.load(self.entry(arm).name, **init_args).eval()

    def fit(self, recipe: str, overrides: Sequence[str] = ()):
        """Train ``recipe`` with this seed, the settings' recipe keys and ``overrides``; each fit happens once.

        A fit is kept in memory and, with the evaluation cache on, as an exported folder (reloaded from there
        every time, so a resumed run sees exactly what the first run saw).
        """
        from zoo._recipes import resolve_recipe
        from zoo._serialization import load_folder, save_pretrained

        fit_args = self.protocol.fit_args
        args = [*self.recipe_overrides(), *(fit_args(self) if callable(fit_args) else fit_args), *overrides]
        text = Path(resolve_recipe(recipe)).read_text()
        key = {"recipe": text, "seed": self.seed, "seed_args": self.protocol.seed_args, "overrides": args}
        key["code"] = code_digest(self.paper, training=True)
        name = digest(key)
        if name in self.fits.memory:
            return self.fits.memory[name]
        folder = self.fits.folder(key)
        with self.fits.locked(key):
            if folder is None or not (folder / "config.json").is_file():
                module = fit_recipe(recipe, self.seed, args, self.protocol.seed_args)
                if folder is not None:
                    partial = folder.with_name(folder.name + ".partial")
                    shutil.rmtree(partial, ignore_errors=True)
                    save_pretrained(module, partial, fit={"recipe": recipe, "seed": self.seed, "overrides": args})
                    partial.rename(folder)
            if folder is not None:
                module = load_folder(folder)
        self.fits.memory[name] = module
        return module


def fit_recipe(
    recipe: str,
    seed: int,
    overrides: Sequence[str] = (),
    seed_args: Sequence[str] = ("seed_everything",),
    callbacks: Sequence[Any] = (),
):
    """Train the recipe's model with ``seed`` and ``overrides`` through the zoo's LightningCLI.

    Nothing of the recipe's settings is copied here: the recipe is the single source, and the harness only
    sets the seed keys, silences the logger and progress bar, and writes into a temporary folder.

    Args:
        recipe: The recipe: a path, or a packaged recipe's name such as ``recipes/fedgr/fedavg.yaml``.
        seed: The seed, given to every key of ``seed_args``.
        overrides: Further LightningCLI arguments (``--model.init_args.x=1``).
        seed_args: LightningCLI keys that receive the seed.
        callbacks: Lightning callbacks added to the recipe's own for this fit (e.g. a tuning's per-epoch check).

    Returns:
        The trained LightningModule in eval mode.
    """
    from zoo._lightning_cli import ZooCLI
    from zoo._recipes import resolve_recipe

    path = resolve_recipe(recipe)  # the checkout's recipes/ or the wheel's zoo/recipes; RecipeError if neither
    logging.getLogger("lightning.pytorch").setLevel(logging.WARNING)
    with tempfile.TemporaryDirectory(prefix="zoo-eval-") as folder:
        args = ["-c", path, *(f"--{k}={seed}" for k in seed_args)]
        args += [
            "--trainer.logger=false",
            "--trainer.enable_progress_bar=false",
            "--trainer.enable_model_summary=false",
            f"--trainer.default_root_dir={folder}",
            *overrides,
        ]
        cli = ZooCLI(args=args, run=False)
        cli.trainer.callbacks.extend(callbacks)
        cli.trainer.fit(cli.model, datamodule=cli.datamodule)
    return cli.model.eval()
