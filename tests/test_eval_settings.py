"""Every evaluation setting that retrains through recipe keys defaults to what the method's recipe says.

``zoo eval`` passes a setting to the recipe only when it differs from its default (``Run.recipe_overrides``), so a
default that drifts from the recipe (say, a draft recipe moved to 1,200 steps while the setting still says 600)
would retrain every non-published seed at the old value and compare it with the published one.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

import zoo
from zoo._errors import MissingExtraError
from zoo._recipes import resolve_recipe
from zoo.eval.engine import evaluation


def evaluations() -> list[str]:
    """One entry name per evaluation of the zoo (a paper may have several: gemq)."""
    names, seen = [], set()
    for name in zoo.list_models():
        evaluate = zoo.get_entry(name).evaluate
        if evaluate and evaluate not in seen:
            seen.add(evaluate)
            names.append(name)
    return names


def _lookup(recipe: dict, dotted: str):
    node = recipe
    for part in dotted.split("."):
        if not isinstance(node, dict) or part not in node:
            return None, False
        node = node[part]
    return node, True


@pytest.mark.parametrize("name", evaluations())
def test_setting_defaults_match_the_method_recipe(name):
    try:
        ev = evaluation(name)
    except MissingExtraError as err:  # a tox environment without this paper's extra
        pytest.skip(str(err))
    protocol = ev.protocol
    method = ev.entries.get(protocol.method_name)
    if method is None or not method.pretrained_cfg or not method.pretrained_cfg.recipe:
        pytest.skip(f"{name}: the method has no recipe")
    recipe = yaml.safe_load(Path(resolve_recipe(method.pretrained_cfg.recipe)).read_text())
    for key, setting in protocol.settings.items():
        for recipe_key in setting.recipe_keys:
            value, present = _lookup(recipe, recipe_key)
            if present:  # keys the recipe leaves to the code's defaults cannot drift from it here
                assert value == setting.default, (
                    f"{name}: setting {key}={setting.default!r}, recipe {recipe_key}={value!r}"
                )
