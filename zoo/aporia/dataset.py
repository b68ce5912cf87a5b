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

Answers are embedded with MiniLM. :mod:`zoo.aporia.sampling` samples, labels and embeds the pairs; ``build.py``
builds the published artifact (one dataset per seed, :mod:`zoo.aporia.artifact`) and
:func:`zoo.aporia.artifact.published` loads it, checking its sha256 against the registry pin;
:func:`zoo.aporia.cache.socrates_mini` builds or loads a cached dataset for other settings or retrained generators.
This module holds the settings (:class:`SocratesConfig`) and the dataset itself (:class:`SocratesMini`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from zoo.aporia.facts import ATTRIBUTES, QUESTIONS_PER_FACT

DEFAULT_GENERATORS = (
    "aporia.gen_gpt2_xs",
    "aporia.gen_qwen2_xs",
    "aporia.gen_gpt2_s",
    "aporia.gen_llama_xs",
    "aporia.gen_neox_s",
    "aporia.gen_llama_s",
)
FORMAT_VERSION = 5  # 3: question_template, near_miss_share; 4: top-up sweep; 5: balanced strata (pairs_cut_to_balance)


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
            first pairs in candidate order are kept; :func:`zoo.aporia.sampling.balanced`) instead of the top-up
            sweep. Why (issue 18's two headroom gates): the label-free majority vote and the supervised probes fail on
            complementary pairs. Where the greedy answer is wrong the modal answer is usually wrong too (majority vote
            0.56-0.64 F1) but the answers form two tight clusters (tuned logistic regression ~0.98); where it is right
            the vote scores ~0.95-0.97 and hot sampling spreads the hallucinations (logistic regression ~0.92). The
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
