"""Cards rendered from metrics.json parse back with ModelCard.load and agree with the registry."""

from __future__ import annotations

import json

import pytest

from zoo._cards import render_card, write_card
from zoo._errors import ZooError
from zoo._eval import run_eval, validate_result


@pytest.fixture
def evaluated(tiny_entry):
    result = run_eval(tiny_entry.name, seeds=[0, 1, 2])
    (tiny_entry.mirror_dir / "metrics.json").write_text(json.dumps(result))
    return result


def test_card_round_trip(tiny_entry, evaluated):
    from huggingface_hub import ModelCard

    path = write_card(tiny_entry.name)
    card = ModelCard.load(path)
    data = card.data
    assert data.license == "mit" and data.library_name == "icml26-zoo" and data.model_name == "tinytest.blobs"
    assert data.pipeline_tag == "tabular-classification"
    # "blobs" is no Hub data set: it is left out of the metadata (and so are model-index results, which need one)
    assert "arxiv:0000.00000" in data.tags and data.datasets is None and data.eval_results is None
    text = card.text
    assert 'zoo.load("tinytest.blobs", pretrained=True)' in text  # no usage.py: the load line
    assert "zoo fit -c tests/tiny/recipe.yaml" in text and "1.0 min" in text  # wall time from config.json
    assert "| **tiny** | method | 3 |" in text and "| reference_majority | reference | 3 |" in text
    # the claims round trip from JSON to the card, each with its verdict
    for claim in evaluated["claims"]:
        verdict = "pass" if claim["holds"] else "**fail**"
        assert f"| {claim['text']} |" in text and verdict in text
    assert "@inproceedings{tinytest2026" in text and "@software{icml26_zoo" in text
    assert "![tinytest.blobs results](results.png)" in text
    for file, digest in tiny_entry.pretrained_cfg.sha256.items():
        assert f"| `{file}` | `{digest}` |" in text
    assert (tiny_entry.mirror_dir / "results.png").read_bytes()[:4] == b"\x89PNG"


def test_card_without_metrics_says_what_to_run(tiny_entry):
    with pytest.raises(ZooError, match="zoo eval NAME --card"):
        render_card(tiny_entry.name)


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (lambda r: r.pop("seeds"), "expected"),
        (lambda r: r.update(arms={}), "no arms"),
        (lambda r: r["arms"]["tiny"].update(accuracy=float("nan")), "not a finite number"),
        (lambda r: r["arms"]["tiny"].update(accuracy="0.9"), "not a finite number"),
        (lambda r: r["settings"].update(references=[]), "no reference arm"),
        (lambda r: r["arms"].pop("reference_majority"), "no reference arm"),
        (lambda r: r.update(claims=[]), "no claims"),
        (lambda r: [c.update(versus=None) for c in r["claims"]], "no claim compares the method with a reference"),
        (lambda r: r["settings"].pop("tuning"), "settings.tuning is missing"),
        (lambda r: r["arms"]["tiny"].update(n_seeds=1), "a card needs 3"),
    ],
)
def test_eval_schema_rejects_bad_results(evaluated, mutate, message):
    broken = json.loads(json.dumps(evaluated))
    mutate(broken)
    with pytest.raises(ZooError, match=message):
        validate_result(broken)


def test_a_failed_reference_claim_is_said_in_plain_words(tiny_entry, evaluated):
    broken = json.loads(json.dumps(evaluated))
    broken["claims"][0]["holds"] = False
    text = render_card(tiny_entry.name, broken).text
    assert "does not clearly beat the reference arm `reference_majority`" in text


def test_baseline_tuned_less_than_the_method_is_rejected(evaluated):
    broken = json.loads(json.dumps(evaluated))
    broken["settings"]["baselines"] = ["reference_majority"]
    broken["settings"]["tuning"]["tiny"]["trials"] = 5
    broken["settings"]["tuning"]["reference_majority"]["trials"] = 1
    with pytest.raises(ZooError, match="fewer than the method's"):
        validate_result(broken)


def test_readme_table_is_generated_and_current():
    from pathlib import Path

    from zoo._readme import update_readme

    readme = Path(__file__).resolve().parents[1] / "README.md"
    assert update_readme(readme, check=True), "README.md's models table is stale: run `python tools/readme_table.py`"


def test_an_entry_on_a_hub_data_set_gets_model_index_results(tiny_entry, evaluated, monkeypatch):
    import dataclasses

    from zoo import _cards, _registry

    monkeypatch.setitem(_cards.HUB_DATASETS, "blobs", "test-org/blobs")
    # A fresh copy of the entry (no cached card data); not through monkeypatch, whose undo would run after
    # tiny_entry's teardown and register the entry again for every later test.
    _registry._ENTRIES[tiny_entry.name] = dataclasses.replace(_registry._ENTRIES[tiny_entry.name])
    data = render_card(tiny_entry.name, evaluated).data
    assert data.datasets == ["test-org/blobs"]
    results = {r.metric_type: r.metric_value for r in data.eval_results}
    assert results == {k: v for k, v in evaluated["arms"]["tiny"].items() if k == "accuracy"}
    assert data.eval_results[0].task_type == "tabular-classification"
    assert data.eval_results[0].dataset_type == "test-org/blobs"
