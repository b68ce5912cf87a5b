"""LaViD: signatures, questions, loss modes, data errors and the beta = 0 identity."""

import math

import numpy as np
import pytest
import torch

from zoo._errors import ZooError
from zoo.lavid.signatures import (
    ClassText,
    Question,
    Signatures,
    answers,
    build_signatures,
    check_signature_matrix,
    derangement,
    entropy_temperature,
    format_questions,
    hard_answers,
    load_questions,
    mean_entropy,
    parse_questions,
)
from zoo.lavid.student import fit_student, mode_targets, student_loss


class FakeEncoder:
    """Deterministic unit vectors from a text's hash (no MiniLM needed)."""

    identity = "fake-encoder"

    def __call__(self, texts):
        out = []
        for text in texts:
            rng = np.random.default_rng(abs(hash(text)) % (2**32))
            v = rng.normal(size=16)
            out.append(v / np.linalg.norm(v))
        return np.stack(out)


def _signatures(num_classes=4, temperature=None) -> Signatures:
    from zoo.lavid.signatures import SentenceEncoderTeacher

    classes = [ClassText(f"thing{c}", f"description of thing {c}") for c in range(num_classes)]
    teacher = SentenceEncoderTeacher(FakeEncoder(), "fake")
    return build_signatures(teacher, classes, load_questions()[:6], temperature)


def test_questions_file_round_trips_and_has_30_by_5():
    questions = load_questions()
    assert len(questions) == 30 and all(len(q.options) == 5 for q in questions)
    assert parse_questions(format_questions(questions)) == questions
    assert questions[0].for_class("ankle boot") == "How long are the sleeves of the ankle boot?"
    assert questions[0].prompt("coat").startswith("Answer only with the option number. No additional commentary.")


def test_bad_questions_raise():
    with pytest.raises(ZooError, match="placeholder"):
        parse_questions("How long are its sleeves?\n1. a\n2. b\n")
    with pytest.raises(ZooError, match="options"):
        parse_questions("What is the class?\n1. a\n2. b\n3. c\n\nWhat is the class?\n1. a\n2. b\n")
    with pytest.raises(ZooError, match="options"):
        parse_questions("What is the class?\n1. a\n2. b\n", num_options=5)
    with pytest.raises(ZooError, match="start with '2.'"):
        parse_questions("What is the class?\n1. a\n3. b\n")


def test_every_signature_row_sums_to_n():
    sig = _signatures()
    assert sig.matrix.shape == (4, 30)
    np.testing.assert_allclose(sig.matrix.sum(1), 6.0, rtol=1e-5)
    np.testing.assert_allclose(sig.matrix.reshape(4, 6, 5).sum(-1), 1.0, rtol=1e-5)
    sig.check(4)


def test_entropy_rule_hits_0_6_ln_m():
    sig = _signatures()
    entropy = mean_entropy(sig.matrix.reshape(4, 6, 5))
    assert entropy == pytest.approx(0.6 * math.log(5), abs=1e-3)
    # more temperature, more entropy: the rule is a bisection on a monotone function
    scores = np.random.default_rng(0).normal(size=(3, 4, 5))
    t = entropy_temperature(scores)
    assert (
        mean_entropy(answers(scores, t / 2)) < mean_entropy(answers(scores, t)) < mean_entropy(answers(scores, 2 * t))
    )


def test_softmax_answers_by_hand():
    probs = answers(np.array([[[0.0, math.log(3.0)]]]), 1.0)
    np.testing.assert_allclose(probs, [[[0.25, 0.75]]])
    np.testing.assert_array_equal(hard_answers(np.array([[0.2, 0.8, 0.6, 0.4]]), 2), [[0, 1, 1, 0]])


def test_signature_matrix_that_does_not_match_the_classes_raises():
    sig = _signatures()
    with pytest.raises(ZooError, match="one row per class"):
        check_signature_matrix(sig.matrix, 5, 6, 5)
    with pytest.raises(ZooError, match="sum to 1"):
        check_signature_matrix(np.ones((4, 30), dtype=np.float32), 4, 6, 5)


