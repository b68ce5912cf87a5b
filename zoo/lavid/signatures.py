"""Conceptual signatures: MCQs, a teacher that answers them per class, and the class x (N*M) matrix S.

Plain numpy/torch, no Lightning. The builder is teacher-agnostic: a teacher only has to return, for every
class and question, one raw score per option (``option_scores``, shape ``C x N x M``); the signature is
``softmax_m(score / T)`` per question, concatenated over the questions, so every row of S sums to N.

* :class:`SentenceEncoderTeacher` (the offline default): the score of option m is the cosine similarity of
  the MiniLM embedding of the class description with that of ``"<question with the class name> <option>"``.
* :class:`LLMOptionTeacher` (the paper's teacher, for a machine with a chat LLM): the prompt
  ``"Answer only with the option number. No additional commentary. <question> 1. ... M. ..."`` and the
  logits of the tokens ``"1"``..``"M"`` at the last position.

The temperature of a sentence-encoder teacher is set by :func:`entropy_temperature` (the spec's rule: the
mean answer entropy is ``0.6 ln M``), never by accuracy.
"""

from __future__ import annotations

import hashlib
import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import numpy as np

from zoo._errors import ZooError

QUESTIONS_FILE = Path(__file__).with_name("questions.txt")
PLACEHOLDER = "the class"
TARGET_ENTROPY_FRACTION = 0.6  # the spec's rule: mean answer entropy 0.6 ln M
LLM_PROMPT = "Answer only with the option number. No additional commentary. {question}"


@dataclass(frozen=True)
class Question:
    """One multiple-choice question; ``text`` contains the placeholder ``the class``.

    Args:
        text: The question, e.g. "How long are the sleeves of the class?".
        options: The M answer options, in order (option m is answered by the token ``str(m + 1)``).
    """

    text: str
    options: tuple[str, ...]

    def for_class(self, name: str) -> str:
        """The question with the placeholder replaced by the class name."""
        return re.sub(r"\bthe class\b", f"the {name}", self.text, flags=re.IGNORECASE)

    def prompt(self, name: str) -> str:
        """The paper's LLM prompt for one class: the question and its numbered options."""
        lines = [self.for_class(name), *(f"{m + 1}. {option}" for m, option in enumerate(self.options))]
        return LLM_PROMPT.format(question="\n".join(lines))


def parse_questions(text: str, num_options: int | None = None) -> list[Question]:
    """Parse the paper's question format: blocks separated by blank lines, a question line, ``k. option`` lines.

    Args:
        text: The file's text.
        num_options: The required M (default: the first question's).

    Raises:
        ZooError: A question without the placeholder ``the class``, options not numbered 1..M, or a question
            with a different number of options than the others.
    """
    questions = []
    for number, block in enumerate(b for b in re.split(r"\n\s*\n", text.strip()) if b.strip()):
        lines = [line.strip() for line in block.strip().splitlines() if line.strip()]
        head, option_lines = lines[0], lines[1:]
        if not re.search(r"\bthe class\b", head, flags=re.IGNORECASE):
            raise ZooError(f"question {number + 1} ({head!r}) has no placeholder {PLACEHOLDER!r} for the class name")
        options = []
        for m, line in enumerate(option_lines):
            match = re.match(r"^(\d+)[.)]\s*(.+)$", line)
            if not match or int(match.group(1)) != m + 1:
                raise ZooError(f"question {number + 1}: option line {line!r} should start with '{m + 1}.'")
            options.append(match.group(2))
        expected = num_options if num_options is not None else (len(questions[0].options) if questions else None)
        if len(options) < 2 or (expected is not None and len(options) != expected):
            raise ZooError(
                f"question {number + 1} ({head!r}) has {len(options)} options; every question needs "
                f"{expected if expected is not None else 'at least 2'}"
            )
        questions.append(Question(head, tuple(options)))
    if not questions:
        raise ZooError("no questions found: expected blocks of a question line and numbered option lines")
    return questions


def format_questions(questions: list[Question]) -> str:
    """The inverse of :func:`parse_questions` (the paper's text format)."""
    blocks = ["\n".join([q.text, *(f"{m + 1}. {o}" for m, o in enumerate(q.options))]) for q in questions]
    return "\n\n".join(blocks) + "\n"


