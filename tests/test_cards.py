"""Cards rendered from metrics.json parse back with ModelCard.load and agree with the registry."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

import zoo
from tests.test_eval_settings import evaluations
from zoo._cards import TABLE_METRICS, render_card, write_card
from zoo._errors import ZooError
from zoo.eval.engine import Request, evaluation, measure
from zoo.eval.result import assemble, validate_result

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def evaluated(tiny_entry, tmp_path, monkeypatch):
    monkeypatch.setenv("ZOO_EVAL_CACHE", str(tmp_path / "eval-cache"))
    evaluation.cache_clear()
    ev = evaluation(tiny_entry.name)
    pieces = measure(tiny_entry.name, Request(seeds=(0, 1, 2)))
    result = assemble(ev.protocol, tiny_entry.name, pieces, ev.protocol.resolve(), seeds=[0, 1, 2])
    (tiny_entry.mirror_dir / "metrics.json").write_text(json.dumps(result))
    yield result
    evaluation.cache_clear()


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
    assert "zoo eval tinytest.blobs --verify" in text and "### What held" in text and "### Deviations" in text
    assert "| **tiny** | method | 3 |" in text and "| reference_majority | reference | 3 |" in text
    # the results open with the method against its strongest competitor, measured
    results = text.split("## Results", 1)[1].lstrip()
    assert results.startswith("**Strongest comparison** (accuracy, higher is better): `tiny` scores ")
    assert "for `reference_majority`, the strongest reference" in results.split("\n\n", 1)[0]
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


# ------------------------------------------------------------------------------------------- the published cards


@pytest.mark.parametrize("name", evaluations())
def test_every_card_is_what_its_published_pieces_make_and_scored_todays_weights(name):
    from zoo.eval.published import stale

    assert stale(evaluation(name)) == []


@pytest.mark.parametrize("name", evaluations())
def test_every_claim_has_a_kind_and_paper_claims_involve_the_method(name):
    card = json.loads((zoo.get_entry(name).mirror_dir / "metrics.json").read_text())
    validate_result(card)  # kinds are checked there: a paper claim without the method is refused
    assert card["provenance"]["commits"], f"{name}: metrics.json records no commit"


def test_cards_send_no_reader_to_an_issue_and_no_table_is_wider_than_12_columns():
    for path in sorted((ROOT / "hub_cards").glob("*/README.md")):
        text = path.read_text()
        assert not re.search(r"\bissues? \d+", text, re.IGNORECASE), f"{path}: cites an issue number"
        for line in text.splitlines():
            if line.startswith("|"):
                assert line.count("|") - 1 <= 12, f"{path}: a table row of {line.count('|') - 1} columns"
    assert TABLE_METRICS + 3 <= 12


def test_weightless_entries_show_the_command_that_reproduces_them():
    for name in zoo.list_models(pretrained=False):
        text = (zoo.get_entry(name).mirror_dir / "README.md").read_text()
        assert "zoo fit -c" not in text.split("## Training")[0], f"{name}: its card offers a fit it cannot do"
        assert f"zoo eval {name} --verify" in text


def _readme_row(paper: str) -> list[str]:
    from zoo._readme import readme_table

    line = next(line for line in readme_table().splitlines() if f"`{paper}." in line)
    return [cell.strip() for cell in line.strip("|").split(" | ")]


def test_the_readme_counts_paper_claims_apart_and_names_the_strongest_competitor():
    promise = _readme_row("promise")
    claims = json.loads((zoo.get_entry("promise.adk").mirror_dir / "metrics.json").read_text())["claims"]
    for column, kind in ((4, "paper"), (6, "validity")):  # ProMiSE's controls and constants are checks, apart
        of_kind = [c for c in claims if c["kind"] == kind]
        assert promise[column] == f"{sum(c['holds'] for c in of_kind)}/{len(of_kind)}", (kind, promise)
    assert promise[6] != "0/0", "the controls and the RMSD constant are counted as checks"
    fair = _readme_row("fair_lin_bandit")[3]
    assert "(uniform)" not in fair and ("(oful)" in fair or "(linnash)" in fair), fair  # not the uniform rule
    headline = _readme_row("visual_persuasion")[3]
    assert "(vfd)" in headline or "(random_search)" in headline, headline
