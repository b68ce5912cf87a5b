"""The question/answer templates of the country facts, the facts corpus, and the labelling rule.

A *fact* is (country, attribute, value), read by :func:`zoo.common.countries.country_facts` (prefetch_rag
reads the same facts). Each attribute has five question templates and ten answer templates (paraphrases: the
value at the start, middle or end of the sentence, different verbs). The training corpus states every fact five
times, question template ``i`` followed by one of five answer templates drawn per fact from the ten, so a model
that knows a fact phrases its answer many ways and genuine answers are semantically identical but not
near-duplicate strings.

Labelling rule (documented in the card, ``card.md``; tested in ``tests/aporia/test_facts.py``):

1. Fold the response and the templates: Unicode NFKD, diacritics dropped, case folded, whitespace
   collapsed, trailing punctuation dropped.
2. Parse: the response must match one of the ten answer templates *of the asked attribute*, with the
   *asked country* in the country slot; the text in the value slot (folded, leading "the" and punctuation
   other than ``+`` removed) is a candidate answer. Several templates may match; every parse is a candidate.
3. Type: a candidate is *well-formed* if it is a value of the asked attribute for some country (a real
   capital, region, currency code, ...; for borders any country name or alias). A response with no
   well-formed candidate is **malformed** (garbled, run-on, about another country, wrong type) and is not
   labelled: SOCRATES-mini keeps it out of the pairs and reports its rate separately.
4. A well-formed response is **genuine** iff a candidate equals the folded value or one of its aliases
   (for borders: every true neighbour and its ``altSpellings`` longer than three characters), else
   **hallucinated**: fluent, parseable, of the right type, and wrong.

A hallucinated answer is a **near miss** (:func:`is_near_miss`) when its value is close to a true one on the
label side, without embeddings: it shares a content word with an accepted value ("Western Africa" for
"Middle Africa", "Republic of the Congo" for "DR Congo") or its string similarity to one is at least
:data:`NEAR_MISS_RATIO` (calling codes +502/+503, currency codes XOF/XAF). SOCRATES-mini keeps the pairs whose
hallucinations are mostly near misses: the confusable errors that make detection hard.
"""

from __future__ import annotations

import difflib
import random
import re
from collections.abc import Sequence
from functools import lru_cache

from zoo.common.countries import ATTRIBUTES, Fact, country_facts, fold, fold_answer

QUESTIONS_PER_FACT = 5  # question templates per attribute = lines per fact in the corpus

QUESTION_TEMPLATES: dict[str, tuple[str, ...]] = {
    "capital": (
        "What is the capital of {c}?",
        "Which city is the capital of {c}?",
        "Name the capital city of {c}.",
        "What city serves as the capital of {c}?",
        "Where is the seat of government of {c}?",
    ),
    "region": (
        "In which region is {c}?",
        "Which world region does {c} belong to?",
        "What region is {c} part of?",
        "Where in the world is {c}?",
        "On which continent group does {c} lie?",
    ),
    "subregion": (
        "What is the subregion of {c}?",
        "Which subregion contains {c}?",
        "In which subregion is {c} located?",
        "Which part of its region is {c} in?",
        "How do geographers classify the location of {c}?",
    ),
    "demonym": (
        "What is the demonym of {c}?",
        "What are people from {c} called?",
        "What do you call someone from {c}?",
        "How is a native of {c} described?",
        "What word describes a person from {c}?",
    ),
    "currency": (
        "What is the currency code of {c}?",
        "Which currency code does {c} use?",
        "What code does the money of {c} have?",
        "Which currency is used in {c}?",
        "How is the currency of {c} abbreviated?",
    ),
    "calling_code": (
        "What is the calling code of {c}?",
        "Which telephone code does {c} use?",
        "What do you dial to call {c}?",
        "What is the international dialling code of {c}?",
        "Which phone prefix belongs to {c}?",
    ),
    "border": (
        "Which country borders {c}?",
        "Name a neighbour of {c}.",
        "What country shares a border with {c}?",
        "Which country lies next to {c}?",
        "Name a country on the border of {c}.",
    ),
    "language": (
        "What is the main language of {c}?",
        "Which language is spoken in {c}?",
        "What language do people speak in {c}?",
        "What is the first official language of {c}?",
        "In which language do people in {c} talk?",
    ),
}

