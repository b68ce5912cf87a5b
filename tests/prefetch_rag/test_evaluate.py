"""The evaluation on the harness: one timed pass decodes every arm, a stored fit reloads as trained, the claims."""

from types import SimpleNamespace

import pytest

from zoo.prefetch_rag import evaluate as E
from zoo.prefetch_rag.decoder import ARMS, Hyper


def test_every_arm_is_one_timed_shared_pass():
    (group,) = E.PROTOCOL.shared
    assert group.timed and E.PROTOCOL.is_timed("no_retrieval")  # wall-clock latency: measured alone
    assert set(group.arms) == set(E.arm_specs()) == set(E.PROTOCOL.arms) == set(ARMS) | {"always_prefetch"}
    assert all(E.PROTOCOL.group(arm) is group for arm in E.arm_specs())
    always = E.arm_specs()["always_prefetch"]  # the predictor's arm without its decision (tau 0) and monitor
    assert always.prefetch == "predictor" and not always.monitor and always.query == ARMS["prefetch"].query


def test_the_pass_decodes_each_arm_once_per_clock_and_drops_nan(monkeypatch):
    pytest.importorskip("countryinfo")
    import zoo.prefetch_rag.index as index
    import zoo.prefetch_rag.scoring as scoring
    from zoo.eval.engine import measure_task
    from zoo.prefetch_rag.clock import SimClock, WallClock

    decoded, loaded, specs = [], [], E.arm_specs()
    names = iter(specs)  # always_prefetch's Arm equals prefetch_no_monitor's (its tau 0 is a tuned constant)
    latency = {"sync_active": 200.0, "prefetch": 100.0}

    def fake_run_arm(decoder, questions, arm, clock_factory=None, batch=True, record=False, traces=None):
        clock = clock_factory()
        assert clock.constants.retrieval_ms == 450.0  # the setting reaches both clocks
        name = decoded[-1][0] if isinstance(clock, WallClock) else next(names)  # a wall run follows its arm's
        assert arm == specs[name]
        decoded.append((name, "wall" if isinstance(clock, WallClock) else "simulated", decoder.hyper.interval))
        assert isinstance(clock, WallClock) != batch and isinstance(clock, SimClock | WallClock)
        if traces is not None:  # one prefetch issued, none inserted, per answer
            traces += [SimpleNamespace(issued=[1], inserted=[]) for _ in questions]
        metrics = {"em": 0.5, "hit_rate": float("nan"), "latency_ms_mean": latency.get(name, 150.0), "ttft_ms_mean": 10}
        return metrics | ({"predictor_auroc": 0.7} if record else {})

    def fake_summarise(questions, traces):
        return {"em": 0.25, "em_all": 0.3, "hit_rate_all": 0.1, "latency_ms_mean": 50.0 * len(questions)}

    checkpoint = SimpleNamespace(decoder=lambda retriever, encoder: SimpleNamespace(hyper=Hyper()))
    monkeypatch.setattr(scoring, "run_arm", fake_run_arm)
    monkeypatch.setattr(scoring, "summarise", fake_summarise)
    monkeypatch.setattr(index, "build_retriever", lambda: None)
    monkeypatch.setattr(index, "TextEncoder", lambda: None)
    settings = E.PROTOCOL.resolve({"n_multi": 2, "n_hop": 3, "wall_questions": 1, "retrieval_ms": 450.0})
    run = SimpleNamespace(settings=settings, extras={}, load=lambda arm: loaded.append(arm) or checkpoint)
    scores = measure_task(E.PROTOCOL, run, ("telerag",))
    assert loaded == ["prefetch"]  # one checkpoint per seed: the method's
    assert [arm for arm, clock, _ in decoded if clock == "simulated"] == list(E.arm_specs())
    assert [arm for arm, clock, _ in decoded if clock == "wall"] == [a for a in E.arm_specs() if a in E.WALL_ARMS]
    tuned = {arm: interval for arm, _, interval in decoded}
    assert tuned["telerag"] == E.T.chosen_hyper(Hyper(), arm="telerag").interval  # each arm as it was tuned
    assert scores["prefetch"]["predictor_auroc"] == 0.7 and "predictor_auroc" not in scores["sync_active"]
    assert scores["prefetch"][f"em_first{E.GOLDEN}"] == 0.25 and "wall_latency_ms_mean" in scores["sync_active"]
    assert "wall_latency_ms_mean" not in scores["always_prefetch"]
    assert scores["prefetch"]["latency_hop_ms_mean"] == 150.0  # the 3 hop questions, summarised apart
    assert scores["prefetch"]["em_hop"] == 0.3 and scores["prefetch"]["wasted_prefetches_mean"] == 1.0
    assert scores["prefetch"]["latency_rel_sync"] == 0.5 and scores["sync_active"]["latency_rel_sync"] == 1.0
    assert all("hit_rate" not in metrics for metrics in scores.values())  # NaN metrics are left out
    assert set(run.extras["hyper"]) == set(E.HYPER_FIELDS)


