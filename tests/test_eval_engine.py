"""The evaluation harness: pieces, the cache, resumption, workers, published pieces, --verify, --weights, cards."""

from __future__ import annotations

import json

import pytest

import zoo
from zoo._errors import ZooError
from zoo.cli import main
from zoo.eval.engine import Request, evaluation, measure
from zoo.eval.published import published_result, read_published, stale, write_card_files


@pytest.fixture(autouse=True)
def fresh_evaluations():
    """Forget the evaluations read by an earlier test (some tests replace the tiny protocol)."""
    evaluation.cache_clear()
    yield
    evaluation.cache_clear()


@pytest.fixture
def eval_cache(tmp_path, monkeypatch):
    """A fresh evaluation cache for one test."""
    folder = tmp_path / "eval-cache"
    monkeypatch.setenv("ZOO_EVAL_CACHE", str(folder))
    return folder


@pytest.fixture
def tiny_card(tiny_entry, eval_cache):
    """The tiny entry with a published card: three seeds measured, written as pieces.json + metrics.json."""
    from zoo.eval.published import pieces_record

    ev = evaluation("tinytest")
    pieces = measure("tinytest", Request(seeds=(0, 1, 2)))
    write_card_files(ev, pieces_record(ev, pieces, ev.protocol.resolve(), [0, 1, 2], "test card"))
    return ev


def _no_training(monkeypatch):
    import zoo.eval.run

    def refuse(*args, **kwargs):
        raise AssertionError("this run must not train")

    monkeypatch.setattr(zoo.eval.run, "fit_recipe", refuse)


def _replace_reference(monkeypatch, measure_fn):
    """The tiny protocol with another ``measure`` for its reference arm."""
    import dataclasses

    import tests.tiny.evaluate as tiny
    from zoo.eval import Arm

    protocol = dataclasses.replace(tiny.PROTOCOL, references=(Arm("reference_majority", measure=measure_fn),))
    monkeypatch.setattr(tiny, "PROTOCOL", protocol)
    evaluation.cache_clear()


def test_pieces_are_cached_and_read_back_only_for_the_same_code_and_settings(tiny_entry, eval_cache):
    first = measure("tinytest", Request(seeds=(0,)))
    assert [p["cached"] for p in first] == [False, False, False]
    again = measure("tinytest", Request(seeds=(0,)))
    assert [p["cached"] for p in again] == [True, True, True]
    assert [p["scores"] for p in again] == [p["scores"] for p in first]
    other = measure("tinytest", Request(seeds=(0,), overrides={"test_size": 64}))
    assert not any(p["cached"] for p in other)  # other settings: measured again
    fresh = measure("tinytest", Request(seeds=(0,), fresh=True))
    assert not any(p["cached"] for p in fresh)


def test_a_killed_run_keeps_the_pieces_that_finished_and_a_second_run_resumes(
    tiny_entry, eval_cache, tmp_path, monkeypatch
):
    out = tmp_path / "partial.json"
    calls = []

    def dies_on_seed_1(run):
        calls.append(run.seed)
        if run.seed == 1:
            raise KeyboardInterrupt
        return {"accuracy": 0.5}

    _replace_reference(monkeypatch, dies_on_seed_1)
    with pytest.raises(KeyboardInterrupt):
        main(["eval", "tinytest", "--arms", "tiny", "reference_majority", "--seeds", "0", "1", "--json", str(out)])
    partial = json.loads(out.read_text())
    assert set(partial["per_seed"]["tiny"]) == {"0", "1"} and set(partial["per_seed"]["reference_majority"]) == {"0"}
    _replace_reference(monkeypatch, lambda run: {"accuracy": 0.4})
    _no_training(monkeypatch)  # every fit of the first run is in the cache
    pieces = measure("tinytest", Request(arms=("tiny", "reference_majority"), seeds=(0, 1)))
    assert [(p["arm"], p["seed"], p["cached"]) for p in pieces] == [
        ("tiny", 0, True), ("reference_majority", 0, True), ("tiny", 1, True), ("reference_majority", 1, False),
    ]  # fmt: skip


def test_workers_measure_the_same_pieces_as_one_process(tiny_entry, tmp_path, monkeypatch):
    monkeypatch.setenv("ZOO_EVAL_CACHE", str(tmp_path / "one"))
    serial = measure("tinytest", Request(seeds=(0, 1)))
    monkeypatch.setenv("ZOO_EVAL_CACHE", str(tmp_path / "two"))
    parallel = measure("tinytest", Request(seeds=(0, 1), workers=2))
    key = lambda p: (p["arm"], p["seed"])  # noqa: E731
    assert {key(p): p["scores"] for p in parallel} == {key(p): p["scores"] for p in serial}
    assert not any(p["cached"] for p in parallel)


