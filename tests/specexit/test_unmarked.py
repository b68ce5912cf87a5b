"""The ``grammar`` switch (position ids, exit label, oracle exit, data module) on the unmarked grammar the recipes
publish, and the first recipes' ``checks`` grammar (still the modules' default) unchanged."""

from __future__ import annotations

import random
import re
from pathlib import Path

import pytest
import torch

from zoo._errors import ZooError
from zoo.specexit.data import ArithmeticTraceDataModule, TraceDataset
from zoo.specexit.exits import OracleExit
from zoo.specexit.grammar import build_unmarked_trace
from zoo.specexit.module import SpecExitModule
from zoo.specexit.positions import position_ids
from zoo.specexit.tokenizer import TraceTokenizer
from zoo.specexit.traces import Problem, build_trace, exit_label, sample_problems, stated_value, steps_done

ROOT = Path(__file__).resolve().parents[2]
TOK, UNM = TraceTokenizer(), TraceTokenizer(grammar="unmarked")
# 8+4-7+9: running values 12, 5, 14; entries 1..4 own blocks 1..4 (ids 12.., 24.., 36.., 48..)
PROBLEM = Problem((8, 4, 7, 9), ("+", "-", "+"))


def lines_with_ids(trace, tokenizer):
    """``[(line text, [ids])]`` of the thinking block, one per line (delimiter included)."""
    ids = position_ids(tokenizer, trace.ids)
    out, start = [], trace.think_pos + 1
    for end in trace.delimiter_pos:
        out.append((tokenizer.decode(trace.ids[start : end + 1]), ids[start : end + 1]))
        start = end + 1
    return out


def test_unmarked_position_ids_by_hand():
    """Every value sits at the ids of the step that produced it: slot 4..5 of block j holds the value after entry j
    (8 at 16, 12 at 28..29, 5 at 40, 14 at 52..53); a verification line takes the block of the step it re-verifies."""
    got = lines_with_ids(build_unmarked_trace(PROBLEM, UNM), UNM)
    step1 = [24, 25, 27, 28, 29, 30, 31]  # "+4=12.\n\n": block 2 (entry 2 is "+4")
    undo1 = [20, 21, 28, 29, 24, 25, 27, 16, 30, 31]  # "Check: 12-4=8.": 12 where step 1 wrote it, 8 at entry 1's
    rederive2 = [28, 29, 36, 37, 39, 40, 42, 43]  # "12-7=5.": its input 12 at step 1's ids, then as step line 2
    assert got[:3] == [("+4=12.\n\n", step1), ("Check: 12-4=8.\n\n", undo1), ("-7=5.\n\n", [36, 37, 39, 40, 42, 43])]
    assert got[3:5] == [("12-7=5.\n\n", rederive2), ("Check: 12-4=8.\n\n", undo1)]  # walk back: block 3, then 2
    assert got[5] == ("+9=14.\n\n", [48, 49, 51, 52, 53, 54, 55])  # step 3 (L*)
    assert got[6] == ("5+9=14.\n\n", [40, 48, 49, 51, 52, 53, 54, 55])  # the redundant walk back starts at block 4
    assert got[7:] == [("12-7=5.\n\n", rederive2), ("Check: 12-4=8.\n\n", undo1)]
    trace = build_unmarked_trace(PROBLEM, UNM)
    tail = position_ids(UNM, trace.ids)[trace.end_think_pos :]
    assert tail == [61, 62, 63, 64, 65, 66]  # </think> in block n+1: the answer's 14 one STRIDE after step 3's 14
    # the checks coupler would read "5" of "5+9=14." as a bare answer line in a step block, not at step 2's ids
    assert position_ids(TOK, trace.ids)[trace.lstar_pos + 1] != 40 == position_ids(UNM, trace.ids)[trace.lstar_pos + 1]


