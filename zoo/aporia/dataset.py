"""SOCRATES-mini: repeated sampled answers of small LMs to country-fact questions, labelled and embedded.

For each generator LM:

1. **Greedy pass** over ``candidates_per_model`` facts drawn at random (one question template per fact,
   fixed by the seed): the greedy accuracy says how much the model "knows".
2. **Probe**: the same facts, in that order, get ``probe_samples`` answers at the sampling settings;
   a fact whose probe holds at least two answers of each class is a candidate.
3. **Sampling**: a candidate gets ``samples`` fresh answers (temperature 1, top-p 0.95); the
   (model, prompt) pair is kept if both classes have at least ``min_per_class`` answers, until
   ``prompts_per_model`` pairs are kept or ``candidates_per_model`` facts were probed.

Answers are labelled by :func:`zoo.aporia.facts.is_genuine` and embedded with MiniLM. The result is
cached as ``.npz`` + ``.json`` under a folder keyed by the settings and the generators' weights.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from zoo.aporia.facts import country_facts, is_genuine, prompt
from zoo.progress import track

DEFAULT_GENERATORS = ("aporia.gen_gpt2_xs", "aporia.gen_gpt2_s", "aporia.gen_llama_xs", "aporia.gen_llama_s")
FORMAT_VERSION = 1


@dataclass
class SocratesConfig:
    """How SOCRATES-mini is built.

    Args:
        generators: Registry names of the generator LMs (the "small LLMs").
        prompts_per_model: Pairs kept per generator at most.
        samples: Answers sampled per kept (model, prompt) pair.
        min_per_class: Both classes need this many answers for a pair to be kept.
        probe_samples: Answers per fact in the cheap screening probe.
        candidates_per_model: Facts probed per generator at most.
        temperature: Sampling temperature.
        top_p: Nucleus sampling mass.
        max_new_tokens: Answer length limit in tokens.
        seed: Seed of the templates, the fact order and the sampling.
    """

    generators: tuple[str, ...] = DEFAULT_GENERATORS
    prompts_per_model: int = 20
    samples: int = 100
    min_per_class: int = 10
    probe_samples: int = 20
    candidates_per_model: int = 600
    temperature: float = 1.0
    top_p: float = 0.95
    max_new_tokens: int = 24
    seed: int = 0


@dataclass
class SocratesMini:
    """The dataset: one row per response, grouped into (model, prompt) pairs.

    Args:
        responses: Answer texts.
        labels: ``(N,)`` 1 = hallucinated, 0 = genuine.
        pair: ``(N,)`` index of each response's pair.
        embeddings: ``(N, 384)`` unit MiniLM embeddings.
        pairs: Per pair: model, fact key, prompt, true value, greedy answer and whether it is correct.
        models: Per generator: greedy accuracy, probe accuracy, facts probed, pairs kept.
        config: The settings it was built with.
    """

    responses: list[str]
    labels: np.ndarray
    pair: np.ndarray
    embeddings: np.ndarray
    pairs: list[dict[str, Any]]
    models: dict[str, dict[str, float]] = field(default_factory=dict)
    config: dict[str, Any] = field(default_factory=dict)

    def __len__(self) -> int:
        return len(self.pairs)

    def pair_arrays(self, index: int) -> tuple[np.ndarray, np.ndarray]:
        """(embeddings, labels) of pair ``index``."""
        rows = self.pair == index
        return self.embeddings[rows], self.labels[rows]

    def pair_responses(self, index: int) -> list[str]:
        """The answer texts of pair ``index``."""
        return [self.responses[i] for i in np.flatnonzero(self.pair == index)]

    def pair_answers(self, index: int) -> list[str | None]:
        """The parsed answers of pair ``index``'s responses (None where no answer template matches)."""
        from zoo.aporia.facts import country_facts, extract_answer

        fact = next(f for f in country_facts() if f.key == self.pairs[index]["fact"])
        return [extract_answer(fact, response) for response in self.pair_responses(index)]

    def save(self, folder: str | Path) -> Path:
        """Write ``arrays.npz`` and ``meta.json`` into ``folder``."""
        folder = Path(folder)
        folder.mkdir(parents=True, exist_ok=True)
        np.savez_compressed(folder / "arrays.npz", labels=self.labels, pair=self.pair, embeddings=self.embeddings)
        meta = {"format": FORMAT_VERSION, "responses": self.responses, "pairs": self.pairs, "models": self.models}
        (folder / "meta.json").write_text(json.dumps({**meta, "config": self.config}))
        return folder

    @classmethod
    def load(cls, folder: str | Path) -> SocratesMini:
        """Read a dataset written by :meth:`save`."""
        folder = Path(folder)
        meta = json.loads((folder / "meta.json").read_text())
        with np.load(folder / "arrays.npz") as arrays:
            return cls(
                responses=meta["responses"],
                labels=arrays["labels"],
                pair=arrays["pair"],
                embeddings=arrays["embeddings"],
                pairs=meta["pairs"],
                models=meta["models"],
                config=meta["config"],
            )


