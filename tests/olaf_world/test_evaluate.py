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
    for arm in ("lam_align", "lam_vae", "lam_align_efficientnet"):
        run.load(arm)
    assert fits == [
        ("recipes/olaf_world/align.yaml", 1, []),
        ("recipes/olaf_world/vae.yaml", 1, []),
        (
            "recipes/olaf_world/align.yaml",
            1,
            ["--data.init_args.teacher=efficientnet_lite0", "--model.init_args.teacher_dim=1280"],
        ),
    ]
    published = Run(PROTOCOL, "olaf_world", 0, PROTOCOL.resolve(), entries)
    assert [arm for arm in ("lam_align", "lam_vae", "lam_align_efficientnet") if published.uses_published(arm)] == [
        "lam_align",
        "lam_vae",
    ]
    # a non-default split or context trains every arm, also seed 0
    world = Run(PROTOCOL, "olaf_world", 0, PROTOCOL.resolve({"split": "world"}), entries)
    assert not world.uses_published("lam_align") and world.recipe_overrides() == ["--data.init_args.split=world"]
    same = Run(PROTOCOL, "olaf_world", 0, PROTOCOL.resolve({"context_b": "same"}), entries)
    assert same.recipe_overrides() == ["--data.init_args.context_b=same"]


def test_method_and_baseline_were_tuned_with_the_same_budget():
    tuning = PROTOCOL.tuning
    assert tuning["lam_align"].split == tuning["lam_vae"].split == "validation"
    assert tuning["lam_align"].trials == tuning["lam_vae"].trials > 0


def _gate_claims(teacher_cross: dict[int, float], gaps: dict[int, float]) -> dict:
    """Claims of a hand-made result: the teacher's cross probe per seed and lam_vae's within-minus-cross gap."""
    from zoo.olaf_world.evaluate import claims

    per_seed = {"reference_teacher_motion": {s: {"probe_acc_cross": v} for s, v in teacher_cross.items()}}
    per_seed["lam_vae"] = {s: {"probe_acc_within": 0.5 + g, "probe_acc_cross": 0.5} for s, g in gaps.items()}
    per_seed["lam_align"] = {
        s: {"probe_acc_cross": 0.6, "proto_diag_minus_offdiag": 0.5, "transfer_acc": 0.5} for s in gaps
    }
    per_seed["random_encoder"] = {s: {"probe_acc_cross": 0.2} for s in gaps}
    for s in gaps:
        per_seed["lam_vae"][s].update(proto_diag_minus_offdiag=0.4, transfer_acc=0.4)
    arms = {"lam_align": {"pixel_mse": 0.002}, "lam_vae": {"pixel_mse": 0.002}}
    return {c.id: c for c in claims({"arms": arms, "per_seed": per_seed})}


def test_teacher_and_context_gates_fail_on_one_seed():
    held = _gate_claims({0: 0.45, 1: 0.45}, {0: 0.12, 1: 0.15})
    assert held["headroom_teacher_probe_cross"].holds and held["headroom_teacher_probe_cross"].kind == "headroom"
    assert held["headroom_within_minus_cross_lam_vae"].holds
    failed = _gate_claims({0: 0.45, 1: 0.39}, {0: 0.12, 1: 0.09})
    assert not failed["headroom_teacher_probe_cross"].holds
    assert failed["headroom_teacher_probe_cross"].value == pytest.approx(0.39)
    assert not failed["headroom_within_minus_cross_lam_vae"].holds


def test_claims_on_the_card_pieces_gate_every_seed():
    card = json.loads((zoo.get_entry("olaf_world").mirror_dir / "metrics.json").read_text())
    pieces = [{"arm": a, "seed": int(s), "scores": v} for a, runs in card["per_seed"].items() for s, v in runs.items()]
    settings = {key: card["settings"][key] for key in PROTOCOL.settings}
    claims = {c["id"]: c for c in assemble(PROTOCOL, card["name"], pieces, settings, seeds=card["seeds"])["claims"]}
    vae = card["per_seed"]["lam_vae"]
    gaps = [s["probe_acc_within"] - s["probe_acc_cross"] for s in vae.values()]
    gate = claims["headroom_within_minus_cross_lam_vae"]
    assert gate["kind"] == "headroom" and gate["value"] == pytest.approx(min(gaps), abs=1e-6)
    assert gate["holds"] == (min(gaps) >= 0.10)
    teacher = claims["headroom_teacher_probe_cross"]
    assert teacher["kind"] == "headroom"
    assert teacher["value"] == min(s["probe_acc_cross"] for s in card["per_seed"]["reference_teacher_motion"].values())
    assert claims["headroom_cross_lam_vae"]["value"] == max(s["probe_acc_cross"] for s in vae.values())
    assert {c["kind"] for c in claims.values() if c["id"].startswith("lam_align")} == {"paper"}
