"""GEMQ on the published Mixtral-architecture LM: data, module, checkpoints, bad inputs."""

from __future__ import annotations

import json

import pytest
import torch

import zoo
from zoo.eval import Run
from zoo.eval.engine import evaluation, measure_task
from zoo.gemq.data import calibration_set, chunk, wiki_corpus
from zoo.gemq.evaluate import PROTOCOL
from zoo.gemq.model import MoEArch, round_to_fp16
from zoo.gemq.module import GEMQModule
from zoo.quant.moe.allocation import InfeasibleBudgetError
from zoo.quant.moe.config import MoEQuantConfig
from zoo.quant.moe.pipeline import GEMQConfig, gemq_quantize

TINY = MoEArch(
    vocab_size=256, hidden_size=32, num_layers=2, num_heads=2, num_experts=4, intermediate_size=64, max_seq_len=32
)
PUBLISHED = ["gemq.wiki_fp", "gemq.wiki_2p5bit", "gemq.wiki_2bit", "gemq.wiki_1p5bit"]


def test_corpus_split_and_calibration_subsets():
    corpus = wiki_corpus(4096)
    assert corpus.train.numel() > 800_000 and 60_000 < corpus.test.numel() < 80_000  # 10% of the articles
    assert int(corpus.train.max()) < 4096
    a, b = calibration_set(corpus.train, 64, 128, seed=0), calibration_set(corpus.train, 64, 128, seed=1)
    assert a.shape == (64, 128) and torch.equal(a, calibration_set(corpus.train, 64, 128, seed=0))
    assert not torch.equal(a, b)
    assert chunk(torch.arange(10), 3).tolist() == [[0, 1, 2], [3, 4, 5], [6, 7, 8]]
    with pytest.raises(ValueError, match="calibration size must be positive"):
        calibration_set(corpus.train, 0, 128, seed=0)


def test_quantized_module_saved_and_reloaded_gives_identical_logits(tmp_path):
    from zoo._serialization import load_folder, save_pretrained

    module = GEMQModule(arch=TINY, source=None)
    calibration = torch.randint(0, 256, (8, 32), generator=torch.Generator().manual_seed(0))
    report = gemq_quantize(module.model, calibration, GEMQConfig(budget=2.0, router_epochs=1, router_batch_size=4))
    round_to_fp16(module.model)  # as GEMQModule.on_train_end does: the tuned routers are published in fp16
    module.hparams.quantization = MoEQuantConfig.from_dict(report["quant_config"])
    save_pretrained(module, tmp_path)
    saved = json.loads((tmp_path / "config.json").read_text())["init_args"]["quantization"]
    assert saved["allocation"] == {f"model.layers.{i}.mlp": row for i, row in enumerate(report["widths"])}
    reloaded = load_folder(tmp_path)
    assert reloaded.quantized
    with torch.no_grad():
        assert torch.equal(reloaded(calibration), module.eval()(calibration))


def test_bad_inputs_give_clear_errors():
    with pytest.raises(ValueError, match="arch.kind must be one of"):
        MoEArch(kind="gpt2")
    with pytest.raises(ValueError, match="top_k=3 exceeds num_experts=2"):
        MoEArch(num_experts=2, top_k=3)
    module = GEMQModule(arch=TINY, source=None)
    calibration = torch.randint(0, 256, (4, 32), generator=torch.Generator().manual_seed(0))
    with pytest.raises(InfeasibleBudgetError, match="below the minimum feasible 1.75.*raise the budget"):
        gemq_quantize(module.model, calibration, GEMQConfig(budget=1.5))
    with pytest.raises(zoo.ZooError, match="needs source="):
        module.quantize_from_source(calibration)
    with pytest.raises(zoo.ZooError, match="no tokenizer"):
        module.tokenizer()