def cache_root() -> Path:
    """``$ZOO_CACHE_DIR/aporia`` (default ``~/.cache/icml26-zoo/aporia``)."""
    base = os.environ.get("ZOO_CACHE_DIR") or Path.home() / ".cache" / "icml26-zoo"
    return Path(base) / "aporia"


def cache_key(config: SocratesConfig, weight_digests: dict[str, str]) -> str:
    """A short hash of the settings, the generators' weights and the encoder."""
    from zoo.aporia.embed import ENCODER

    payload = json.dumps(
        {"config": asdict(config), "weights": weight_digests, "encoder": ENCODER, "format": FORMAT_VERSION},
        sort_keys=True,
    )
    return hashlib.sha256(payload.encode()).hexdigest()[:16]


def weights_digest(module) -> str:
    """sha256 over a module's state dict (names, shapes and bytes), to key caches on retrained weights."""
    digest = hashlib.sha256()
    for name, tensor in sorted(module.state_dict().items()):
        digest.update(name.encode())
        digest.update(str(tuple(tensor.shape)).encode())
        digest.update(tensor.detach().cpu().contiguous().numpy().tobytes())
    return digest.hexdigest()


def sample_pairs(name: str, generator, config: SocratesConfig, model_index: int) -> tuple[list[dict], dict]:
    """Greedy pass, probe and sampling for one generator; returns its kept pairs and its statistics.

    Args:
        name: The generator's registry name (stored with each pair).
        generator: An ``AporiaGeneratorModule`` with its tokenizer.
        config: Dataset settings.
        model_index: Position of the generator (varies the seeds between generators).
    """
    rng = random.Random(config.seed * 7919 + model_index)
    facts = list(country_facts())
    templates = [rng.randrange(5) for _ in facts]
    prompts = [prompt(f, t) for f, t in zip(facts, templates)]
    sampling = {"temperature": config.temperature, "top_p": config.top_p, "max_new_tokens": config.max_new_tokens}

    order = list(range(len(facts)))
    rng.shuffle(order)
    order = order[: config.candidates_per_model]
    # greedy answers of the candidate facts (a seeded random sample of all facts)
    greedy_answers = generator.sample([prompts[i] for i in order], 1, temperature=0.0, max_new_tokens=24)
    greedy = {i: answers[0] for i, answers in zip(order, greedy_answers, strict=True)}
    greedy_ok = {i: is_genuine(facts[i], answer) for i, answer in greedy.items()}
    kept: list[dict] = []
    probed, probe_correct, chunk = 0, 0, 64
    for start in track(range(0, len(order), chunk), desc=f"sampling {name}", total=-(-len(order) // chunk)):
        if len(kept) >= config.prompts_per_model:
            break
        batch = order[start : start + chunk]
        probe = generator.sample([prompts[i] for i in batch], config.probe_samples, seed=config.seed + 1, **sampling)
        candidates = []
        for i, answers in zip(batch, probe, strict=True):
            genuine = sum(is_genuine(facts[i], a) for a in answers)
            probed += 1
            probe_correct += genuine
            if 2 <= genuine <= config.probe_samples - 2:
                candidates.append(i)
        if not candidates:
            continue
        full = generator.sample([prompts[i] for i in candidates], config.samples, seed=config.seed + 2, **sampling)
        for i, answers in zip(candidates, full, strict=True):
            labels = [0 if is_genuine(facts[i], a) else 1 for a in answers]
            n_h = sum(labels)
            if min(n_h, len(labels) - n_h) >= config.min_per_class and len(kept) < config.prompts_per_model:
                kept.append(
                    {
                        "model": name,
                        "fact": facts[i].key,
                        "attribute": facts[i].attribute,
                        "country": facts[i].country,
                        "value": facts[i].value,
                        "prompt": prompts[i],
                        "greedy_answer": greedy[i],
                        "greedy_genuine": bool(greedy_ok[i]),
                        "responses": answers,
                        "labels": labels,
                    }
                )
    stats = {
        "greedy_accuracy": float(np.mean(list(greedy_ok.values()))),
        "probe_accuracy": probe_correct / max(1, probed * config.probe_samples),
        "facts_probed": probed,
        "pairs_kept": len(kept),
        "kept_greedy_accuracy": float(np.mean([p["greedy_genuine"] for p in kept])) if kept else 0.0,
        "kept_hallucination_rate": float(np.mean([np.mean(p["labels"]) for p in kept])) if kept else 0.0,
    }
    return kept, stats


def build_socrates_mini(config: SocratesConfig, generators: dict[str, Any]) -> SocratesMini:
    """Sample, label and embed SOCRATES-mini with the given generator modules.

    Args:
        config: Dataset settings.
        generators: ``{registry name: AporiaGeneratorModule}`` for every name in ``config.generators``.
    """
    from zoo.aporia.embed import embed

    pairs, models = [], {}
    for index, name in enumerate(config.generators):
        kept, stats = sample_pairs(name, generators[name], config, index)
        pairs += kept
        models[name] = stats
    responses = [r for p in pairs for r in p.pop("responses")]
    labels = np.array([y for p in pairs for y in p.pop("labels")], dtype=np.int8)
    pair = np.repeat(np.arange(len(pairs)), config.samples).astype(np.int32)
    return SocratesMini(
        responses=responses,
        labels=labels,
        pair=pair,
        embeddings=embed(responses),
        pairs=pairs,
        models=models,
        config=asdict(config),
    )


def load_generators(names: tuple[str, ...]) -> dict[str, Any]:
    """The published generator checkpoints (offline mirror, sha256-verified)."""
    import zoo

    return {name: zoo.load(name, pretrained=True) for name in names}


def socrates_mini(
    config: SocratesConfig | None = None,
    generators: dict[str, Any] | None = None,
    cache_dir: str | Path | None = "default",
) -> SocratesMini:
    """SOCRATES-mini from the cache, or built (and cached) when missing.

    Args:
        config: Dataset settings (default: :class:`SocratesConfig`).
        generators: Generator modules by registry name (default: the published checkpoints).
        cache_dir: Cache root; ``"default"`` = :func:`cache_root`, None = do not cache.
    """
    config = config or SocratesConfig()
    generators = generators or load_generators(tuple(config.generators))
    root = cache_root() if cache_dir == "default" else (Path(cache_dir) if cache_dir else None)
    folder = None
    if root is not None:
        digests = {name: weights_digest(generators[name]) for name in config.generators}
        folder = root / f"socrates_mini-{cache_key(config, digests)}"
        if (folder / "meta.json").is_file() and (folder / "arrays.npz").is_file():
            return SocratesMini.load(folder)
    dataset = build_socrates_mini(config, generators)
    if folder is not None:
        dataset.save(folder)
    return dataset
