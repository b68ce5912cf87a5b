"""The facts corpus and the labelling rule on known correct and wrong answers."""

from __future__ import annotations

from collections import Counter

import pytest

from zoo.aporia.facts import (
    ANSWER_TEMPLATES,
    QUESTION_TEMPLATES,
    country_facts,
    extract_answer,
    fact_lines,
    fold_answer,
    is_genuine,
    prompt,
)


def _fact(country: str, attribute: str):
    return next(f for f in country_facts() if f.country == country and f.attribute == attribute)


def test_facts_cover_the_countries():
    facts = country_facts()
    counts = Counter(f.attribute for f in facts)
    assert 1800 < len(facts) < 2000
    assert counts["capital"] == 250 and counts["region"] == 253
    assert _fact("Peru", "capital").value == "Lima"
    assert _fact("Peru", "calling_code").value == "+51"
    assert _fact("Peru", "language").value == "Spanish"
    assert _fact("Vatican City State", "capital").value == "Vatican City"  # a list in countryinfo


def test_corpus_states_each_fact_five_times_with_every_template():
    facts = [_fact("Peru", "capital"), _fact("Japan", "currency")]
    lines = fact_lines(facts, seed=0)
    assert len(lines) == 10
    assert sorted(lines) == sorted(fact_lines(facts, seed=0))  # deterministic
    for fact in facts:
        mine = [line for line in lines if f" {fact.country}" in line]
        assert len(mine) == 5
        assert {fact.question(t) for t in range(5)} == {line[3 : line.index(" A: ")] for line in mine}
        assert {fact.answer(t) for t in range(5)} == {line[line.index(" A: ") + 4 :] for line in mine}
    assert all(len(QUESTION_TEMPLATES[a]) == len(ANSWER_TEMPLATES[a]) == 5 for a in QUESTION_TEMPLATES)


@pytest.mark.parametrize(
    ("country", "attribute", "response", "genuine"),
    [
        ("Peru", "capital", "The capital of Peru is Lima.", True),
        ("Peru", "capital", "Lima is the capital of Peru.", True),  # another template of the attribute
        ("Peru", "capital", "  the CAPITAL of peru is lima ", True),  # case, spacing, no final period
        ("Peru", "capital", "The capital of Peru is Quito.", False),  # wrong value
        ("Peru", "capital", "The capital of Chile is Lima.", False),  # wrong country
        ("Peru", "capital", "Peru is in Americas.", False),  # another attribute's template
        ("Peru", "capital", "Lima.", False),  # matches no template
        ("Peru", "capital", "The capital of Peru is Lima and Cusco.", False),
        ("Peru", "border", "Peru borders Bolivia.", True),  # the fact taught
        ("Peru", "border", "Chile is a neighbour of Peru.", True),  # any true neighbour
        ("Peru", "border", "Peru borders Brasil.", True),  # alias from altSpellings
        ("Peru", "border", "Peru borders Argentina.", False),
        ("Peru", "border", "Peru borders PER.", False),  # ISO codes are not aliases
        ("Peru", "region", "Peru is part of the Americas.", True),  # leading "the" folded
        ("Peru", "calling_code", "The calling code of Peru is +51.", True),
        ("Peru", "calling_code", "The calling code of Peru is 51.", False),
        ("Curaçao", "capital", "The capital of Curacao is Willemstad.", True),  # diacritics folded
        ("Ivory Coast", "demonym", "People from Ivory Coast are called Ivorian.", True),
        ("Ivory Coast", "demonym", "People from Ivory Coast are called Ivor�.", False),  # garbled bytes
    ],
)
def test_labelling_rule(country, attribute, response, genuine):
    assert is_genuine(_fact(country, attribute), response) is genuine


def test_extract_answer_and_prompt():
    fact = _fact("Peru", "capital")
    assert extract_answer(fact, "Peru has its capital in San José.") == "san jose"
    assert extract_answer(fact, "nonsense") is None
    assert prompt(fact, 0) == "Q: What is the capital of Peru? A:"
    assert fold_answer("The Bahamas.") == "bahamas"