@pytest.mark.parametrize("n", [2, 3, 10])
def test_shuffle_is_a_derangement(n):
    for seed in range(20):
        perm = derangement(n, seed)
        assert sorted(perm) == list(range(n)) and not np.any(perm == np.arange(n))
    sig = _signatures(num_classes=n)
    shuffled = mode_targets("shuffled", sig.matrix, 5, seed=3).numpy()
    perm = derangement(n, 3)
    np.testing.assert_array_equal(shuffled, sig.matrix[perm])


def test_mse_target_follows_the_sample_label():
    targets = torch.tensor([[0.0, 1.0], [1.0, 0.0], [0.5, 0.5]])
    labels = torch.tensor([2, 0, 1])
    aux = torch.tensor([[0.5, 0.5], [0.0, 1.0], [1.0, 0.0]])  # exactly each sample's own class row
    logits = torch.zeros(3, 3)
    total, aux_loss = student_loss("lavid", logits, aux, labels, targets, beta=40.0)
    assert float(aux_loss) == 0.0 and float(total) == pytest.approx(math.log(3))
    _, wrong = student_loss("lavid", logits, aux, torch.tensor([0, 1, 2]), targets, beta=40.0)
    # rows for labels 0,1,2 vs outputs: (0.25+0.25)/2, (1+1)/2, (0.25+0.25)/2 -> mean 0.5
    assert float(wrong) == pytest.approx((0.25 + 1.0 + 0.25) / 3)


def test_beta_zero_reproduces_ce_exactly():
    torch.manual_seed(0)
    x, y = torch.rand(20, 1, 28, 28), torch.arange(20) % 4
    sig = _signatures()
    targets = mode_targets("lavid", sig.matrix, 5)
    ce = fit_student(x, y, "ce", None, 4, 30, epochs=2, seed=5)
    lavid = fit_student(x, y, "lavid", targets, 4, 30, beta=0.0, epochs=2, seed=5)
    lavid40 = fit_student(x, y, "lavid", targets, 4, 30, beta=40.0, epochs=2, seed=5)
    for (name, a), b in zip(ce.state_dict().items(), lavid.state_dict().values()):
        assert torch.equal(a, b), name
    assert not torch.equal(ce.fc.weight, lavid40.fc.weight)


def test_unknown_mode_and_dataset_raise():
    from zoo.lavid.data import FewShotImageDataModule, few_shot_indices

    with pytest.raises(ZooError, match="unknown loss mode"):
        mode_targets("clip", np.ones((2, 5)) / 5, 5)
    with pytest.raises(ZooError, match="unknown dataset"):
        FewShotImageDataModule(dataset="cub200")
    with pytest.raises(ZooError, match="shots=4 per class"):
        few_shot_indices(np.array([0, 0, 0, 1, 1, 1, 1]), 4, seed=0)


def test_question_with_placeholder_substitution_is_word_bounded():
    q = Question("What does the classic version of the class look like?", ("a", "b"))
    assert q.for_class("coat") == "What does the classic version of the coat look like?"


def test_kd_loss_is_hinton_kl_by_hand():
    student, teacher = torch.tensor([[2.0, 0.0, 0.0]]), torch.tensor([[0.0, 2.0, 0.0]])
    total, kl = student_loss(
        "kd", student, None, torch.tensor([0]), None, 0.0, teacher, kd_temperature=2.0, kd_alpha=0.5
    )
    p, q = torch.softmax(teacher / 2, -1), torch.softmax(student / 2, -1)
    expected_kl = float((p * (p / q).log()).sum()) * 4.0
    assert float(kl) == pytest.approx(expected_kl, rel=1e-5)
    ce = float(torch.nn.functional.cross_entropy(student, torch.tensor([0])))
    assert float(total) == pytest.approx(0.5 * ce + 0.5 * expected_kl, rel=1e-5)