def test_fits_are_stored_once_and_shared_by_later_runs(tiny_entry, eval_cache, monkeypatch):
    from zoo.eval.run import Run
    from zoo.eval.store import FitStore

    ev = evaluation("tinytest")
    run = Run(ev.protocol, "tinytest", 1, ev.protocol.resolve(), ev.entries, fits=FitStore(eval_cache))
    first = run.load("tiny")
    assert list((eval_cache / "fits").glob("*/config.json"))
    _no_training(monkeypatch)
    later = Run(ev.protocol, "tinytest", 1, ev.protocol.resolve(), ev.entries, fits=FitStore(eval_cache))
    for name, tensor in later.load("tiny").state_dict().items():
        assert tensor.equal(first.state_dict()[name]), name


def test_eval_without_flags_rebuilds_the_card_from_its_pieces(tiny_card, capsys, monkeypatch):
    _no_training(monkeypatch)
    assert main(["eval", "tinytest"]) == 0
    captured = capsys.readouterr()
    assert "tiny_beats_reference_majority_accuracy" in captured.out and "paper" in captured.out
    assert "rebuilt from 9 published pieces" in captured.err and "identical to metrics.json" in captured.err
    assert stale(tiny_card) == []
    metrics = json.loads((tiny_card.entry.mirror_dir / "metrics.json").read_text())
    assert (
        metrics["provenance"]["weights_sha256"]["tinytest.blobs"]
        == tiny_card.entry.pretrained_cfg.sha256["model.safetensors"]
    )


