"""The LightningModule, its recipes, bad inputs, and the published checkpoint against its card."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

import zoo
from zoo._errors import ZooError
from zoo.specexit.data import ArithmeticTraceDataModule, CurriculumSampler, LengthBucketSampler, collate, make_splits
from zoo.specexit.models import DraftConfig
from zoo.specexit.module import SpecExitModule, unrolled_mask

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(autouse=True)
def one_thread():
    """Batch-1 decoding of these tiny models: a second intra-op thread only adds spin-wait overhead."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def test_splits_are_disjoint_and_deterministic():
    a, b = make_splits(300, 50, 50), make_splits(300, 50, 50)
    assert [p.expression for p in a.test] == [p.expression for p in b.test]
    train, val, test = ({p.expression for p in split} for split in (a.train, a.val, a.test))
    assert not (train & test) and not (val & test) and not (train & val)


def test_bucket_sampler_covers_every_item_once():
    lengths = [5, 9, 3, 7, 1, 8, 2, 6, 4, 10]
    batches = list(LengthBucketSampler(lengths, batch_size=3, seed=0, pool=2))
    assert sorted(i for batch in batches for i in batch) == list(range(10))
    assert len(batches) == len(LengthBucketSampler(lengths, 3))


def test_curriculum_sampler_grows_the_operand_count():
    counts = [2] * 40 + [3] * 40 + [4] * 40 + [5] * 40 + [6] * 40
    sampler = CurriculumSampler(counts, batch_size=8, curriculum_steps=25, seed=0)
    assert [sampler.allowed(b) for b in (0, 4, 5, 10, 24, 25, 99)] == [2, 2, 3, 4, 6, 6, 6]
    seen = [{counts[i] for i in batch} for batch in sampler]
    assert len(seen) == len(sampler) == 25
    assert all(len(s) == 1 for s in seen)  # one operand count per batch
    assert all(max(s) <= sampler.allowed(b) for b, s in enumerate(seen))
    assert {counts[i] for batch in sampler for i in batch} <= {2, 3, 4, 5, 6} and sampler.batches_done == 50


def test_unrolled_mask_shape_and_pattern():
    mask = unrolled_mask(3)[0, 0].int()
    # query a sees first-step keys 0..a and only its own second-step key
    assert mask.tolist() == [[1, 0, 0, 0, 1, 0, 0], [1, 1, 0, 0, 0, 1, 0], [1, 1, 1, 0, 0, 0, 1]]


def test_batch_labels_and_probe_examples():
    dm = ArithmeticTraceDataModule(n_train=16, n_val=4, n_test=4, batch_size=4, p_wrong=0.0)
    dm.setup()
    batch = collate([dm.datasets["train"][i] for i in range(4)])
    tok = dm.tokenizer
    for row in range(4):
        ids = batch["input_ids"][row]
        last = batch["probe_last"][row]
        assert batch["probe_ids"][row, last - 1] == tok.end_think_id
        assert batch["probe_ids"][row, last - 2] == tok.delim_id
        prompt_len = int((ids == tok.think_id).nonzero()[0]) + 1
        assert batch["loss_mask"][row, :prompt_len].sum() == 0 and batch["loss_mask"][row, prompt_len] == 1
        assert batch["signal_mask"][row, prompt_len - 1] == 1  # signals start at <think>


@pytest.mark.parametrize("stage", ["target", "draft"])
def test_training_step_moves_only_the_stage_parameters(stage):
    torch.manual_seed(0)
    dm = ArithmeticTraceDataModule(n_train=8, n_val=4, n_test=4, batch_size=8)
    dm.setup()
    module = SpecExitModule(stage=stage)
    batch = next(iter(dm.train_dataloader()))
    module._step(batch)["loss"].backward()
    target_grads = [p.grad is not None for p in module.target.parameters()]
    draft_grads = [p.grad is not None for p in list(module.draft.parameters()) + list(module.probe.parameters())]
    assert all(target_grads) == (stage == "target") and any(target_grads) == (stage == "target")
    assert all(draft_grads) == (stage == "draft")