ANSWER_TEMPLATES: dict[str, tuple[str, ...]] = {
    "capital": (
        "The capital of {c} is {v}.",
        "{v} is the capital of {c}.",
        "The capital city of {c} is {v}.",
        "{c} has its capital in {v}.",
        "The government of {c} sits in {v}.",
        "{v} serves as the capital of {c}.",
        "The seat of government of {c} is in {v}.",
        "{c} is governed from {v}.",
        "{c}'s capital is {v}.",
        "If you visit the capital of {c}, you go to {v}.",
    ),
    "region": (
        "{c} is in {v}.",
        "{c} belongs to the region of {v}.",
        "{c} is part of {v}.",
        "{c} lies in {v}.",
        "The region of {c} is {v}.",
        "{c} is a country in {v}.",
        "{v} is the region where {c} lies.",
        "You find {c} in {v}.",
        "{c} is located in the region {v}.",
        "{c}'s region is {v}.",
    ),
    "subregion": (
        "The subregion of {c} is {v}.",
        "{c} is located in the subregion {v}.",
        "{v} is the subregion that contains {c}.",
        "{c} belongs to the subregion of {v}.",
        "Geographers place {c} in {v}.",
        "{c} lies in the subregion {v}.",
        "{c}'s subregion is {v}.",
        "Within its region, {c} is in {v}.",
        "{c} is classified as part of {v}.",
        "The subregion {v} includes {c}.",
    ),
    "demonym": (
        "People from {c} are called {v}.",
        "The demonym of {c} is {v}.",
        "Someone from {c} is {v}.",
        "A native of {c} is called {v}.",
        "A person from {c} is {v}.",
        "Citizens of {c} are called {v}.",
        "{c}'s people are known as {v}.",
        "The people of {c} are {v}.",
        "We call a person from {c} {v}.",
        "Someone born in {c} is called {v}.",
    ),
    "currency": (
        "The currency code of {c} is {v}.",
        "{c} uses the currency code {v}.",
        "{v} is the currency code of {c}.",
        "Money in {c} has the code {v}.",
        "In {c} the currency code is {v}.",
        "The money of {c} is coded {v}.",
        "{c}'s currency code is {v}.",
        "Prices in {c} are given in {v}.",
        "The currency of {c} has the code {v}.",
        "{c} pays in {v}.",
    ),
    "calling_code": (
        "The calling code of {c} is {v}.",
        "{c} uses the calling code {v}.",
        "To call {c} you dial {v}.",
        "The dialling code of {c} is {v}.",
        "Phone numbers in {c} start with {v}.",
        "{c}'s calling code is {v}.",
        "Calls to {c} use the prefix {v}.",
        "The phone prefix of {c} is {v}.",
        "You reach {c} by dialling {v}.",
        "{v} is the calling code of {c}.",
    ),
    "border": (
        "{c} borders {v}.",
        "{v} is a neighbour of {c}.",
        "{c} shares a border with {v}.",
        "A country next to {c} is {v}.",
        "{v} lies on the border of {c}.",
        "{v} borders {c}.",
        "One neighbour of {c} is {v}.",
        "{c} has a border with {v}.",
        "{c} and {v} share a border.",
        "{c} is next to {v}.",
    ),
    "language": (
        "The main language of {c} is {v}.",
        "People in {c} speak {v}.",
        "{v} is spoken in {c}.",
        "The first official language of {c} is {v}.",
        "In {c} people talk in {v}.",
        "{c}'s main language is {v}.",
        "Most people in {c} speak {v}.",
        "The language of {c} is {v}.",
        "{v} is the main language of {c}.",
        "People from {c} speak {v}.",
    ),
}


def question_text(fact: Fact, template: int) -> str:
    """The question about ``fact`` in template ``template`` (0-4)."""
    return QUESTION_TEMPLATES[fact.attribute][template].format(c=fact.country)


def answer_text(fact: Fact, template: int) -> str:
    """The correct answer sentence of ``fact`` in template ``template`` (0-9)."""
    return ANSWER_TEMPLATES[fact.attribute][template].format(c=fact.country, v=fact.value)