def test_unmarked_ids_are_causal_and_value_consistent():
    """Any id that holds a digit always holds the same digit (a value is written only where its step wrote it), and
    no id depends on later tokens; the checks layout breaks the first property (its checks restate values
    elsewhere), so the test can fail."""
    for problem in sample_problems(30, seed=11, min_operands=2, max_operands=10):
        trace = build_unmarked_trace(problem, UNM, random.Random(0), p_all_checks=0.5)
        ids = position_ids(UNM, trace.ids)
        for cut in (trace.prompt_len, trace.lstar_pos, len(trace.ids) - 3):
            assert position_ids(UNM, trace.ids[:cut]) == ids[:cut]
        seen: dict[int, str] = {}
        for index in range(trace.end_think_pos):  # prompt and thinking (the answer's own block is after)
            token = UNM.tokens[trace.ids[index]]
            if token.isdigit() and ids[index] % 12 in (4, 5):
                assert seen.setdefault(ids[index], token) == token, (problem.expression, index)
    checks = build_trace(PROBLEM, TOK)
    ids = position_ids(TOK, checks.ids)
    digits = [(ids[i], TOK.tokens[t]) for i, t in enumerate(checks.ids) if TOK.tokens[t].isdigit()]
    assert len({i for i, _ in digits}) < len(set(digits))  # the checks layout reuses an id for another digit


def test_exit_label_and_oracle_read_the_last_step_line():
    trace = build_unmarked_trace(PROBLEM, UNM)
    assert exit_label(trace.ids, UNM) == trace.lstar_pos  # the delimiter of "+9=14."
    assert exit_label(trace.ids, TOK) is None  # the checks reader wants a bare line, which unmarked traces lack
    for problem in sample_problems(50, seed=3, min_operands=2, max_operands=10):
        traced = build_unmarked_trace(problem, UNM, random.Random(1), p_all_checks=0.5)
        assert exit_label(traced.ids, UNM) == traced.lstar_pos
    # 8+4-7+7: step 1 already states the answer 12; the oracle waits for the last step line
    coincidence = build_unmarked_trace(Problem((8, 4, 7, 7), ("+", "-", "+")), UNM)

    class Engine:
        def emitted_through(self, position):
            return coincidence.ids[: position + 1]

    oracle = OracleExit(UNM, 12)
    fired = [d for d in coincidence.delimiter_pos if oracle.decide(Engine(), [], d)]
    assert fired[0] == coincidence.lstar_pos and fired[0] > coincidence.delimiter_pos[0]
    assert stated_value("+4=12.\n\nCheck: 12-4=8.\n\n") == 12 and steps_done("+4=12.\n\n12-7=5.\n\n-7=5.\n\n") == 2
    # the checks oracle is untouched: it fires at the bare answer line
    checks = build_trace(PROBLEM, TOK)

    class ChecksEngine:
        def emitted_through(self, position):
            return checks.ids[: position + 1]

    fired = [d for d in checks.delimiter_pos if OracleExit(TOK, 14).decide(ChecksEngine(), [], d)]
    assert fired[0] == checks.lstar_pos


def test_unmarked_dataset_labels_and_probe():
    problems = sample_problems(40, seed=5, min_operands=2, max_operands=6)
    data = TraceDataset(problems, UNM, 0.0, seed=4, p_all_checks=0.5)
    rng = random.Random(4)
    expected = [build_unmarked_trace(p, UNM, rng, p_all_checks=0.5) for p in problems]
    assert [t.ids for t in data.traces] == [t.ids for t in expected]
    for index, trace in enumerate(data.traces):
        item = data[index]
        thinking = UNM.decode(trace.ids[trace.think_pos + 1 : trace.end_think_pos]).split("\n\n")[:-1]
        assert not any(re.fullmatch(r"\d+\.", line) for line in thinking)  # no bare answer line
        assert exit_label(trace.ids, UNM) == trace.lstar_pos
        confidence = item["labels"]["confidence"]
        assert confidence[trace.lstar_pos] == 1.0 and confidence[trace.lstar_pos - 1] == 0.0
        boundary = len(item["probe_ids"]) - 3
        assert item["probe_label"] == float(boundary >= trace.lstar_pos)
    with pytest.raises(ValueError, match="no injected mistakes"):
        TraceDataset(problems, UNM, 0.1, seed=4)