def test_target_recipe_fast_dev_run(tmp_path):
    from zoo._lightning_cli import ZooCLI

    cli = ZooCLI(
        args=[
            "-c", str(ROOT / "recipes/specexit/arith_target.yaml"),
            "--data.init_args.n_train=32", "--data.init_args.n_val=8", "--data.init_args.batch_size=8",
            "--trainer.fast_dev_run=true", "--trainer.enable_progress_bar=false",
            f"--trainer.default_root_dir={tmp_path}",
        ],
        run=False,
    )  # fmt: skip
    cli.trainer.fit(cli.model, datamodule=cli.datamodule)
    assert cli.model.hparams.stage == "target"


def test_draft_stage_loads_the_exported_target(tmp_path):
    source = SpecExitModule(stage="target")
    zoo.save_pretrained(source, tmp_path)
    module = SpecExitModule(stage="draft", target_from=str(tmp_path))
    module.setup("fit")
    for (name, a), b in zip(source.target.state_dict().items(), module.target.state_dict().values(), strict=True):
        assert torch.equal(a, b), name


def test_bad_inputs_raise_clear_errors(tmp_path):
    with pytest.raises(ValueError, match="stage must be one of"):
        SpecExitModule(stage="both")
    with pytest.raises(ValueError, match="not target layers"):
        SpecExitModule(draft=DraftConfig(taps=(1, 9)))
    module = SpecExitModule()
    with pytest.raises(ValueError, match="unknown mode"):
        module.generate("1+2", mode="fast")
    with pytest.raises(ValueError, match="needs the answer to keep"):
        module.generate("1+2", mode="oracle_exit")
    with pytest.raises(ValueError, match="not in the trace vocabulary"):
        module.generate("1*2")
    with pytest.raises(ZooError, match="train the target first"):
        SpecExitModule(target_from=str(tmp_path / "nowhere")).setup("fit")
    with pytest.raises(ZooError, match="tokenizer.json"):
        module.import_files(tmp_path)
    with pytest.raises(ValueError, match="p_wrong"):
        ArithmeticTraceDataModule(p_wrong=1.5)
    with pytest.raises(ValueError, match="p_all_checks"):
        ArithmeticTraceDataModule(p_all_checks=1.5)


def test_prompt_forms_are_equivalent():
    module = SpecExitModule()
    assert (
        module.encode_prompt("23+45")
        == module.encode_prompt("Q:23+45=?")
        == module.tokenizer.encode("Q:23+45=?<think>")
    )


@pytest.fixture(scope="module")
def published():
    if not zoo.list_models("specexit"):
        pytest.skip("specexit is not registered")
    entry = zoo.get_entry("specexit")
    if not (entry.mirror_dir / "model.safetensors").is_file():
        pytest.skip("no published checkpoint in hub_cards/ yet")
    return entry


def test_pretrained_reproduces_card_on_a_slice(published, hf_cache, hf_offline):
    """The first 20 held-out problems: accuracy within 10 points and token cut within 0.1 of the card (100 problems)."""
    from zoo.eval import score_pretrained

    card = json.loads((published.mirror_dir / "metrics.json").read_text())["arms"]["specexit"]
    scores = score_pretrained("specexit", limit=20)
    assert scores["accuracy"] >= card["accuracy"] - 10.0
    assert abs(scores["token_reduction_vs_spec"] - card["token_reduction_vs_spec"]) < 0.1
    assert scores["tokens_mean"] == pytest.approx(card["tokens_mean"], rel=0.2)


def test_pretrained_speculative_is_lossless_and_exits(published, hf_cache, hf_offline):
    from zoo.specexit.data import test_problems

    module = zoo.load("specexit", pretrained=True)
    spec_tokens = ours_tokens = 0
    for problem in test_problems(200)[:6]:
        greedy = module.generate(problem, mode="target")
        spec = module.generate(problem, mode="spec")
        ours = module.generate(problem, mode="specexit")
        assert spec.tokens == greedy.tokens
        assert spec.target_forwards < greedy.target_forwards
        assert ours.tokens.count(module.tokenizer.end_think_id) == 1
        spec_tokens, ours_tokens = spec_tokens + len(spec.tokens), ours_tokens + len(ours.tokens)
    assert ours_tokens < 0.9 * spec_tokens  # the published draft cuts 21% on the card's 100 problems (20% here)
