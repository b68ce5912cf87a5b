"""Packaging beyond what pyproject.toml can say: the cards ``hub_cards/`` and the recipes ``recipes/`` ship in the
wheel as ``zoo/hub_cards/<name>/`` and ``zoo/recipes/<paper>/*.yaml`` (they live at the repository root, outside
the package, where a checkout's ``zoo fit -c recipes/...`` finds them). The wheel carries the cards' text only
(README, config.json, metrics.json, pieces.json, the figure), never weights: an installed zoo fetches them from the
Hub into the HF cache (``zoo download NAME``), and a checkout or ``ZOO_MIRROR`` serves them offline."""

from pathlib import Path

from setuptools import find_packages, setup

CARD_TEXT = ["*/README.md", "*/config.json", "*/metrics.json", "*/pieces.json", "*/*.png"]
#: What the paper packages read at run time besides code: pins, tuning records, card text, question lists.
PAPER_DATA = ["*/*.json", "*/*.md", "*/*.txt"]

here = Path(__file__).parent
data = {package: folder for package, folder in (("zoo.hub_cards", "hub_cards"), ("zoo.recipes", "recipes"))}
data = {package: folder for package, folder in data.items() if (here / folder).is_dir()}
patterns = {"zoo.hub_cards": CARD_TEXT, "zoo.recipes": ["*/*"]}
setup(
    packages=[*find_packages(include=["zoo", "zoo.*"]), *data],
    package_dir=data,
    package_data={"zoo": PAPER_DATA, **{name: patterns[name] for name in data}},
    include_package_data=False,
)
