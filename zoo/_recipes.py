"""Where the LightningCLI recipes live, and how ``zoo fit -c NAME`` finds one.

The recipes ship inside the package: ``zoo/recipes/<paper>/<variant>.yaml`` in a wheel (setup.py maps
the repository's ``recipes/`` there, as it does ``hub_cards/``), ``recipes/`` at the root of a checkout.
A recipe is named by a path that exists, or by ``<paper>/<variant>`` with or without ``recipes/`` and
``.yaml`` (the registry's ``recipe`` paths and the cards' ``zoo fit -c recipes/...`` resolve from any
working directory).
"""

from __future__ import annotations

import difflib
import os
from pathlib import Path

from zoo._errors import RecipeError

SUFFIXES = (".yaml", ".yml")


def recipes_root() -> Path:
    """Folder holding ``<paper>/<variant>.yaml``: ``zoo/recipes`` in a wheel, else ``recipes/`` in a checkout."""
    package_dir = Path(__file__).resolve().parent
    for candidate in (package_dir / "recipes", package_dir.parent / "recipes"):
        if candidate.is_dir():
            return candidate
    return package_dir.parent / "recipes"


def packaged_recipes() -> list[str]:
    """Names ``<paper>/<variant>`` of every packaged recipe, sorted."""
    root = recipes_root()
    if not root.is_dir():
        return []
    return sorted(str(p.relative_to(root).with_suffix("")) for p in root.rglob("*") if p.suffix in SUFFIXES)


def resolve_recipe(value: str) -> str:
    """The file a ``-c`` argument names: the path itself if it exists, else the packaged recipe of that name.

    Args:
        value: ``recipes/dwp/standard.yaml``, ``dwp/standard.yaml`` or ``dwp/standard``.

    Returns:
        ``value`` when it is an existing file, else the absolute path of the packaged recipe.

    Raises:
        RecipeError: Neither exists; names the closest packaged recipes.
    """
    if Path(value).is_file():
        return value
    name = value.replace(os.sep, "/")
    name = name.removeprefix("./").removeprefix("recipes/")
    stem = name[: -len(Path(name).suffix)] if name.endswith(SUFFIXES) else name
    root = recipes_root()
    for suffix in SUFFIXES:
        candidate = root / f"{stem}{suffix}"
        if candidate.is_file():
            return str(candidate)
    known = packaged_recipes()
    close = difflib.get_close_matches(stem, known, n=3, cutoff=0.5)
    hint = f"did you mean {', '.join(close)}?" if close else f"the packaged recipes are under {root}"
    raise RecipeError(f"recipe {value} does not exist here nor among the packaged recipes; {hint}")


def recipe_label(value: str, resolved: str) -> str:
    """How the run records its recipe: as typed when that file exists, else ``recipes/<paper>/<variant>.yaml``."""
    if value == resolved:
        return value
    return "recipes/" + Path(resolved).resolve().relative_to(recipes_root().resolve()).as_posix()