@pytest.mark.parametrize("name", PUBLISHED)
def test_pretrained_reproduces_card_on_held_out_slice(name):
    """Golden check: the checkpoint's perplexity on the card's held-out slice is its arm's seed-0 value on the card."""
    entry = zoo.get_entry(name)
    card = json.loads((entry.mirror_dir / "metrics.json").read_text())
    module = zoo.load(name, pretrained=True)
    assert module.tokenizer().encode("The expert").ids  # the shipped tokenizer loads
    scored = PROTOCOL.score_pretrained(module, limit=card["settings"]["eval_sequences"])
    assert scored["ppl"] == pytest.approx(card["per_seed"][entry.eval_arm]["0"]["ppl"], rel=1e-4)


def _run(seed: int = 0, **overrides) -> Run:
    settings = PROTOCOL.resolve({"eval_sequences": 8, **overrides})
    return Run(PROTOCOL, "gemq", seed, settings, evaluation("gemq.wiki_fp").entries)


def _measure(arm: str, run: Run) -> dict[str, float]:
    return measure_task(PROTOCOL, run, [arm])[arm]


def test_set_budgets_and_eval_sequences_change_what_is_measured():
    default = _measure("reference_rtn_hi", _run())
    more_bits = _measure("reference_rtn_hi", _run(budgets=[3.0, 2.0, 1.5]))
    assert more_bits["expert_bytes"] > default["expert_bytes"] and more_bits["ppl"] < default["ppl"]
    assert _measure("reference_rtn_hi", _run(eval_sequences=16))["ppl"] != default["ppl"]
    fp16 = _measure("fp16", _run())  # the published fp model, scored against its own routes
    assert fp16["routing_mismatch"] == 0.0 and fp16["expert_bytes"] > 4 * default["expert_bytes"]


def test_calib_sequences_retrains_the_method_with_the_recipe_key():
    run = _run(calib_sequences=8)
    assert run.recipe_overrides() == ["--data.init_args.calib_size=8"]
    assert not run.uses_published("gemq_router_ft_hi") and _run().uses_published("gemq_router_ft_hi")
    assert not _run(1).uses_published("gemq_router_ft_hi")


def test_changed_budgets_fit_the_method_recipe_with_the_budget(monkeypatch):
    """At seed 0 the default budgets score the published checkpoint; a changed budget fits that slot's recipe."""
    fits = []

    def fit(self, recipe, overrides=()):
        fits.append((recipe, list(overrides)))
        raise RuntimeError("stop before training")

    monkeypatch.setattr(Run, "fit", fit)
    with pytest.raises(RuntimeError, match="stop before training"):
        _measure("gemq_router_ft_mid", _run(budgets=[2.5, 2.25, 1.5]))
    assert fits == [("recipes/gemq/wiki_2bit.yaml", ["--model.init_args.gemq.budget=2.25"])]


def test_unknown_setting_and_bad_values_give_one_line_errors():
    cases = {
        "nope=1": "unknown setting 'nope'; valid keys: budgets, calib_sequences, eval_sequences",
        "budgets=a,b,c": "expected a comma-separated list of float",
        "calib_sequences=0": "must be at least 1",
    }
    for pair, message in cases.items():
        with pytest.raises(zoo.ZooError, match=message) as error:
            PROTOCOL.parse_overrides([pair])
        assert "\n" not in str(error.value)
    with pytest.raises(zoo.ZooError, match="give exactly three budgets"):
        _measure("uniform_lo", _run(budgets=[2.5, 2.0]))


def test_published_quantized_checkpoints_are_small_and_mixed_precision():
    from zoo.quant.moe.api import expert_fp16_nbytes, expert_nbytes, expert_widths

    fp16 = expert_fp16_nbytes(zoo.load("gemq.wiki_fp").model)
    for name, budget in (("gemq.wiki_2p5bit", 2.5), ("gemq.wiki_2bit", 2.0), ("gemq.wiki_1p5bit", 1.5)):
        model = zoo.load(name, pretrained=True).model
        widths = torch.tensor(list(expert_widths(model).values()))
        assert widths.float().mean().item() == budget and ((widths == 3).any(1) & (widths == 2).any(1)).all()
        assert expert_nbytes(model) == pytest.approx(fp16 * (budget + 32 / 128) / 16, rel=1e-6)