def test_verify_re_measures_the_chosen_pieces_and_compares_each_with_the_card(tiny_card, capsys, tmp_path):
    out = tmp_path / "verify.json"
    assert main(["eval", "tinytest", "--verify", "--arms", "tiny", "--seeds", "0", "--fresh", "--json", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "card spread" in printed and "1 of 1 re-measured metrics lie within the card's seed spread" in printed
    result = json.loads(out.read_text())
    assert result["per_seed"]["tiny"]["0"] == read_published(tiny_card)["pieces"][0]["scores"]
    assert result["claims"]  # the other arms' published pieces complete it


def test_a_full_verify_writes_the_card_when_the_published_pieces_predate_the_protocols_metrics(
    tiny_card, capsys, tmp_path
):
    """A protocol that gained a metric: the card's pieces lack it, so they make no claims (nor does a mix of them
    with new pieces); re-measuring every piece still completes, says there is nothing to verify against, and
    publishes a card that is not stale."""
    path = tiny_card.entry.mirror_dir / "pieces.json"
    record = json.loads(path.read_text())
    for piece in record["pieces"]:
        piece["scores"] = {f"old_{key}": value for key, value in piece["scores"].items()}
    path.write_text(json.dumps(record))
    assert main(["eval", "tinytest", "--verify", "--fresh", "--card", "--json", str(tmp_path / "all.json")]) == 0
    assert "nothing to verify against" in capsys.readouterr().out
    assert stale(tiny_card) == []


def test_pieces_recorded_without_seconds_get_their_share_of_the_arms_time_when_read(tiny_card):
    path = tiny_card.entry.mirror_dir / "pieces.json"
    record = json.loads(path.read_text())
    for piece in record["pieces"]:
        piece.pop("seconds", None)
    record["timings"] = {"tiny_s": 9.0}  # the older format: one total per arm
    path.write_text(json.dumps(record))
    pieces = read_published(tiny_card)["pieces"]
    assert [p["seconds"] for p in pieces if p["arm"] == "tiny"] == [3.0, 3.0, 3.0]
    assert all(p.get("seconds") is None for p in pieces if p["arm"] != "tiny")  # no recorded time: none invented


def test_weights_score_only_the_method_and_train_nothing(tiny_card, tmp_path, monkeypatch):
    import torch

    from tests.tiny.module import TinyClassifier

    torch.manual_seed(5)
    folder = zoo.save_pretrained(TinyClassifier(hidden=12), tmp_path / "mine")  # untrained: near chance
    _no_training(monkeypatch)
    out = tmp_path / "mine.json"
    assert main(["eval", "tinytest", "--weights", str(folder), "--seeds", "0", "--json", str(out)]) == 0
    result = json.loads(out.read_text())
    published = published_result(tiny_card)
    assert result["per_seed"]["tiny"]["0"] != published["per_seed"]["tiny"]["0"]
    for arm in ("tiny_narrow", "reference_majority"):
        assert result["per_seed"][arm]["0"] == published["per_seed"][arm]["0"]
    assert str(folder) in result["settings"]["source"] and "published pieces" in result["settings"]["source"]


def test_bad_requests_are_one_line_errors(tiny_card, capsys):
    assert main(["eval", "tinytest", "--arms", "nope"]) == 2
    assert "unknown arm 'nope'; this evaluation has: tiny, tiny_narrow, reference_majority" in capsys.readouterr().err
    assert main(["eval", "tinytest", "--set", "test_size=64", "--card"]) == 2
    assert "--card publishes the protocol's own numbers" in capsys.readouterr().err
    assert main(["eval", "tinytest", "--settings"]) == 0
    assert "test_size = 512" in capsys.readouterr().out


def test_a_card_whose_weights_changed_is_stale_and_names_the_card(tiny_card, monkeypatch):
    import dataclasses

    from zoo._hub import sha256_file

    weights = tiny_card.entry.mirror_dir / "model.safetensors"
    data = bytearray(weights.read_bytes())
    data[-1] ^= 1
    weights.write_bytes(bytes(data))
    cfg = dataclasses.replace(
        tiny_card.entry.pretrained_cfg,
        sha256={**tiny_card.entry.pretrained_cfg.sha256, "model.safetensors": sha256_file(weights)},
    )
    monkeypatch.setitem(tiny_card.entries, "tiny", dataclasses.replace(tiny_card.entry, pretrained_cfg=cfg))
    (problem,) = stale(tiny_card)
    assert problem.startswith("tinytest.blobs: its card scored weights") and "re-measure" in problem


def test_reproduce_lists_its_steps_with_the_last_times(tiny_card, capsys):
    with pytest.raises(SystemExit):
        main(["reproduce", "--help"])
    described = " ".join(capsys.readouterr().out.split())
    for step in ("fit:<entry>", "pin:<entry>", "eval (zoo eval NAME --verify --card", "readme", "--dry-run"):
        assert step in described, step
    assert main(["reproduce", "tinytest", "--dry-run"]) == 0
    printed = capsys.readouterr().out
    assert "fit:tinytest.blobs" in printed and "1.0 min (the published export's wall time)" in printed
    assert printed.index("fit:tinytest.blobs") < printed.index("pin:tinytest.blobs") < printed.index("eval")
    assert "min (the sum of the card's measured pieces)" in printed  # the measured pieces, each timed
    with pytest.raises(ZooError, match="no step 'nope'"):
        from zoo.eval.reproduce import cmd_reproduce

        cmd_reproduce(
            type(
                "Args",
                (),
                {"name": "tinytest", "workers": 1, "only": "nope", "start": None, "restart": False, "dry_run": True},
            )()
        )


def test_a_timed_arm_is_measured_alone_but_its_fit_is_trained_beforehand_in_a_worker(
    tiny_entry, eval_cache, monkeypatch
):
    import dataclasses

    import tests.tiny.evaluate as tiny
    from zoo.eval import Arm

    narrow = Arm("tiny_narrow", base="tiny", overrides=("--model.init_args.hidden=4",), timed=True)
    monkeypatch.setattr(tiny, "PROTOCOL", dataclasses.replace(tiny.PROTOCOL, ablations=(narrow,)))
    evaluation.cache_clear()
    _no_training(monkeypatch)  # in this process: the spawned workers train, this one only measures
    pieces = measure("tinytest", Request(arms=("tiny_narrow",), seeds=(1,), workers=2))
    assert [(p["arm"], p["cached"]) for p in pieces] == [("tiny_narrow", False)]
    assert len(list((eval_cache / "fits").glob("*/config.json"))) == 1


def test_a_change_to_the_evaluation_keeps_stored_fits_but_a_change_to_training_code_does_not(tmp_path, monkeypatch):
    from zoo.eval import store

    root = tmp_path / "zoo"
    for name, text in {"_cards.py": "a", "_inference.py": "b", "eval/run.py": "c", "eval/engine.py": "d",
                       "paper/module.py": "e", "paper/evaluate.py": "f", "paper/tune.py": "g",
                       "paper/tuning_stage.json": "h", "paper/tuning.json": "i"}.items():  # fmt: skip
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    monkeypatch.setattr(store, "PACKAGE_ROOT", root)

    def digests():
        store.code_digest.cache_clear()
        return store.code_digest("paper"), store.code_digest("paper", training=True)

    before = digests()
    for changed, training_too in (("paper/evaluate.py", False), ("paper/tune.py", False), ("_cards.py", False),
                                  ("eval/engine.py", False), ("eval/run.py", True), ("_inference.py", True),
                                  ("paper/module.py", True), ("paper/tuning_stage.json", False),
                                  ("paper/tuning.json", True)):  # fmt: skip
        (root / changed).write_text("changed " + changed)
        after = digests()
        assert after[0] != before[0], changed  # every piece is re-measured
        assert (after[1] != before[1]) == training_too, changed  # fits are retrained only for training code
        before = after
    store.code_digest.cache_clear()


def test_one_function_scores_several_arms_by_name():
    from zoo.eval import Arm

    arm = Arm.scored("reference_mean", lambda name, run: {"named": float(name == "reference_mean"), "run": run}, "h")
    assert arm.measure(7) == {"named": 1.0, "run": 7} and arm.help == "h" and arm.name == "reference_mean"
    with pytest.raises(ZooError, match="measure= replaces loading"):
        Arm.scored("x", lambda name, run: {}, base="y")
