"""The evaluation's per-seed piece cache (benchmarks/eval_pieces.py prefetch_rag): stored once, read back."""

from types import SimpleNamespace

from zoo.prefetch_rag import evaluate as E
from zoo.prefetch_rag.decoder import ARMS


def _run(seed=0, recipe="prefetch_rag/countries"):
    entry = SimpleNamespace(pretrained_cfg=SimpleNamespace(recipe=recipe))
    return SimpleNamespace(
        seed=seed, settings={"n_single": 2}, retrain=False, weights=None, cache={}, extras={}, entry=lambda arm: entry
    )


def test_seed_pieces_are_stored_and_read_back(monkeypatch, tmp_path):
    calls = []

    def fake_all_arms(run):
        calls.append(run.seed)
        run.extras["hyper"] = {"theta": 2.0, "keep_blocks": 2}
        return {"prefetch": {"em": 0.5, "hit_rate": float("nan")}, "sync_active": {"em": 0.6}}

    monkeypatch.setattr(E, "_all_arms", fake_all_arms)
    monkeypatch.setenv(E.CACHE_ENV, str(tmp_path))
    assert E.measure("prefetch", _run()) == {"em": 0.5}  # NaN metrics are left out
    assert len(list(tmp_path.glob("seed0-*.json"))) == 1
    again = _run()
    assert E.measure("sync_active", again) == {"em": 0.6} and again.extras["hyper"]["keep_blocks"] == 2
    assert calls == [0]  # the second run read the piece
    E.measure("prefetch", _run(seed=1))
    assert calls == [0, 1]
    monkeypatch.delenv(E.CACHE_ENV)
    E.measure("prefetch", _run())
    assert calls == [0, 1, 0]  # no cache folder: decoded again


def test_seed_pieces_are_keyed_on_the_entry_recipe_text(monkeypatch, tmp_path):
    recipe = tmp_path / "recipe.yaml"
    recipe.write_text("trainer: {max_steps: 600}\n")
    monkeypatch.setenv(E.CACHE_ENV, str(tmp_path / "pieces"))
    first = E._piece(_run(recipe=str(recipe)))
    assert first == E._piece(_run(recipe=str(recipe)))
    assert first != E._piece(_run())  # another recipe file
    recipe.write_text("trainer: {max_steps: 700}\n")
    assert first != E._piece(_run(recipe=str(recipe)))  # same file, changed text


def test_seed_fits_are_stored_and_loaded(monkeypatch, tmp_path):
    from zoo.prefetch_rag.lm import LMConfig
    from zoo.prefetch_rag.module import PrefetchRAGModule

    fits = []

    class FakeRun:
        seed, weights = 1, None

        def uses_published(self, arm):
            return False

        def entry(self, arm):
            return SimpleNamespace(pretrained_cfg=SimpleNamespace(recipe="prefetch_rag/countries"))

        def recipe_overrides(self):
            return []

        def load(self, arm):
            fits.append(arm)
            return PrefetchRAGModule(LMConfig(vocab_size=64, n_embd=32, n_layer=1, n_head=2), keep_grid=(1, 2))

    monkeypatch.setenv(E.FITS_ENV, str(tmp_path))
    first = E.load_method(FakeRun())
    path = E.fit_folder(FakeRun())
    assert path.parent == tmp_path and path.name.startswith("fit-seed1-") and (path / "config.json").is_file()
    second = E.load_method(FakeRun())
    assert fits == ["prefetch"]  # the second run loaded the stored fit
    assert list(second.hparams.keep_grid) == list(first.hparams.keep_grid) == [1, 2]
    for name, tensor in first.state_dict().items():
        assert (second.state_dict()[name] == tensor).all()
    published = FakeRun()
    published.uses_published = lambda arm: True
    assert E.fit_folder(published) is None


def test_prepare_fits_the_pending_seeds_side_by_side_and_run_load_gets_them(monkeypatch, tmp_path):
    import json
    import os
    import subprocess

    import zoo
    import zoo._lightning_cli
    import zoo.prefetch_rag.index
    from zoo._eval import Run, paper_arms
    from zoo.prefetch_rag.lm import LMConfig
    from zoo.prefetch_rag.module import PrefetchRAGModule

    launched, saved = [], {}

    class FakeWorker:  # stands in for `python -m zoo.prefetch_rag.evaluate --store-fit SPEC`: stores a tiny fit
        def __init__(self, command, env, stdout, stderr):
            spec = json.loads(command[-1])
            launched.append((spec["seed"], env["OMP_NUM_THREADS"]))
            monkeypatch.setenv(E.FITS_ENV, env[E.FITS_ENV])
            run = Run(paper_arms("prefetch_rag"), E.PROTOCOL, spec["seed"], spec["settings"])
            saved[spec["seed"]] = PrefetchRAGModule(LMConfig(vocab_size=64, n_embd=32, n_layer=1, n_head=2))
            zoo.save_pretrained(saved[spec["seed"]], E.fit_folder(run))
            monkeypatch.delenv(E.FITS_ENV)

        def wait(self):
            return 0

    def no_training(*args, **kwargs):
        raise AssertionError("Run.load trained instead of using the prepared fit")

    monkeypatch.setattr(subprocess, "Popen", FakeWorker)
    monkeypatch.setattr(zoo.prefetch_rag.index, "build_retriever", lambda: None)
    monkeypatch.setattr(zoo._lightning_cli, "ZooCLI", no_training)
    monkeypatch.delenv(E.FITS_ENV, raising=False)
    monkeypatch.delenv(E.CACHE_ENV, raising=False)
    settings = E.PROTOCOL.resolve()
    fits: dict = {}  # one harness-wide cache, as run_eval shares it
    runs = [Run(paper_arms("prefetch_rag"), E.PROTOCOL, seed, settings, fits=fits) for seed in (0, 1, 2)]
    E.prepare(runs)
    assert sorted(launched) == [(1, "1"), (2, "1")]  # seed 0 is the published checkpoint: not fitted
    assert E.FITS_ENV not in os.environ  # the temporary folder is not left behind in the environment
    for run in runs[1:]:
        loaded = run.load("prefetch")
        for name, tensor in saved[run.seed].state_dict().items():
            assert (loaded.state_dict()[name] == tensor).all(), name
    launched.clear()
    E.prepare(runs[:2])  # one seed to fit: left to its own run, with both threads
    assert launched == []


def test_latency_headroom_claim_is_sync_actives_blocked_share():
    # the 30% latency target is reachable only if sync_active spends at least 30% of its time blocked on retrievals
    arms = {arm: {"em": 0.4, "em_multi": 0.2, "latency_ms_mean": 2000.0, "ttft_ms_mean": 40.0} for arm in ARMS}
    arms["single_shot"]["ttft_ms_mean"] = 400.0
    arms["prefetch"] |= {"predictor_auroc": 0.8, "lead_time_median": 8.0}

    def latency_headroom(wait_ms):
        arms["sync_active"] |= {"latency_ms_mean": 3000.0, "retrieval_wait_ms_mean": wait_ms}
        result = {"arms": arms, "seeds": [0, 1, 2], "per_seed": {a: {s: m for s in "012"} for a, m in arms.items()}}
        (claim,) = [c for c in E.claims(result) if c.id == "headroom_latency"]
        return claim

    assert latency_headroom(900.0).holds and latency_headroom(900.0).value == 0.3
    assert not latency_headroom(870.0).holds
