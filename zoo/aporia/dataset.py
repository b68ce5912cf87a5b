"""SOCRATES-mini: repeated sampled answers of small LMs to country-fact questions, labelled and embedded.

For each generator LM, over candidate prompts (fact, question template) in a seeded order (every fact of the
kept ``attributes`` once, then every fact in a second phrasing, ...; one sampling temperature per candidate,
cycling over ``temperatures``):

1. **Greedy pass**, chunk by chunk: the greedy answer says whether the model "knows" the fact. Pairs are
   stratified by greedy correctness: ``greedy_wrong_share`` of each generator's pairs have a wrong greedy answer
   (``balance_strata``, the default: each generator's strata are cut to that ratio after the sweep, so where one
   stratum runs out the other is cut to match; otherwise a top-up sweep fills the rest from the other).
2. **Probe**: ``probe_samples`` answers per candidate; a candidate with at least two well-formed answers of
   each class whose hallucinated answers are near misses (:func:`zoo.aporia.facts.is_near_miss`) at half the
   final share at least is sampled.
3. **Sampling**: ``max_samples`` fresh answers (top-p 0.95). Only *well-formed* answers (parseable, of the asked
   attribute's type: :func:`zoo.aporia.facts.label_response`) are labelled; the first ``samples`` of them form
   the pair, which is kept if both classes have at least ``min_per_class`` answers and at least
   ``min_near_miss_share`` of its hallucinated answers are near misses, until ``prompts_per_model`` pairs are
   kept (one per fact) or ``candidates_per_model`` prompts were probed. Malformed answers are left out and
   reported as a separate slice (``malformed_rate`` per generator).

Why near misses and no region questions (issue 18's headroom): MiniLM embeddings of these answers are almost
additive in (answer template, value), so when the wrong values are unrelated to the true one a linear probe on
40 labels finds the value direction and tuned logistic regression scored 0.967 F1. Measured by subsetting the
first release's pairs (3 seeds): pairs whose hallucinations are mostly near misses, region questions left out
(five values, near-duplicates of each other) scored 0.921 with tuned logistic regression, the label-free
majority vote 0.742.

Why hot sampling and balanced strata (format 5, issue 18's two headroom gates): the label-free majority vote and
the supervised probes fail on complementary pairs (``SocratesConfig.balance_strata``), so the gates are decided by
the stratum mix; with (0.7, 1.0, 1.3) and the top-up (format 4: 317 / 328 / 320 pairs) tuned logistic
regression scored 0.957. The price: at temperatures 1.0 and 1.3 the weak generators (neox_s, qwen2_xs, gpt2_xs)
answer malformed text 36-42% of the time, find few greedy-wrong pairs with six genuine answers among all their
~8,000 candidates, and keep 2-26 pairs; the dataset seeds hold 154 / 164 / 166 pairs.

Answers are embedded with MiniLM. ``build.py`` builds the published artifact (one dataset per seed) and
:func:`published` loads it, checking its sha256 against the registry pin; :func:`socrates_mini` builds or
loads a cached dataset for other settings or retrained generators.
"""

from __future__ import annotations

import hashlib
import json
import random
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from zoo import _paths
from zoo._errors import ZooError
from zoo._hub import sha256_file
from zoo._serialization import weights_digest
from zoo.aporia.facts import (
    ATTRIBUTES,
    QUESTIONS_PER_FACT,
    Fact,
    country_facts,
    extract_answer,
    is_genuine,
    is_near_miss,
    label_response,
    prompt,
)
from zoo.progress import track

DEFAULT_GENERATORS = (
    "aporia.gen_gpt2_xs",
    "aporia.gen_qwen2_xs",
    "aporia.gen_gpt2_s",
    "aporia.gen_llama_xs",
    "aporia.gen_neox_s",
    "aporia.gen_llama_s",
)
FORMAT_VERSION = 5  # 3: question_template, near_miss_share; 4: top-up sweep; 5: balanced strata (pairs_cut_to_balance)
ARTIFACT = "socrates_mini_seed{seed}.npz"  # one file per published dataset seed, in the detector's folder, pinned
PUBLISHED_SEEDS = (0, 1, 2)