def test_a_stored_fit_reloads_with_its_stage2_choice(tmp_path):
    import torch

    import zoo
    from zoo.prefetch_rag.lm import LMConfig
    from zoo.prefetch_rag.module import PrefetchRAGModule

    fit = PrefetchRAGModule(LMConfig(vocab_size=64, n_embd=32, n_layer=1, n_head=2), keep_grid=(1, 2))
    fit.theta.fill_(3.0)
    fit.keep_blocks.fill_(2)
    fit.stage2 = {"theta_choice": {"theta": 3.0, "keep_blocks": 2, "trials": []}, "heldout_auroc": 0.8}
    zoo.save_pretrained(fit, tmp_path / "fit")  # what the harness's fit store writes, and reads back
    loaded = zoo.load_folder(tmp_path / "fit")
    assert loaded.stage2 == fit.stage2 and list(loaded.hparams.keep_grid) == [1, 2]
    assert (float(loaded.theta), int(loaded.keep_blocks)) == (3.0, 2)
    for name, tensor in fit.state_dict().items():
        assert torch.equal(loaded.state_dict()[name], tensor), name


def _result(arms: dict) -> dict:
    per_seed = {arm: {seed: dict(metrics) for seed in "012"} for arm, metrics in arms.items()}
    return {"arms": arms, "seeds": [0, 1, 2], "per_seed": per_seed}


def _arms(**extra) -> dict:
    metrics = {"em": 0.4, "em_multi": 0.2, "latency_ms_mean": 2000.0, "ttft_ms_mean": 40.0, "latency_rel_sync": 1.0}
    return {arm: dict(metrics, **extra) for arm in E.arm_specs()}


def test_latency_headroom_gate_is_sync_actives_blocked_share_on_every_seed():
    # the gate (fixed before the test run): sync_active spends at least 40% of its time blocked on retrievals
    arms = _arms()
    arms["single_shot"]["ttft_ms_mean"] = 400.0
    arms["prefetch"] |= {"predictor_auroc": 0.8, "lead_time_median": 8.0}

    def latency_headroom(wait_ms, seed_1_wait_ms=None):
        arms["sync_active"] |= {"latency_ms_mean": 3000.0, "retrieval_wait_ms_mean": wait_ms}
        result = _result(arms)
        if seed_1_wait_ms is not None:
            result["per_seed"]["sync_active"]["1"]["retrieval_wait_ms_mean"] = seed_1_wait_ms
        (claim,) = [c for c in E.claims(result) if c.id == "headroom_latency"]
        return claim

    assert latency_headroom(1200.0).holds and latency_headroom(1200.0).value == 0.4
    assert latency_headroom(1200.0).kind == "headroom"
    assert not latency_headroom(1170.0).holds and not latency_headroom(900.0).holds  # the earlier 30% gate's level
    assert not latency_headroom(1500.0, seed_1_wait_ms=1170.0).holds  # one seed below is enough to fail the gate


def test_paper_claims_are_the_methods():
    arms = _arms()
    arms["sync_active"]["retrieval_wait_ms_mean"] = 900.0
    arms["prefetch"] |= {"wall_latency_ms_mean": 1.0}
    arms["sync_active"] |= {"wall_latency_ms_mean": 2.0}
    claims = E.claims(_result(arms))
    assert "wall_latency_vs_sync" in [c.id for c in claims]
    assert {c.kind for c in claims} == {"paper", "headroom", "validity"}
    # TTFT and lead time do not separate the arms: checks, not paper claims
    assert {c.id for c in claims if c.kind == "validity"} == {"ttft_vs_single_shot", "lead_time"}
    assert all(c.arm == "prefetch" for c in claims if c.kind == "paper")


def _predictor_claims(gaps: dict[str, list[float]]) -> dict:
    """The three predictor claims when prefetch's latency is ``1 - gap`` of sync_active's per seed and the other
    arm's is 1 (in points of sync_active's latency)."""
    result = _result(_arms(retrieval_wait_ms_mean=900.0))
    for other, per_seed in gaps.items():
        for seed, gap in zip("012", per_seed, strict=True):
            result["per_seed"]["prefetch"][seed]["latency_rel_sync"] = 1.0 - gap
            result["per_seed"][other][seed]["latency_rel_sync"] = 1.0
    return {c.versus: c for c in E.claims(result) if c.id.endswith("latency_rel_sync")}


def test_predictor_claims_ask_eight_points_over_every_prefetcher_without_prediction():
    claims = _predictor_claims({other: [0.10, 0.09, 0.11] for other in E.NO_PREDICTION})
    assert set(claims) == set(E.NO_PREDICTION) == {"always_prefetch", "telerag", "piperag"}
    assert all(c.holds and c.kind == "paper" and c.arm == "prefetch" for c in claims.values())
    assert claims["telerag"].value == pytest.approx(0.10) and claims["telerag"].threshold == 0.08
    assert not _predictor_claims({"always_prefetch": [0.07, 0.08, 0.06]})["always_prefetch"].holds  # 7 points
    # 9 points on the mean, but inside the seed spread: no result
    assert not _predictor_claims({"piperag": [0.30, -0.10, 0.07]})["piperag"].holds