def load_questions(path: str | Path = QUESTIONS_FILE) -> list[Question]:
    """The 30 garment MCQs x 5 options shipped with the package (or another file in the same format)."""
    return parse_questions(Path(path).read_text())


@dataclass(frozen=True)
class ClassText:
    """What a language-only teacher knows about a class.

    Args:
        name: The name put into the questions ("ankle boot").
        description: Free text about the class (ImageNet GPT descriptions and guidelines, WordNet glosses).
    """

    name: str
    description: str


class SignatureTeacher(Protocol):
    """Anything that scores the options of every question for every class."""

    identity: str

    def option_scores(self, classes: list[ClassText], questions: list[Question]) -> np.ndarray:
        """Raw scores ``[C, N, M]``; the signature is their softmax over M at a temperature."""


class SentenceEncoderTeacher:
    """The offline teacher: cosine(e(description), e(question + option)) with MiniLM (or any encoder).

    Args:
        encode: Texts -> unit-norm embeddings ``[n, d]`` (default: :func:`zoo.common.minilm.embed`).
        identity: Name recorded with the signatures.
    """

    def __init__(self, encode=None, identity: str | None = None) -> None:
        if encode is None:
            from zoo.common.minilm import ENCODER, embed

            encode, identity = embed, identity or f"sentence-encoder {ENCODER}"
        self.encode = encode
        self.identity = identity or "sentence-encoder"

    def option_texts(self, name: str, question: Question) -> list[str]:
        return [f"{question.for_class(name)} {option}" for option in question.options]

    def option_scores(self, classes: list[ClassText], questions: list[Question]) -> np.ndarray:
        descriptions = np.asarray(self.encode([c.description for c in classes]), dtype=np.float64)
        texts = [t for c in classes for q in questions for t in self.option_texts(c.name, q)]
        options = np.asarray(self.encode(texts), dtype=np.float64)
        options = options.reshape(len(classes), len(questions), len(questions[0].options), -1)
        return np.einsum("cd,cnmd->cnm", descriptions, options)


class LLMOptionTeacher:
    """The paper's teacher: the logits of the option tokens "1".."M" of a chat LLM (needs transformers).

    Args:
        model_path: A local causal-LM folder (e.g. Qwen2.5-7B-Instruct); nothing is downloaded.
        device: Torch device of the model.
    """

    def __init__(self, model_path: str, device: str = "cpu") -> None:
        self.model_path, self.device = model_path, device
        self.identity = f"llm-option-logits {model_path}"

    def option_scores(self, classes: list[ClassText], questions: list[Question]) -> np.ndarray:
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer

        tokenizer = AutoTokenizer.from_pretrained(self.model_path, local_files_only=True)
        model = AutoModelForCausalLM.from_pretrained(self.model_path, local_files_only=True).to(self.device).eval()
        num_options = len(questions[0].options)
        token_ids = [tokenizer.encode(str(m + 1), add_special_tokens=False)[-1] for m in range(num_options)]
        scores = np.zeros((len(classes), len(questions), num_options))
        with torch.no_grad():
            for c, cls in enumerate(classes):
                for n, question in enumerate(questions):
                    messages = [{"role": "user", "content": question.prompt(cls.name)}]
                    prompt = tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
                    ids = tokenizer(prompt, return_tensors="pt").to(self.device)
                    logits = model(**ids).logits[0, -1]
                    scores[c, n] = logits[token_ids].float().cpu().numpy()
        return scores


def answers(scores: np.ndarray, temperature: float) -> np.ndarray:
    """Soft answers ``softmax_m(scores / T)``, ``[C, N, M]``."""
    if temperature <= 0:
        raise ZooError(f"the signature temperature must be positive, not {temperature}")
    z = scores / temperature
    z = z - z.max(-1, keepdims=True)
    p = np.exp(z)
    return p / p.sum(-1, keepdims=True)


def mean_entropy(probabilities: np.ndarray) -> float:
    """Mean over classes and questions of the answer entropy (nats)."""
    return float(-(probabilities * np.log(np.clip(probabilities, 1e-300, None))).sum(-1).mean())


