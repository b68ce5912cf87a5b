"""Tune the regex stop (``reference_regex_stop``) on validation traces and measure the issue-62 headroom gate.

For each trace grammar (``checks``: the recipes' traces, which the published target is trained on; ``unmarked``:
:mod:`zoo.specexit.grammar`, no surface marker at the answer-fixing point) the 31 stop patterns of
:func:`~zoo.specexit.grammar.regex_family` are scored on the clean traces of the 100 validation problems (3-6
operands) that calibrate SpecExit's thresholds, and the one with the fewest thinking tokens within 1 accuracy point
of the full traces is kept (SpecExit's rule; its grid has 36 trials). The gate then compares the chosen stop with
the oracle exit at ``L*`` on those traces and on 40 longer validation problems (7-10 operands). No model is used:
this runs in seconds, before any training::

    python -m zoo.specexit.tune

It writes ``zoo/specexit/tuning.json``, which ``zoo eval specexit`` reads (``zoo reproduce specexit``: first step).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from zoo.specexit.data import validation_problems
from zoo.specexit.grammar import GRAMMARS, RegexStop, headroom, make_trace, tune_regex
from zoo.specexit.tokenizer import TraceTokenizer

TUNING_FILE = Path(__file__).with_name("tuning.json")
#: The recipe of the published entry (the draft stage; its data's ``grammar`` is the published target's as well).
RECIPE = "recipes/specexit/arith.yaml"


def recipe_grammar(recipe: str = RECIPE) -> str:
    """The trace grammar ``recipe`` trains on: its ``data.init_args.grammar`` (``checks`` when unset or when the
    recipe is not found)."""
    import yaml

    from zoo._recipes import RecipeError, resolve_recipe

    try:
        text = Path(resolve_recipe(recipe)).read_text()
    except RecipeError:
        return "checks"
    data = (yaml.safe_load(text) or {}).get("data") or {}
    return (data.get("init_args") or {}).get("grammar", "checks")


#: The grammar of the recipes' traces, i.e. of the published target.
PUBLISHED_GRAMMAR = recipe_grammar()
TUNE_PROBLEMS, LONG_PROBLEMS = 100, 40
UNITS = {"3-6 operands": (TUNE_PROBLEMS, (3, 6)), "7-10 operands": (LONG_PROBLEMS, (7, 10))}


def tune(grammar: str) -> dict:
    """The chosen stop of ``grammar``, every trial, and the gate on each validation unit."""
    tokenizer = TraceTokenizer()
    traces = {
        unit: [make_trace(p, tokenizer, grammar) for p in validation_problems(n, ops)]
        for unit, (n, ops) in UNITS.items()
    }
    chosen, trials = tune_regex(traces["3-6 operands"], tokenizer)
    rule = RegexStop(chosen, tokenizer)
    gate = {unit: headroom(rule, unit_traces) for unit, unit_traces in traces.items()}
    rounded = {name: {k: round(v, 4) for k, v in scores.items()} for name, scores in trials}
    return {"chosen": chosen.name, "pattern": chosen.pattern, "trials": rounded, "gate": gate}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", default=str(TUNING_FILE))
    args = parser.parse_args()
    record = {
        "published_grammar": PUBLISHED_GRAMMAR,
        "rule": "fewest thinking tokens within 1 accuracy point of the full clean traces (SpecExit's calibration)",
        "units": {unit: {"problems": n, "operands": list(ops)} for unit, (n, ops) in UNITS.items()},
        "grammars": {grammar: tune(grammar) for grammar in GRAMMARS},
    }
    Path(args.json).write_text(json.dumps(record, indent=1) + "\n")
    for grammar, result in record["grammars"].items():
        gates = ", ".join(f"{unit} {g['gate']:.3g}" for unit, g in result["gate"].items())
        print(f"{grammar}: {result['chosen']}; gate (>= 1 holds) {gates}")


if __name__ == "__main__":
    main()
