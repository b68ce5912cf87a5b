"""Packaging beyond what pyproject.toml can say: the offline mirror ``hub_cards/`` ships in the wheel as
``zoo/hub_cards/<name>/`` (it lives at the repository root, outside the package)."""

from setuptools import find_packages, setup

setup(
    packages=[*find_packages(include=["zoo", "zoo.*"]), "zoo.hub_cards"],
    package_dir={"zoo.hub_cards": "hub_cards"},
    package_data={"zoo.hub_cards": ["*/*"]},
)