def entropy_temperature(scores: np.ndarray, fraction: float = TARGET_ENTROPY_FRACTION) -> float:
    """The temperature whose mean answer entropy is ``fraction * ln M`` (bisection in log T; entropy grows with T).

    Raises:
        ZooError: The target is not reachable (constant scores, or a fraction outside (0, 1)).
    """
    if not 0 < fraction < 1:
        raise ZooError(f"the entropy fraction must be in (0, 1), not {fraction}")
    target = fraction * math.log(scores.shape[-1])
    low, high = math.log(1e-6), math.log(1e3)
    if mean_entropy(answers(scores, math.exp(low))) > target or mean_entropy(answers(scores, math.exp(high))) < target:
        raise ZooError("the teacher's scores cannot reach the target answer entropy (are they all equal?)")
    for _ in range(100):
        middle = (low + high) / 2
        if mean_entropy(answers(scores, math.exp(middle))) < target:
            low = middle
        else:
            high = middle
    return math.exp((low + high) / 2)


@dataclass
class Signatures:
    """The class signatures S and what made them (published with the student).

    Args:
        matrix: ``[C, N*M]`` float32; each row is N concatenated answer distributions (sums to N).
        class_names: The C class names, in label order.
        questions: The N questions.
        teacher: The teacher's identity.
        temperature: The softmax temperature.
    """

    matrix: np.ndarray
    class_names: tuple[str, ...]
    questions: list[Question]
    teacher: str
    temperature: float

    @property
    def num_options(self) -> int:
        return len(self.questions[0].options)

    def check(self, num_classes: int) -> None:
        """Raise unless S has one row per class, N*M columns and rows summing to N."""
        check_signature_matrix(self.matrix, num_classes, len(self.questions), self.num_options)

    def hard(self) -> np.ndarray:
        """One-hot answers: the argmax option of every question (the ``lavid_hard`` ablation)."""
        return hard_answers(self.matrix, self.num_options)


def check_signature_matrix(matrix: np.ndarray, num_classes: int, num_questions: int, num_options: int) -> None:
    """Validate S: ``[num_classes, num_questions * num_options]``, finite, each question's answers sum to 1."""
    shape = (num_classes, num_questions * num_options)
    if matrix.ndim != 2 or tuple(matrix.shape) != shape:
        raise ZooError(
            f"signature matrix has shape {tuple(matrix.shape)}, expected {shape} (one row per class, "
            f"{num_questions} questions x {num_options} options)"
        )
    sums = np.asarray(matrix, dtype=np.float64).reshape(num_classes, num_questions, num_options).sum(-1)
    if not np.all(np.isfinite(matrix)) or not np.allclose(sums, 1.0, atol=1e-4):
        raise ZooError("every question's answers in a signature row must be finite and sum to 1")


def hard_answers(matrix: np.ndarray, num_options: int) -> np.ndarray:
    """Replace every question's soft answer by the one-hot vector of its argmax."""
    c = matrix.shape[0]
    blocks = np.asarray(matrix).reshape(c, -1, num_options)
    onehot = np.zeros_like(blocks)
    np.put_along_axis(onehot, blocks.argmax(-1)[..., None], 1.0, axis=-1)
    return onehot.reshape(c, -1)


def derangement(n: int, seed: int) -> np.ndarray:
    """A uniformly random permutation of ``range(n)`` with no fixed point (rejection sampling), ``n >= 2``."""
    if n < 2:
        raise ZooError(f"a derangement needs at least 2 classes, not {n}")
    rng = np.random.default_rng(seed)
    while True:
        perm = rng.permutation(n)
        if not np.any(perm == np.arange(n)):
            return perm


def build_signatures(
    teacher: SignatureTeacher,
    classes: list[ClassText],
    questions: list[Question],
    temperature: float | None = None,
) -> Signatures:
    """Ask ``teacher`` every question about every class; ``temperature=None`` applies the entropy rule."""
    scores = np.asarray(teacher.option_scores(classes, questions), dtype=np.float64)
    expected = (len(classes), len(questions), len(questions[0].options))
    if scores.shape != expected:
        raise ZooError(f"the teacher returned scores of shape {scores.shape}, expected {expected}")
    temperature = entropy_temperature(scores) if temperature is None else temperature
    matrix = answers(scores, temperature).reshape(len(classes), -1).astype(np.float32)
    return Signatures(matrix, tuple(c.name for c in classes), questions, teacher.identity, float(temperature))


def fingerprint(*parts: str) -> str:
    """A short hash of the texts a cached signature matrix depends on."""
    return hashlib.sha256("\x00".join(parts).encode()).hexdigest()[:16]
