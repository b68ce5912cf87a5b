"""Cards rendered from metrics.json parse back with ModelCard.load and agree with the registry."""

from __future__ import annotations

import json

import pytest

from zoo._cards import render_card, write_card
from zoo._errors import ZooError
from zoo._eval import run_eval, validate_result


@pytest.fixture
def evaluated(tiny_entry):
    result = run_eval(tiny_entry.name, seeds=[0])
    (tiny_entry.mirror_dir / "metrics.json").write_text(json.dumps(result))
    return result


def test_card_round_trip(tiny_entry, evaluated):
    from huggingface_hub import ModelCard

    path = write_card(tiny_entry.name)
    card = ModelCard.load(path)
    data = card.data
    assert data.license == "mit" and data.library_name == "zoo" and data.model_name == "tinytest.blobs"
    assert "arxiv:0000.00000" in data.tags and data.datasets == ["blobs"]
    results = {r.metric_type: r.metric_value for r in data.eval_results}
    assert results == evaluated["arms"]["tiny"]
    assert data.eval_results[0].task_type == "tabular-classification"
    text = card.text
    assert 'zoo.load("tinytest.blobs", pretrained=True)' in text
    assert "zoo fit -c tests/tiny/recipe.yaml" in text and "1.0 min" in text  # wall time from config.json
    assert "| **tiny** |" in text and "| majority |" in text  # every arm in the table, the method in bold
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
    ],
)
def test_eval_schema_rejects_bad_results(evaluated, mutate, message):
    broken = json.loads(json.dumps(evaluated))
    mutate(broken)
    with pytest.raises(ZooError, match=message):
        validate_result(broken)