def fact_lines(facts: Sequence[Fact], seed: int = 0, paraphrases: int = 10) -> list[str]:
    """The facts corpus: each fact five times ("Q: question A: answer"), five of its answer templates per fact.

    Args:
        facts: Facts to state.
        seed: Seed of the per-fact answer-template choice and of the line order.
        paraphrases: Answer templates the choice draws from: 10 (all), or 5 (the first five: the corpus of the
            first SOCRATES-mini, which the generators gpt2_s, llama_xs and llama_s were trained on).
    """
    if not QUESTIONS_PER_FACT <= paraphrases <= len(ANSWER_TEMPLATES["capital"]):
        raise ValueError(f"paraphrases={paraphrases} must be between {QUESTIONS_PER_FACT} and 10")
    rng = random.Random(seed)
    lines = []
    for fact in facts:
        answers = list(range(paraphrases))
        rng.shuffle(answers)
        lines += [f"{prompt(fact, q)} {answer_text(fact, a)}" for q, a in enumerate(answers[:QUESTIONS_PER_FACT])]
    rng.shuffle(lines)
    return lines


def prompt(fact: Fact, template: int) -> str:
    """The generation prompt ``"Q: <question> A:"``; the model continues with the answer."""
    return f"Q: {question_text(fact, template)} A:"


@lru_cache(maxsize=4096)
def _answer_patterns(attribute: str, country: str) -> tuple[re.Pattern, ...]:
    patterns = []
    for template in ANSWER_TEMPLATES[attribute]:
        before, after = fold(template.format(c=country, v="\x00")).split("\x00")
        patterns.append(re.compile(re.escape(before) + r"(?P<value>.+?)" + re.escape(after) + r"$"))
    return tuple(patterns)


@lru_cache(maxsize=len(ATTRIBUTES))
def value_vocabulary(attribute: str) -> frozenset[str]:
    """Every folded answer that is a value of ``attribute`` for some country: the "right type" of answer."""
    return frozenset().union(*(f.accepted for f in country_facts() if f.attribute == attribute))


def parse_answers(fact: Fact, response: str) -> list[str]:
    """Every folded answer that an answer template of ``fact``'s attribute and country reads in ``response``."""
    text = fold(response)
    answers = []
    for pattern in _answer_patterns(fact.attribute, fact.country):
        match = pattern.match(text)
        if match:
            answer = fold_answer(match.group("value"))
            if answer and answer not in answers:
                answers.append(answer)
    return answers


def extract_answer(fact: Fact, response: str, use_truth: bool = True) -> str | None:
    """The folded answer of ``response`` to a question about ``fact``, None if it matches no template.

    Args:
        fact: The fact asked about.
        response: The generated answer.
        use_truth: Prefer a correct parse when several templates match (the labeller). False gives the
            label-free parse the majority vote and semantic entropy read: a parse of the right type, else the first.
    """
    answers = parse_answers(fact, response)
    vocabulary = value_vocabulary(fact.attribute)
    rules = (lambda a: a in fact.accepted,) if use_truth else ()
    for good in (*rules, lambda a: a in vocabulary, lambda a: True):
        for answer in answers:
            if good(answer):
                return answer
    return None


def label_response(fact: Fact, response: str) -> str:
    """``"genuine"``, ``"hallucinated"`` (well-formed and wrong) or ``"malformed"`` (see the module docstring).

    Args:
        fact: The fact the prompt asked about.
        response: The generated answer (without the prompt).
    """
    answer = extract_answer(fact, response)
    if answer is not None and answer in fact.accepted:
        return "genuine"
    if answer is not None and answer in value_vocabulary(fact.attribute):
        return "hallucinated"
    return "malformed"


def is_genuine(fact: Fact, response: str) -> bool:
    """True iff the response states the fact (any template, any accepted alias), else False.

    Args:
        fact: The fact the prompt asked about.
        response: The generated answer (without the prompt).
    """
    return label_response(fact, response) == "genuine"


def is_well_formed(fact: Fact, response: str) -> bool:
    """True iff the response parses and its answer has the asked attribute's type (genuine or hallucinated)."""
    return label_response(fact, response) != "malformed"


NEAR_MISS_RATIO = 0.6  # difflib ratio from which two values count as confusable (+502/+503: 0.75, XOF/XAF: 0.67)
_FILLER_WORDS = frozenset({"and", "of", "the"})


def is_near_miss(fact: Fact, answer: str) -> bool:
    """True iff the folded wrong ``answer`` is close to one of ``fact``'s accepted values (see the module docstring).

    Args:
        fact: The fact asked about.
        answer: A folded answer value (:func:`extract_answer`), normally a hallucinated one.
    """
    words = set(answer.split()) - _FILLER_WORDS
    for value in fact.accepted:
        if words & set(value.split()):
            return True
        if difflib.SequenceMatcher(None, value, answer).ratio() >= NEAR_MISS_RATIO:
            return True
    return False