def test_makd_is_bce_with_logits_on_the_class_row():
    targets = torch.tensor([[0.2, 0.8], [0.5, 0.5]])
    aux = torch.tensor([[0.0, 0.0]])
    _, bce = student_loss("makd", torch.zeros(1, 2), aux, torch.tensor([0]), targets, beta=1.0)
    assert float(bce) == pytest.approx(math.log(2))  # BCE of logit 0 is ln 2 whatever the target


@pytest.mark.parametrize(
    "student", [{}, {"widths": (4, 8, 8), "shift": 0, "flip": False}, {"widths": (4, 8, 8), "shift": 1, "flip": False}]
)
def test_recipe_data_order_matches_the_evaluation_loop(student):
    """The DataModule's sampler gives Lightning the plain loop's batches and the module draws the plain loop's
    augmentation: same seed -> the same weights (the default student: 32-64-128, shifts and flips)."""
    import lightning.pytorch as pl

    from zoo.lavid.data import EpochPermutationSampler, FewShotImageDataModule
    from zoo.lavid.module import LaViDModule

    torch.manual_seed(0)
    x, y = torch.rand(37, 1, 28, 28), torch.arange(37) % 4
    sig = _signatures()
    targets = mode_targets("lavid", sig.matrix, 5)
    hp = dict(beta=40.0, lr=0.03, weight_decay=5e-3, epochs=3)
    plain = fit_student(x, y, "lavid", targets, 4, 30, seed=7, **hp, **student)

    expected = torch.randperm(37, generator=torch.Generator().manual_seed(7)).tolist()
    assert list(EpochPermutationSampler(37, 7)) == expected
    data = FewShotImageDataModule(seed=7)
    data.train_set = (x, y)
    module = LaViDModule("lavid", num_classes=4, num_questions=6, num_options=5, seed=7, **hp, **student)
    module.targets.copy_(targets)
    trainer = pl.Trainer(
        max_epochs=3, accelerator="cpu", devices=1, logger=False, enable_checkpointing=False,
        enable_progress_bar=False, enable_model_summary=False,
    )  # fmt: skip
    trainer.fit(module, train_dataloaders=data.train_dataloader())
    for (name, a), b in zip(plain.state_dict().items(), module.net.state_dict().values()):
        assert torch.equal(a, b), name


def test_default_student_is_the_wide_cnn_with_shifts_and_flips():
    """Issue 67: every few-shot arm, the recipes and the registry build the 32-64-128 CNN trained with augmentation;
    the composite set keeps the 16-32-64 CNN without it, and the KD teachers the 16-32-64 CNN."""
    import zoo
    from zoo.lavid.module import LaViDModule
    from zoo.lavid.runs import STUDENTS, tuned_settings

    net = LaViDModule("lavid").net
    assert [m.out_channels for m in net.features if isinstance(m, torch.nn.Conv2d)] == [32, 64, 128]
    assert net.fc.in_features == 128 and net.feature2question.in_features == 128
    assert (LaViDModule().hparams.shift, LaViDModule().hparams.flip) == (2, True)
    for arm in ("lavid", "ce", "kd", "makd", "text_emb", "shuffled", "lavid_hard"):
        chosen = tuned_settings(arm, "fmnist")
        assert (chosen["widths"], chosen["shift"], chosen["flip"]) == ([32, 64, 128], 2, True), arm
        assert tuned_settings(arm, "spurious")["widths"] == [16, 32, 64] == STUDENTS["spurious"]["widths"]
    for name in ("lavid.fmnist_10shot", "lavid.ce"):
        entry = zoo.get_entry(name)
        module = LaViDModule(**entry.model_args)
        assert sum(p.numel() for p in module.parameters()) == entry.pretrained_cfg.num_params, name


def test_bad_student_shape_raises():
    from zoo.lavid.module import LaViDModule

    with pytest.raises(ZooError, match="widths"):
        LaViDModule("ce", widths=(32, 64))
    with pytest.raises(ZooError, match="shift"):
        LaViDModule("ce", shift=-1)