def test_default_grammar_is_checks_bit_for_bit():
    """``checks`` stays bit-for-bit: the data, the tokenizer.json and the module's tokenizer."""
    problems = sample_problems(30, seed=5, min_operands=2, max_operands=6)
    rng = random.Random(4)
    expected = [build_trace(p, TOK, rng, 0.2, 0.5) for p in problems]
    assert [t.ids for t in TraceDataset(problems, TOK, 0.2, seed=4, p_all_checks=0.5).traces] == [
        t.ids for t in expected
    ]
    assert ArithmeticTraceDataModule().hparams.grammar == "checks" and SpecExitModule().tokenizer.grammar == "checks"
    assert '"grammar"' not in TOK.to_json()  # a checks tokenizer.json is as before the switch
    assert TraceTokenizer.from_json(UNM.to_json()).grammar == "unmarked"
    assert TraceTokenizer.from_json(TOK.to_json()).grammar == "checks"


def test_unmarked_tokenizer_travels_with_the_checkpoint(tmp_path):
    source = SpecExitModule(grammar="unmarked")
    for name, text in source.export_files().items():
        (tmp_path / name).write_text(text)
    loaded = SpecExitModule(grammar="unmarked")
    loaded.import_files(tmp_path)
    assert loaded.tokenizer.grammar == "unmarked"
    with pytest.raises(ZooError, match="trace grammar"):
        SpecExitModule().import_files(tmp_path)  # a checks config cannot read an unmarked tokenizer
    import zoo

    zoo.save_pretrained(source, tmp_path / "export")
    SpecExitModule(grammar="unmarked", target_from=str(tmp_path / "export")).setup("fit")
    with pytest.raises(ZooError, match="trace grammar"):  # a checks draft on an unmarked target
        SpecExitModule(target_from=str(tmp_path / "export")).setup("fit")


def test_published_grammar_follows_the_recipe(tmp_path):
    from zoo.specexit.tune import PUBLISHED_GRAMMAR, recipe_grammar

    assert PUBLISHED_GRAMMAR == recipe_grammar() == "unmarked"
    recipe = tmp_path / "checks.yaml"
    recipe.write_text("data:\n  init_args:\n    grammar: checks\n")
    assert recipe_grammar(str(recipe)) == "checks"
    assert recipe_grammar(str(tmp_path / "nowhere.yaml")) == "checks"


def test_grammar_bad_inputs():
    with pytest.raises(ValueError, match="unknown trace grammar"):
        ArithmeticTraceDataModule(grammar="marked")
    with pytest.raises(ValueError, match="unknown trace grammar"):
        SpecExitModule(grammar="marked")
    with pytest.raises(ValueError, match="no injected mistakes"):
        ArithmeticTraceDataModule(grammar="unmarked", p_wrong=0.1)


def cli(tmp_path, recipe: str, *extra: str):
    from zoo._lightning_cli import ZooCLI

    args = [
        "-c", str(ROOT / "recipes/specexit" / recipe),
        "--data.init_args.n_train=32", "--data.init_args.n_val=8", "--data.init_args.batch_size=8",
        "--trainer.fast_dev_run=true", "--trainer.enable_progress_bar=false", f"--trainer.default_root_dir={tmp_path}",
        *extra,
    ]  # fmt: skip
    return ZooCLI(args=args, run=False)


def test_unmarked_fast_dev_run_target_and_draft(tmp_path):
    torch.manual_seed(0)
    target = cli(tmp_path, "arith_target.yaml")  # the recipes publish the unmarked grammar
    target.trainer.fit(target.model, datamodule=target.datamodule)
    assert target.model.tokenizer.grammar == "unmarked"
    assert all(t.lstar_pos == exit_label(t.ids, UNM) for t in target.datamodule.datasets["train"].traces)
    draft = cli(tmp_path, "arith.yaml", "--model.init_args.target_from=null", "--model.init_args.calibrate_problems=0")
    draft.trainer.fit(draft.model, datamodule=draft.datamodule)
    assert draft.model.hparams.grammar == "unmarked"
    # a model and data on different grammars refuse to train
    mixed = cli(tmp_path, "arith_target.yaml", "--data.init_args.grammar=checks")
    with pytest.raises(ZooError, match="trace grammar"):
        mixed.trainer.fit(mixed.model, datamodule=mixed.datamodule)