@dataclass
class SocratesConfig:
    """How SOCRATES-mini is built.

    Args:
        generators: Registry names of the generator LMs (the "small LLMs").
        prompts_per_model: Pairs kept per generator at most.
        samples: Well-formed answers per kept (model, prompt) pair.
        max_samples: Answers drawn per candidate pair to find ``samples`` well-formed ones.
        min_per_class: Both classes need this many answers for a pair to be kept.
        probe_samples: Answers per fact in the cheap screening probe.
        candidates_per_model: Prompts (fact, question template) per generator at most; probing stops once the
            pairs are found.
        attributes: Attributes asked about (region, five near-identical values, is left out).
        templates_per_fact: Question templates a fact may be asked in (1-5), in turn after every fact was asked.
        min_near_miss_share: A pair is kept only if at least this share of its hallucinated answers are near
            misses (:func:`zoo.aporia.facts.is_near_miss`); 0 keeps every pair (the first release).
        greedy_wrong_share: Share of each generator's pairs whose greedy answer is wrong (the rest: greedy right,
            the paper's "knowledge present, retrieval unstable"). A wrong greedy answer usually means a wrong modal
            answer, which no answer-agreement rule can catch; without this stratum the majority vote scores
            0.84 F1 (issue 18's headroom gate asks for at most 0.80). The first sweep fills each stratum up to its
            quota of ``prompts_per_model``; then ``balance_strata`` cuts, or a top-up sweep fills the rest from the
            other stratum.
        balance_strata: After the first sweep, cut each generator's strata to the ``greedy_wrong_share`` ratio (the
            first pairs in candidate order are kept; :func:`balanced`) instead of the top-up sweep. Why (issue 18's
            two headroom gates): the label-free majority vote and the supervised probes fail on complementary
            pairs. Where the greedy answer is wrong the modal answer is usually wrong too (majority vote 0.56-0.64
            F1) but the answers form two tight clusters (tuned logistic regression ~0.98); where it is right the
            vote scores ~0.95-0.97 and hot sampling spreads the hallucinations (logistic regression ~0.92). The
            gates are means over pairs, so the stratum mix decides both, and the top-up, which filled the strong
            generators from the greedy-right stratum, moved them apart.
        temperatures: Sampling temperatures, assigned to the candidate facts in turn. (1.0, 1.3) since format 5;
            with (0.7, 1.0, 1.3) and the top-up (format 4: 317-328 pairs per dataset) tuned logistic regression
            scored 0.957 F1. Hot sampling alone (seed 0 with the top-up) left it at 0.934 but raised the majority
            vote to 0.827: the top-up had filled the strong generators with greedy-right pairs.
        top_p: Nucleus sampling mass.
        max_new_tokens: Answer length limit in tokens.
        seed: Seed of the templates, the fact order and the sampling.
    """

    generators: tuple[str, ...] = DEFAULT_GENERATORS
    prompts_per_model: int = 60
    samples: int = 50
    max_samples: int = 64
    min_per_class: int = 6
    probe_samples: int = 12
    candidates_per_model: int = 8080
    attributes: tuple[str, ...] = tuple(a for a in ATTRIBUTES if a != "region")
    templates_per_fact: int = QUESTIONS_PER_FACT
    min_near_miss_share: float = 0.5
    greedy_wrong_share: float = 0.5
    balance_strata: bool = True
    temperatures: tuple[float, ...] = (1.0, 1.3)
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
        """The label-free parsed answers of pair ``index``'s responses (None where no answer template matches);
        the true value is not consulted (``extract_answer(..., use_truth=False)``)."""
        from zoo.aporia.facts import country_facts, extract_answer

        fact = next(f for f in country_facts() if f.key == self.pairs[index]["fact"])
        return [extract_answer(fact, response, use_truth=False) for response in self.pair_responses(index)]

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
    """The zoo's data cache of this paper, ``zoo._paths.cache_dir("aporia")`` (``$ZOO_CACHE_DIR/aporia``)."""
    return _paths.cache_dir("aporia", create=False)


