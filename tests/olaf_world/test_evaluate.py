"""The evaluation's bookkeeping: which fit each arm gets, equal tuning budgets, claims with per-seed gates."""

from __future__ import annotations

import json

import pytest

import zoo
from zoo.eval import Run
from zoo.eval.engine import evaluation
from zoo.eval.result import assemble
from zoo.olaf_world.evaluate import PROTOCOL

pytestmark = pytest.mark.skipif("olaf_world.align" not in zoo.list_models(), reason="no published entry yet")


def test_ablations_train_the_method_recipe_with_one_switch_and_seed_0_loads_the_checkpoints(monkeypatch):
    fits = []
    monkeypatch.setattr("zoo.eval.run.fit_recipe", lambda recipe, seed, overrides=(), seed_args=(): fits.append(
        (recipe, seed, list(overrides))) or object())  # fmt: skip
    entries = evaluation("olaf_world").entries
    run = Run(PROTOCOL, "olaf_world", 1, PROTOCOL.resolve(), entries)
    for arm in ("lam_align", "lam_vae", "lam_align_static", "lam_align_random_teacher"):
        run.load(arm)
    assert fits == [
        ("recipes/olaf_world/align.yaml", 1, []),
        ("recipes/olaf_world/vae.yaml", 1, []),
        ("recipes/olaf_world/align.yaml", 1, ["--data.init_args.target=static"]),
        ("recipes/olaf_world/align.yaml", 1, ["--data.init_args.teacher=random_efficientnet_lite0"]),
    ]
    published = Run(PROTOCOL, "olaf_world", 0, PROTOCOL.resolve(), entries)
    assert [arm for arm in ("lam_align", "lam_vae", "lam_align_static") if published.uses_published(arm)] == [
        "lam_align",
        "lam_vae",
    ]
    # a non-default split trains every arm, also seed 0
    world = Run(PROTOCOL, "olaf_world", 0, PROTOCOL.resolve({"split": "world"}), entries)
    assert not world.uses_published("lam_align") and world.recipe_overrides() == ["--data.init_args.split=world"]


def test_method_and_baseline_were_tuned_with_the_same_budget():
    tuning = PROTOCOL.tuning
    assert tuning["lam_align"].split == tuning["lam_vae"].split == "validation"
    assert tuning["lam_align"].trials == tuning["lam_vae"].trials > 0


def test_claims_on_the_card_pieces_gate_every_seed():
    card = json.loads((zoo.get_entry("olaf_world").mirror_dir / "metrics.json").read_text())
    pieces = [{"arm": a, "seed": int(s), "scores": v} for a, runs in card["per_seed"].items() for s, v in runs.items()]
    settings = {key: card["settings"][key] for key in PROTOCOL.settings}
    claims = {c["id"]: c for c in assemble(PROTOCOL, card["name"], pieces, settings, seeds=card["seeds"])["claims"]}
    vae = card["per_seed"]["lam_vae"]
    gaps = [s["probe_acc_within"] - s["probe_acc_cross"] for s in vae.values()]
    gate = claims["headroom_within_minus_cross_lam_vae"]
    assert gate["kind"] == "headroom" and gate["value"] == pytest.approx(min(gaps), abs=1e-6) and not gate["holds"]
    assert claims["headroom_cross_lam_vae"]["value"] == max(s["probe_acc_cross"] for s in vae.values())
    assert {c["kind"] for c in claims.values() if c["id"].startswith("lam_align")} == {"paper"}
