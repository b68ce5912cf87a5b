"""The knowledge base and the templated QA of the prefetch_rag reconstruction (all offline).

* Fact documents: one per (country, attribute) for five attributes of ``countryinfo`` (capital, currency code,
  main language, calling code, demonym), read through :func:`zoo.common.countries.country_facts` (aporia reads
  the same facts; countries whose value of one of the five attributes is missing or holds a ``.`` are dropped:
  235 remain).
* Distractors: gensim's Wikipedia articles in 120-word chunks (stride 100) and the 300 Lee news documents
  (:mod:`zoo.common.text`).
* Questions (R): "Tell me about <country>." answered by an intro sentence and four slot sentences, each a
  lead-in phrase (the "precursor") followed by the slot value and ``.``. The multi-domain variant switches country
  after two slots ("Next, consider <other>."). Lead-ins come from three disjoint pools: ``train`` (the LM and the
  heads), ``val`` (tuning) and ``test`` (held out); each pool has long lead-ins (8-16 tokens) and short ones
  (at most 4 tokens; :mod:`zoo.prefetch_rag.lead_ins`). 20% of the questions of a set use only short lead-ins
  (:attr:`Question.short`).
* Country split (R, split seed fixed, independent of the model seed): 30% test countries (held out, touched once);
  the 70% training countries are split into ``lm`` (the LM trains on them), ``heads`` (predictor and query head
  train on the LM's synchronous runs over them) and ``val`` (tuning). Heads and tuning use countries the LM never
  saw, so their slots are as uncertain as the test countries'.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from functools import lru_cache

from zoo.prefetch_rag.lead_ins import LEAD_INS, POOLS

ATTRIBUTES = ("capital", "currency", "language", "calling_code", "demonym")
SPLIT_SEED = 1234
TEST_FRACTION = 0.3
TRAIN_PARTS = {"lm": 0.6, "heads": 0.25, "val": 0.15}  # of the 70% training countries
SLOTS_PER_ANSWER = 4
SHORT_FRACTION = 0.2
STOP = "."

DOC_TEMPLATES = {
    "capital": "The capital of {c} is {v}.",
    "currency": "The currency of {c} is {v}.",
    "language": "The main language of {c} is {v}.",
    "calling_code": "The calling code of {c} is {v}.",
    "demonym": "People from {c} are called {v}.",
}

INTRO = "Here is what I know about {c}."
SWITCH = "Next, consider {c}."
QUESTION = "Tell me about {c}."
QUESTION_MULTI = "Tell me about {c}, then {c2}."


@dataclass(frozen=True)
class Segment:
    """A piece of an answer: forced text (``attribute`` None) or a slot the LM must fill with ``value``."""

    text: str
    attribute: str | None = None
    country: str | None = None

    @property
    def is_slot(self) -> bool:
        return self.attribute is not None


@dataclass(frozen=True)
class Question:
    """A templated question and the segments of its reference answer."""

    question: str
    segments: tuple[Segment, ...]
    multi: bool = False
    short: bool = False

    @property
    def slots(self) -> tuple[Segment, ...]:
        return tuple(s for s in self.segments if s.is_slot)


@lru_cache(maxsize=1)
def facts() -> dict[str, dict[str, str]]:
    """``{country: {attribute: value}}`` for the countries that have all five attributes (no ``.`` in a value)."""
    from zoo.common.countries import country_facts

    table: dict[str, dict[str, str]] = {}
    for fact in country_facts():
        if fact.attribute in ATTRIBUTES:
            table.setdefault(fact.country, {})[fact.attribute] = fact.value
    return {
        c: {a: v[a] for a in ATTRIBUTES}
        for c, v in sorted(table.items())
        if all(a in v and STOP not in v[a] and v[a].strip() for a in ATTRIBUTES) and STOP not in c
    }


@lru_cache(maxsize=1)
def country_split() -> dict[str, tuple[str, ...]]:
    """Countries by split: ``lm``, ``heads``, ``val`` (the 70% training countries) and ``test`` (30%)."""
    countries = list(facts())
    random.Random(SPLIT_SEED).shuffle(countries)
    n_test = round(TEST_FRACTION * len(countries))
    test, train = countries[:n_test], countries[n_test:]
    n_lm = round(TRAIN_PARTS["lm"] * len(train))
    n_heads = round(TRAIN_PARTS["heads"] * len(train))
    return {
        "lm": tuple(train[:n_lm]),
        "heads": tuple(train[n_lm : n_lm + n_heads]),
        "val": tuple(train[n_lm + n_heads :]),
        "test": tuple(test),
    }


def fact_document(country: str, attribute: str, value: str | None = None) -> str:
    """The knowledge-base document of one fact (``value`` overrides the true value: counterfactual training)."""
    return DOC_TEMPLATES[attribute].format(c=country, v=facts()[country][attribute] if value is None else value)


@lru_cache(maxsize=1)
def values_by_attribute() -> dict[str, tuple[str, ...]]:
    """Every distinct value of each attribute (the pool counterfactual values are drawn from)."""
    table = facts()
    return {a: tuple(sorted({v[a] for v in table.values()})) for a in ATTRIBUTES}


@lru_cache(maxsize=1)
def fact_documents() -> tuple[tuple[str, str, str], ...]:
    """``(country, attribute, text)`` of every fact document, in a fixed order."""
    return tuple((c, a, fact_document(c, a)) for c in facts() for a in ATTRIBUTES)


@lru_cache(maxsize=1)
def distractor_documents() -> tuple[str, ...]:
    """Wikipedia chunks (120 words, stride 100, articles over 2,000 characters) and the Lee news documents."""
    from zoo.common.text import lee_corpus, wikipedia_articles

    chunks = []
    for article in wikipedia_articles(min_chars=2000):
        words = article.text.split()
        for start in range(0, max(1, len(words) - 20), 100):
            chunks.append(" ".join(words[start : start + 120]))
    return tuple(chunks) + tuple(lee_corpus())


def knowledge_base() -> list[str]:
    """All documents of the index: the fact documents first, then the distractors."""
    return [text for _, _, text in fact_documents()] + list(distractor_documents())


def _lead_in(attribute: str, pool: str, short: bool, rng: random.Random) -> str:
    return rng.choice(LEAD_INS[attribute][f"{pool}_short" if short else pool])


def make_question(
    country: str,
    rng: random.Random,
    pool: str,
    multi: bool = False,
    other: str | None = None,
    short: bool = False,
    n_slots: int = SLOTS_PER_ANSWER,
) -> Question:
    """One question about ``country`` (and ``other`` after the switch when ``multi``).

    Args:
        country: The first (or only) country.
        rng: Source of the attribute order and lead-in choice.
        pool: Lead-in pool: ``train``, ``val`` or ``test``.
        multi: Switch to ``other`` after two slots.
        other: The second country of a multi-domain question.
        short: Use only short lead-ins (at most 4 tokens).
        n_slots: Slots in the answer (1-5; a multi-domain answer splits them between the countries, at least 2).
    """
    if pool not in POOLS:
        raise ValueError(f"pool must be one of {POOLS}, got {pool!r}")
    table = facts()
    segments = [Segment(INTRO.format(c=country))]
    if multi:
        if other is None or other == country:
            raise ValueError("a multi-domain question needs another country")
        if n_slots < 2:
            raise ValueError(f"n_slots must be >= 2 for a multi-domain question, got {n_slots}")
        first = n_slots // 2
        plan = [(country, a) for a in rng.sample(ATTRIBUTES, first)]
        plan += [(other, a) for a in rng.sample(ATTRIBUTES, n_slots - first)]
    else:
        if not 1 <= n_slots <= len(ATTRIBUTES):
            raise ValueError(f"n_slots must be in [1, {len(ATTRIBUTES)}], got {n_slots}")
        plan = [(country, a) for a in rng.sample(ATTRIBUTES, n_slots)]
        first = n_slots
    for i, (c, attribute) in enumerate(plan):
        if multi and i == first:
            segments.append(Segment(SWITCH.format(c=other)))
        segments.append(Segment(_lead_in(attribute, pool, short, rng)))
        segments.append(Segment(table[c][attribute], attribute, c))
    text = QUESTION_MULTI.format(c=country, c2=other) if multi else QUESTION.format(c=country)
    return Question(text, tuple(segments), multi=multi, short=short)


def hop_question(first: str, second: str, rng: random.Random, pool: str, short: bool = False, n_slots: int = 4):
    """A *hop* question (the evaluation's, sixth release; no training reads it): the answer alternates between
    ``first`` and ``second`` (``first``, ``second``, ``first``, ...), a topic sentence ("Next, consider <country>.")
    before every slot but the first, so every spike asks for another country than the one before it. Marked
    ``multi`` (two countries).

    Args:
        first: The country of the odd slots (named by the intro).
        second: The country of the even slots.
        rng: Source of the attributes and lead-ins.
        pool: Lead-in pool (``val`` or ``test``).
        short: Short lead-ins only.
        n_slots: Slots (2-10: each country has at most five attributes).
    """
    if first == second:
        raise ValueError("a hop question needs two different countries")
    if not 2 <= n_slots <= 2 * len(ATTRIBUTES):
        raise ValueError(f"n_slots must be in [2, {2 * len(ATTRIBUTES)}], got {n_slots}")
    table = facts()
    attributes = {first: rng.sample(ATTRIBUTES, (n_slots + 1) // 2), second: rng.sample(ATTRIBUTES, n_slots // 2)}
    segments = [Segment(INTRO.format(c=first))]
    for i in range(n_slots):
        country = (first, second)[i % 2]
        attribute = attributes[country][i // 2]
        if i:
            segments.append(Segment(SWITCH.format(c=country)))
        segments.append(Segment(_lead_in(attribute, pool, short, rng)))
        segments.append(Segment(table[country][attribute], attribute, country))
    return Question(QUESTION_MULTI.format(c=first, c2=second), tuple(segments), multi=True, short=short)


def hop_questions(split: str, n: int, seed: int) -> list:
    """``n`` reproducible hop questions about the countries of ``split`` (its own lead-in pool)."""
    countries = country_split()[split]
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        first = rng.choice(countries)
        second = rng.choice([c for c in countries if c != first])
        out.append(hop_question(first, second, rng, split, short=rng.random() < SHORT_FRACTION))
    return out


def question_set(split: str, n_single: int, n_multi: int, seed: int, pool: str | None = None) -> list[Question]:
    """A reproducible set of questions about the countries of ``split``.

    Args:
        split: ``lm``, ``heads``, ``val`` or ``test``.
        n_single: Single-domain questions.
        n_multi: Multi-domain questions.
        seed: Seed of the draw (the test set uses a fixed seed, never the model seed).
        pool: Lead-in pool; default ``train`` for ``lm``/``heads``, else the split's own.
    """
    countries = country_split()[split]
    pool = pool or {"lm": "train", "heads": "train", "val": "val", "test": "test"}[split]
    rng = random.Random(seed)
    out = []
    for i in range(n_single + n_multi):
        multi = i >= n_single
        country = countries[i % len(countries)] if not multi else rng.choice(countries)
        other = rng.choice([c for c in countries if c != country]) if multi else None
        short = rng.random() < SHORT_FRACTION
        out.append(make_question(country, rng, pool, multi=multi, other=other, short=short))
    return out
