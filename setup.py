"""Packaging beyond what pyproject.toml can say: the offline mirror ``hub_cards/`` ships in the wheel as
``zoo/hub_cards/<name>/`` (it lives at the repository root, outside the package)."""

from pathlib import Path

from setuptools import find_packages, setup

mirror = {"zoo.hub_cards": "hub_cards"} if (Path(__file__).parent / "hub_cards").is_dir() else {}
setup(
    packages=[*find_packages(include=["zoo", "zoo.*"]), *mirror],
    package_dir=mirror,
    package_data={name: ["*/*"] for name in mirror},
)
