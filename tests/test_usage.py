"""Every card's Usage snippet runs exactly as written and predicts the truth of the input it shows.

The snippet is read back from ``hub_cards/<name>/README.md`` (so the card is what is tested) and must equal
``zoo/<paper>/usage.py``'s (so the card is current). It ends with ``prediction: P | truth: T``: a label must equal
the truth; with ``| tolerance: E`` a number must be within E of it. The default run executes one entry per
paper where that is quick; ``-m slow`` runs every card's snippet.
"""

from __future__ import annotations

import contextlib
import io
import re

import pytest

import zoo
from zoo._cards import usage_snippet

#: Entries whose snippet the default run executes (a few seconds each); every other entry's runs with -m slow.
FAST = {"dwp.standard", "fedgr.fashion_mnist", "specexit.arith"}
LINE = re.compile(r"^prediction: (?P<p>.+?) \| truth: (?P<t>.+?)(?: \| tolerance: (?P<e>\S+))?$", re.M)


def card_snippet(name: str) -> str:
    """The first ``python`` block of the card's Usage section."""
    text = (zoo.get_entry(name).mirror_dir / "README.md").read_text()
    usage = text.split("## Usage", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```python\n(.*?)```", usage, re.S)
    assert blocks, f"{name}: the card's Usage section has no python block"
    return blocks[0]


def check_output(name: str, output: str) -> None:
    """The last ``prediction: ... | truth: ...`` line holds."""
    found = list(LINE.finditer(output))
    assert found, f"{name}: the snippet printed no 'prediction: P | truth: T' line:\n{output}"
    line = found[-1]
    if line["e"] is None:
        assert line["p"].strip() == line["t"].strip(), f"{name}: {line[0]}"
    else:
        assert abs(float(line["p"]) - float(line["t"])) <= float(line["e"]), f"{name}: {line[0]}"


def run_snippet(name: str) -> str:
    code = card_snippet(name)
    assert code.strip() == (usage_snippet(zoo.get_entry(name)) or "").strip(), (
        f"{name}: the card's snippet differs from zoo/{name.split('.')[0]}/usage.py; run `zoo card {name}`"
    )
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(code, f"<card {name}>", "exec"), {"__name__": "__card__"})
    return out.getvalue()


def _params():
    for name in zoo.list_models():
        marks = () if name in FAST else (pytest.mark.slow,)
        yield pytest.param(name, marks=marks, id=name)


@pytest.mark.parametrize("name", list(_params()))
def test_card_snippet_predicts_the_truth(name):
    check_output(name, run_snippet(name))


@pytest.mark.parametrize("name", zoo.list_models())
def test_every_card_has_a_usage_snippet_from_its_paper(name):
    entry = zoo.get_entry(name)
    assert usage_snippet(entry), f"{name}: zoo/{entry.paper}/usage.py is missing"
    assert card_snippet(name).strip() == usage_snippet(entry).strip(), f"{name}: run `zoo card {name}`"


@pytest.mark.parametrize(
    ("output", "holds"),
    [
        ("prediction: Bag | truth: Bag\n", True),
        ("prediction: Bag | truth: Coat\n", False),
        ("prediction: 10.5 | truth: 10.0 | tolerance: 1.0\n", True),
        ("prediction: 12.5 | truth: 10.0 | tolerance: 1.0\n", False),
        ("no verdict\n", False),
    ],
)
def test_the_check_fails_on_a_wrong_prediction(output, holds):
    if holds:
        check_output("x", output)
    else:
        with pytest.raises(AssertionError):
            check_output("x", output)