def cache_key(config: SocratesConfig, weight_digests: dict[str, str]) -> str:
    """A short hash of the settings, the generators' weights and the encoder."""
    from zoo.common.minilm import ENCODER

    payload = json.dumps(
        {"config": asdict(config), "weights": weight_digests, "encoder": ENCODER, "format": FORMAT_VERSION},
        sort_keys=True,
    )
    return hashlib.sha256(payload.encode()).hexdigest()[:16]


def sample_pairs(name: str, generator, config: SocratesConfig, model_index: int) -> tuple[list[dict], dict]:
    """Greedy pass, probe and sampling for one generator; returns its kept pairs and its statistics.

    Args:
        name: The generator's registry name (stored with each pair).
        generator: An ``AporiaGeneratorModule`` with its tokenizer.
        config: Dataset settings.
        model_index: Position of the generator (varies the seeds between generators).
    """
    rng = random.Random(config.seed * 7919 + model_index)
    facts = [f for f in country_facts() if f.attribute in config.attributes]
    fact_order = list(range(len(facts)))
    rng.shuffle(fact_order)
    templates = []
    for _ in facts:
        shuffled = list(range(QUESTIONS_PER_FACT))
        rng.shuffle(shuffled)
        templates.append(shuffled[: config.templates_per_fact])
    # candidates = (fact, question template): every fact once, then every fact in another phrasing, ...
    order = [(i, templates[i][r]) for r in range(config.templates_per_fact) for i in fact_order]
    order = order[: config.candidates_per_model]
    prompts = {c: prompt(facts[c[0]], c[1]) for c in order}
    temperature = {c: config.temperatures[k % len(config.temperatures)] for k, c in enumerate(order)}
    greedy: dict[tuple[int, int], str] = {}
    greedy_ok: dict[tuple[int, int], bool] = {}
    kept: list[dict] = []
    kept_facts: set[int] = set()  # one pair per fact and generator: its phrasings would be near-copies
    counts = {"probed": 0, "genuine": 0, "malformed": 0, "drawn": 0, "drawn_malformed": 0, "near_miss_short": 0}

    def draw(candidates: list[tuple[int, int]], n: int, seed: int) -> dict[tuple[int, int], list[str]]:
        """``n`` answers per candidate, each at its temperature (one sampling call per temperature)."""
        out = {}
        for t in config.temperatures:
            group = [c for c in candidates if temperature[c] == t]
            if group:
                answers = generator.sample(
                    [prompts[c] for c in group], n, temperature=t, top_p=config.top_p,
                    max_new_tokens=config.max_new_tokens, seed=seed,
                )  # fmt: skip
                out.update(zip(group, answers, strict=True))
        return out

    def near_miss_share(fact: Fact, hallucinated: list[str]) -> float:
        values = [extract_answer(fact, a) for a in hallucinated]
        return sum(is_near_miss(fact, v) for v in values if v is not None) / max(1, len(values))

    # strata by greedy correctness: pairs whose greedy answer is wrong tend to have a wrong modal answer too
    wrong = round(config.greedy_wrong_share * config.prompts_per_model)
    quota = {True: config.prompts_per_model - wrong, False: wrong}

    capped = True  # False in the top-up sweep: only the total counts
    probed: set[tuple[int, int]] = set()

    def full(greedy_right: bool) -> bool:
        if not capped:
            return len(kept) >= config.prompts_per_model
        return sum(p["greedy_genuine"] == greedy_right for p in kept) >= quota[greedy_right]

    def sweep(desc: str) -> None:
        chunk = 64
        for start in track(range(0, len(order), chunk), desc=desc, total=-(-len(order) // chunk)):
            if len(kept) >= config.prompts_per_model:
                break
            batch = [c for c in order[start : start + chunk] if c[0] not in kept_facts and c not in probed]
            fresh = [c for c in batch if c not in greedy]
            if fresh:
                answers = generator.sample(
                    [prompts[c] for c in fresh], 1, temperature=0.0, max_new_tokens=config.max_new_tokens
                )
                for c, (answer,) in zip(fresh, answers, strict=True):
                    greedy[c], greedy_ok[c] = answer, is_genuine(facts[c[0]], answer)
            batch = [c for c in batch if not full(greedy_ok[c])]  # skip full strata
            probed.update(batch)
            keep_from(batch)

    def keep_from(batch: list[tuple[int, int]]) -> None:
        candidates = []
        for c, answers in draw(batch, config.probe_samples, config.seed + 1).items():
            fact = facts[c[0]]
            labels = [label_response(fact, a) for a in answers]
            counts["probed"] += 1
            counts["genuine"] += labels.count("genuine")
            counts["malformed"] += labels.count("malformed")
            wrong_answers = [a for a, label in zip(answers, labels) if label == "hallucinated"]
            if min(labels.count("genuine"), len(wrong_answers)) < 2:
                continue
            # a screen at half the final share: the probe holds only a few hallucinated answers
            if near_miss_share(fact, wrong_answers) >= config.min_near_miss_share / 2:
                candidates.append(c)
        for c, answers in draw(candidates, config.max_samples, config.seed + 2).items():
            fact = facts[c[0]]
            labelled = [(a, label_response(fact, a)) for a in answers]
            well_formed = [(a, int(label == "hallucinated")) for a, label in labelled if label != "malformed"]
            counts["drawn"] += len(answers)
            counts["drawn_malformed"] += len(answers) - len(well_formed)
            well_formed = well_formed[: config.samples]
            n_h = sum(y for _, y in well_formed)
            enough = len(well_formed) == config.samples and min(n_h, config.samples - n_h) >= config.min_per_class
            if not enough or c[0] in kept_facts:
                continue
            if full(greedy_ok[c]):
                probed.discard(c)  # its stratum filled meanwhile: the top-up may still take it
                continue
            share = near_miss_share(fact, [a for a, y in well_formed if y])
            if share < config.min_near_miss_share:
                counts["near_miss_short"] += 1
                continue
            kept_facts.add(c[0])
            kept.append(
                {
                    "model": name,
                    "fact": fact.key,
                    "attribute": fact.attribute,
                    "country": fact.country,
                    "value": fact.value,
                    "prompt": prompts[c],
                    "question_template": c[1],
                    "temperature": temperature[c],
                    "greedy_answer": greedy[c],
                    "greedy_genuine": bool(greedy_ok[c]),
                    "near_miss_share": round(share, 4),
                    "malformed_drawn": len(answers) - len(labelled_ok(labelled)),
                    "responses": [a for a, _ in well_formed],
                    "labels": [y for _, y in well_formed],
                }
            )

    sweep(f"sampling {name}")
    first_sweep = len(kept)
    if config.balance_strata:
        kept = balanced(kept, config.greedy_wrong_share)
    elif len(kept) < config.prompts_per_model:
        # top-up: a greedy stratum ran out of candidates first; fill the rest from the other one
        capped = False
        sweep(f"top-up {name}")
    probe_total = max(1, counts["probed"] * config.probe_samples)
    stats = {
        "greedy_accuracy": float(np.mean(list(greedy_ok.values()))),
        "probe_accuracy": counts["genuine"] / probe_total,
        "probe_malformed_rate": counts["malformed"] / probe_total,
        "malformed_rate": counts["drawn_malformed"] / max(1, counts["drawn"]),  # the separate slice, left out
        "prompts_probed": counts["probed"],
        "pairs_near_miss_short": counts["near_miss_short"],
        "pairs_kept": len(kept),
        "pairs_topped_up": max(0, len(kept) - first_sweep),
        "pairs_cut_to_balance": max(0, first_sweep - len(kept)),
        "kept_greedy_accuracy": float(np.mean([p["greedy_genuine"] for p in kept])) if kept else 0.0,
        "kept_hallucination_rate": float(np.mean([np.mean(p["labels"]) for p in kept])) if kept else 0.0,
        "kept_near_miss_share": float(np.mean([p["near_miss_share"] for p in kept])) if kept else 0.0,
    }
    return kept, stats


def balanced(kept: list[dict], wrong_share: float) -> list[dict]:
    """Each greedy stratum cut to its share of the largest total the scarcer stratum allows (rounded down),
    keeping its first pairs in candidate order: with 0.5, as many greedy-right as greedy-wrong pairs.

    Args:
        kept: A generator's pairs in candidate order.
        wrong_share: Target share of pairs with a wrong greedy answer; 0 or 1 leaves ``kept`` as it is (one stratum).
    """
    if not 0 < wrong_share < 1:
        return kept
    n_wrong = sum(not p["greedy_genuine"] for p in kept)
    total = min(n_wrong / wrong_share, (len(kept) - n_wrong) / (1 - wrong_share))
    size = {False: int(total * wrong_share + 1e-9), True: int(total * (1 - wrong_share) + 1e-9)}
    taken = {True: 0, False: 0}
    out = []
    for p in kept:
        if taken[p["greedy_genuine"]] < size[p["greedy_genuine"]]:
            taken[p["greedy_genuine"]] += 1
            out.append(p)
    return out


def labelled_ok(labelled: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """The (answer, label) rows whose label is not "malformed"."""
    return [row for row in labelled if row[1] != "malformed"]


def build_socrates_mini(config: SocratesConfig, generators: dict[str, Any]) -> SocratesMini:
    """Sample, label and embed SOCRATES-mini with the given generator modules.

    Args:
        config: Dataset settings.
        generators: ``{registry name: AporiaGeneratorModule}`` for every name in ``config.generators``.
    """
    from zoo.common.minilm import embed

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


# ------------------------------------------------------------------------------------- the shipped artifact


def save_artifact(datasets: dict[int, SocratesMini], path: str | Path) -> str:
    """Write datasets by seed into one ``.npz`` (texts once, float16 embeddings once per distinct text).

    Returns:
        The file's sha256 (pin it in the registry: ``aporia.socrates_mini``'s ``sha256[artifact_name(seed)]``).
    """
    texts = sorted({t for d in datasets.values() for t in d.responses})
    index = {t: k for k, t in enumerate(texts)}
    vectors = np.zeros((len(texts), datasets[next(iter(datasets))].embeddings.shape[1]), dtype=np.float16)
    arrays: dict[str, np.ndarray] = {}
    meta: dict[str, Any] = {"format": FORMAT_VERSION, "seeds": {}}
    for seed, d in datasets.items():
        rows = np.array([index[t] for t in d.responses], dtype=np.int32)
        vectors[rows] = d.embeddings.astype(np.float16)
        arrays |= {f"text_{seed}": rows, f"labels_{seed}": d.labels, f"pair_{seed}": d.pair}
        meta["seeds"][str(seed)] = {"pairs": d.pairs, "models": d.models, "config": d.config}
    arrays["texts"] = np.array(texts, dtype=str)
    arrays["embeddings"] = vectors
    arrays["meta"] = np.array(json.dumps(meta, sort_keys=True))
    path = Path(path)
    with open(path, "wb") as handle:  # np.savez would add the name's .npz suffix; a handle keeps the path
        np.savez_compressed(handle, **arrays)
    return sha256_file(path)


def load_artifact(path: str | Path, sha256: str | None = None, renormalise: bool = True) -> dict[int, SocratesMini]:
    """Datasets by seed from :func:`save_artifact`'s file, after checking its sha256.

    Args:
        path: The ``.npz`` file.
        sha256: Expected digest (None skips the check; :func:`published` always passes the registry pin).
        renormalise: Rescale the float16 embeddings to unit length (False keeps the stored values exactly, so
            :func:`save_artifact` writes them back bit for bit: ``build --merge``).

    Raises:
        ZooError: If the file is missing or its digest differs from ``sha256``.
    """
    path = Path(path)
    if not path.is_file():
        raise ZooError(f"SOCRATES-mini artifact {path} is missing; build it with python -m zoo.aporia.build")
    if sha256 is not None and (actual := sha256_file(path)) != sha256:
        raise ZooError(
            f"SOCRATES-mini artifact {path} has sha256 {actual[:12]}..., the pin is {sha256[:12]}...: the file is "
            "corrupted or was rebuilt; restore it (git checkout) or rebuild and re-pin it (python -m zoo.aporia.build)"
        )
    with np.load(path, allow_pickle=False) as arrays:
        meta = json.loads(str(arrays["meta"]))
        if meta.get("format") != FORMAT_VERSION:
            raise ZooError(f"{path} has format {meta.get('format')}, this code reads {FORMAT_VERSION}; rebuild it")
        texts, vectors = arrays["texts"], arrays["embeddings"].astype(np.float32)
        if renormalise:
            vectors /= np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12)  # undo float16 rounding
        datasets = {}
        for seed, info in meta["seeds"].items():
            rows = arrays[f"text_{seed}"]
            datasets[int(seed)] = SocratesMini(
                responses=[str(t) for t in texts[rows]],
                labels=arrays[f"labels_{seed}"],
                pair=arrays[f"pair_{seed}"],
                embeddings=vectors[rows],
                pairs=info["pairs"],
                models=info["models"],
                config=info["config"],
            )
    return datasets


def artifact_name(seed: int) -> str:
    """The shipped file of dataset seed ``seed`` (one file per seed keeps each under the 10 MB file limit)."""
    return ARTIFACT.format(seed=seed)


def artifact_path(seed: int = 0) -> Path:
    """The shipped file of dataset seed ``seed``, in the detector's folder ``hub_cards/aporia.socrates_mini``."""
    from zoo._registry import get_entry

    return get_entry("aporia.socrates_mini").mirror_dir / artifact_name(seed)


def published(seed: int = 0) -> SocratesMini:
    """The published SOCRATES-mini of dataset seed ``seed``, hash-checked against the registry pin.

    Raises:
        ZooError: On an unpublished seed, or an artifact whose sha256 differs from the pin.
    """
    from zoo._registry import get_entry

    if seed not in PUBLISHED_SEEDS:
        raise ZooError(f"SOCRATES-mini is published for dataset seeds {list(PUBLISHED_SEEDS)}, not {seed}")
    pins, name = get_entry("aporia.socrates_mini").pretrained_cfg.sha256, artifact_name(seed)
    if name not in pins:
        raise ZooError(f"the registry pins no {name} for aporia.socrates_mini; run python -m zoo.aporia.build")
    datasets = _published(seed, pins[name])
    if seed not in datasets:
        raise ZooError(f"{name} holds dataset seeds {sorted(datasets)}, not {seed}; rebuild it")
    return datasets[seed]


_PUBLISHED: dict[tuple[int, str], dict[int, SocratesMini]] = {}


def _published(seed: int, sha256: str) -> dict[int, SocratesMini]:
    if (seed, sha256) not in _PUBLISHED:
        _PUBLISHED[seed, sha256] = load_artifact(artifact_path(seed), sha256)
    return _PUBLISHED[seed, sha256]


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
