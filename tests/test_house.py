"""The structure of the zoo: one way to register, pins as data, no god-modules, papers that stand alone."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from zoo._registry import PAPER_NAMES

ROOT = Path(__file__).resolve().parents[1]
ZOO = ROOT / "zoo"
SOURCES = sorted(ZOO.rglob("*.py"))
MAX_LINES = 500


def _imports(path: Path) -> list[str]:
    names = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.append(node.module)
    return names


def test_no_file_of_the_zoo_is_a_god_module():
    long = {str(p.relative_to(ROOT)): n for p in SOURCES if (n := len(p.read_text().splitlines())) > MAX_LINES}
    assert not long, f"files over {MAX_LINES} lines: {long}"


def test_every_paper_registers_once_through_register_paper_and_pins_are_data():
    for paper in PAPER_NAMES:
        text = (ZOO / paper / "__init__.py").read_text()
        assert "register_model(" not in text, f"zoo/{paper}/__init__.py: use one register_paper call"
        assert text.count("register_paper(") == 1, f"zoo/{paper}/__init__.py: one register_paper call"
    hexes = [str(p.relative_to(ROOT)) for p in SOURCES if re.search(r"\b[0-9a-f]{64}\b", p.read_text())]
    assert not hexes, f"sha256 digests spelled in code (they belong in zoo/<paper>/pins.json): {hexes}"


def test_every_paper_with_published_weights_has_its_pins_file():
    import zoo

    for name in zoo.list_models(pretrained=True):
        paper = zoo.get_entry(name).paper
        assert (ZOO / paper / "pins.json").is_file(), f"{name}: zoo/{paper}/pins.json is missing"


@pytest.mark.parametrize("paper", PAPER_NAMES)
def test_a_paper_imports_no_other_paper(paper):
    others = {f"zoo.{name}" for name in PAPER_NAMES if name != paper}
    for path in sorted((ZOO / paper).rglob("*.py")):
        bad = [name for name in _imports(path) if any(name == o or name.startswith(o + ".") for o in others)]
        assert not bad, f"{path.relative_to(ROOT)} imports {bad}: shared code belongs in zoo/common"


def test_no_module_imports_back_up_into_the_package_root_and_no_old_harness_is_left():
    for path in SOURCES:
        if path.parent == ZOO and path.name.startswith("_"):  # the core's private modules sit below zoo/__init__
            assert "zoo" not in _imports(path), f"{path.relative_to(ROOT)} imports zoo/__init__ (a cycle upward)"
        text = path.read_text()
        assert "RUN_INFO" not in text and "zoo._eval" not in text, path
    assert not (ZOO / "_eval.py").exists()


def test_the_only_cache_variables_are_the_eval_cache_and_the_data_cache_root():
    allowed = {"ZOO_EVAL_CACHE", "ZOO_CACHE_DIR", "ZOO_MIRROR", "ZOO_QUIET"}  # the last two are no caches
    found = set()
    for path in SOURCES:
        found |= set(re.findall(r"\bZOO_[A-Z0-9_]+\b", path.read_text()))
    assert found <= allowed, f"environment variables beyond {sorted(allowed)}: {sorted(found - allowed)}"
