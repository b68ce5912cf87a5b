"""The LM loss with slot weighting, against a hand-written weighted cross-entropy."""

import pytest
import torch
import torch.nn.functional as F

from zoo.prefetch_rag.lm import collate
from zoo.prefetch_rag.module import PrefetchRAGModule


def _batch():
    pairs = [
        ([5, 6, 7, 8, 9, 10], [-100, -100, 7, 8, 9, 10], [0, 0, 0, 1, 1, 0]),
        ([11, 12, 13, 14], [-100, 12, 13, 14], [0, 0, 1, 1]),
    ]
    return collate(pairs, pad=1)


@pytest.mark.parametrize("pointer", [True, False])
@pytest.mark.parametrize("slot_weight", [1.0, 3.0])
def test_slot_weighted_loss_matches_hand_computation(slot_weight, pointer):
    from zoo.prefetch_rag.lm import LMConfig

    torch.manual_seed(0)
    module = PrefetchRAGModule(LMConfig(pointer=pointer), slot_weight=slot_weight).eval()
    batch = _batch()
    with torch.no_grad():
        logits = module(batch["input_ids"])[:, :-1]
        labels = batch["labels"][:, 1:]
        ce = F.cross_entropy(logits.transpose(1, 2), labels.clamp_min(0), reduction="none")
        weights = torch.where(batch["slot_mask"][:, 1:] > 0, slot_weight, 1.0) * (labels != -100)
        expected = (ce * weights).sum() / weights.sum()
        assert module._loss(batch).item() == pytest.approx(expected.item(), rel=1e-5)


def test_bad_slot_weight_names_the_argument():
    with pytest.raises(ValueError, match="^slot_weight"):
        PrefetchRAGModule(slot_weight=0.0)


def _pointer_lm():
    from zoo.prefetch_rag.lm import LMConfig, build_lm

    torch.manual_seed(0)
    return build_lm(LMConfig(vocab_size=64, n_embd=32, n_layer=2, n_head=2, n_positions=64)).eval()


def test_pointer_mixture_is_a_distribution_and_matches_hand_computation():
    lm = _pointer_lm()
    ids = torch.tensor([[5, 9, 5, 7, 3]])
    with torch.no_grad():
        out = lm(ids, output_hidden_states=True)
        p = out.logits.exp()
        assert torch.allclose(p.sum(-1), torch.ones(1, 5), atol=1e-5)
        # by hand at the last position: gate * softmax(lm_head h) + (1 - gate) * attention mass per token id
        h = out.hidden_states[-1][0, -1]
        scores = (lm.query(h) @ lm.key(out.hidden_states[-1][0]).T) * lm.scale
        attn = scores.softmax(-1)
        gate = torch.sigmoid(lm.gate(h))
        expected = gate * lm.gpt2.lm_head(h).softmax(-1)
        for s, token in enumerate(ids[0].tolist()):
            expected[token] += (1 - gate[0]) * attn[s]
        assert torch.allclose(p[0, -1], expected, atol=1e-5)


def test_pointer_kv_cache_steps_equal_one_full_forward():
    from zoo.prefetch_rag.lm import Session

    lm = _pointer_lm()
    ids = torch.randint(5, 60, (30,), generator=torch.Generator().manual_seed(1)).tolist()
    with torch.no_grad():
        full = lm(torch.tensor([ids])).logits[0]
    session = Session(lm, ids[:12])
    session.start()
    session.extend(ids[12:20])
    for token in ids[20:]:
        session.extend([token])
    assert torch.allclose(session.logits, full[-1], atol=1e-5)


def test_pointer_token_nll_equals_the_full_forward_with_padding():
    lm = _pointer_lm()
    batch = _batch()
    with torch.no_grad():
        nll = lm.token_nll(batch["input_ids"], batch["attention_mask"], batch["labels"])
        logp = lm(batch["input_ids"], attention_mask=batch["attention_mask"]).logits[:, :-1]
        labels = batch["labels"][:, 1:]
        expected = -logp.gather(2, labels.clamp_min(0)[..., None])[..., 0] * (labels != -100)
    assert torch.allclose(nll, expected, atol=1e-5)


def test_stage2_chooses_theta_and_keep_blocks_jointly(monkeypatch):
    from zoo.prefetch_rag import scoring

    ems = {(1.0, 1): 0.30, (2.0, 1): 0.31, (1.0, 2): 0.40, (2.0, 2): 0.395}  # (2.0, 2) ties within 1 point, faster
    latency = {1.0: 3000.0, 2.0: 2500.0}

    def fake_run_arm(decoder, questions, arm):
        key = (decoder.hyper.theta, decoder.hyper.keep_blocks)
        return {"em_all": ems[key], "em": ems[key], "em_multi": ems[key], "latency_ms_mean": latency[key[0]]}

    monkeypatch.setattr(scoring, "run_arm", fake_run_arm)
    module = PrefetchRAGModule(theta_grid=(1.0, 2.0), keep_grid=(1, 2))
    module.tokens = object()  # the fake run_arm never decodes
    record = module.choose_theta(retriever=None, questions=[], encoder=lambda text: None)
    assert len(record["trials"]) == 4
    assert (record["theta"], record["keep_blocks"]) == (2.0, 2)
    module.theta.fill_(record["theta"])
    module.keep_blocks.fill_(record["keep_blocks"])
    hyper = module.decoder(retriever=None, encoder=lambda text: None).hyper
    assert (hyper.theta, hyper.keep_blocks) == (2.0, 2)
    assert "keep_blocks" in module.state_dict()  # the choice travels with the checkpoint


def test_bad_predictor_noise_names_the_argument():
    with pytest.raises(ValueError, match="^predictor_noise"):
        PrefetchRAGModule(predictor_noise=-0.5)


def _trained_predictor(noise: float, scale: float) -> torch.Tensor:
    """The predictor's outputs on its own inputs after stage 2's head training (plain torch, no Trainer) on toy
    data whose features are ``scale`` x."""
    from zoo.prefetch_rag.heads import QueryGenerator, RetrievalPredictor, train_heads

    torch.manual_seed(0)
    predictor, query_head = RetrievalPredictor(16, 8, 2, hidden=8), QueryGenerator(16)
    generator = torch.Generator().manual_seed(3)
    x = torch.randn(600, 16 + 8 + 2 + 1, generator=generator)
    y = (x[:, 0] + 0.5 * torch.randn(600, generator=generator) > 0).float()
    hx, hy = torch.randn(40, 16, generator=generator), F.normalize(torch.randn(40, 384, generator=generator), dim=-1)
    record = train_heads(predictor, query_head, x * scale, y, hx, hy, seed=0, epochs=3, lr=1e-3, noise=noise)
    assert record["positions"] == 600 and 0.0 <= record["heldout_auroc"] <= 1.0
    with torch.no_grad():
        return predictor.probability(x * scale)


def test_predictor_noise_is_drawn_in_standardised_units():
    clean, noisy = _trained_predictor(0.0, 1.0), _trained_predictor(2.0, 1.0)
    assert not torch.allclose(clean, noisy, atol=1e-3)  # the noise reaches the predictor's training
    # the predictor standardises its inputs, so noise proportional to the features' std trains the same predictor
    # whatever their scale
    assert torch.allclose(noisy, _trained_predictor(2.0, 1000.0), atol=1e-4)
