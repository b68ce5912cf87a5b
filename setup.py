"""Packaging beyond what pyproject.toml can say: the offline mirror ``hub_cards/`` and the recipes ``recipes/``
ship in the wheel as ``zoo/hub_cards/<name>/`` and ``zoo/recipes/<paper>/*.yaml`` (they live at the repository
root, outside the package, where a checkout's ``zoo fit -c recipes/...`` finds them)."""

from pathlib import Path

from setuptools import find_packages, setup

here = Path(__file__).parent
data = {package: folder for package, folder in (("zoo.hub_cards", "hub_cards"), ("zoo.recipes", "recipes"))}
data = {package: folder for package, folder in data.items() if (here / folder).is_dir()}
setup(
    packages=[*find_packages(include=["zoo", "zoo.*"]), *data],
    package_dir=data,
    package_data={name: ["*/*"] for name in data},
)
