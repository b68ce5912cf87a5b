"""The facts corpus and the labelling rule on known correct and wrong answers."""

from __future__ import annotations

from collections import Counter

import pytest

from zoo.aporia.facts import (
    ANSWER_TEMPLATES,
    QUESTION_TEMPLATES,
    answer_text,
    country_facts,
    extract_answer,
    fact_lines,
    fold_answer,
    is_genuine,
    is_near_miss,
    label_response,
    parse_answers,
    prompt,
    question_text,
    value_vocabulary,
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


def test_corpus_states_each_fact_five_times_with_paraphrased_answers():
    facts = [_fact("Peru", "capital"), _fact("Japan", "currency")]
    lines = fact_lines(facts, seed=0)
    assert len(lines) == 10
    assert sorted(lines) == sorted(fact_lines(facts, seed=0))  # deterministic
    for fact in facts:
        mine = [line for line in lines if f" {fact.country}" in line]
        assert len(mine) == 5
        assert {question_text(fact, t) for t in range(5)} == {line[3 : line.index(" A: ")] for line in mine}
        answers = {line[line.index(" A: ") + 4 :] for line in mine}
        assert len(answers) == 5 and answers <= {answer_text(fact, t) for t in range(10)}  # 5 of the 10 paraphrases
    assert all(len(QUESTION_TEMPLATES[a]) == 5 and len(ANSWER_TEMPLATES[a]) == 10 for a in QUESTION_TEMPLATES)
    # across facts every paraphrase is taught, so genuine answers are not one or two strings
    used = Counter(line.split(" A: ")[1].replace("Lima", "{v}") for line in fact_lines([facts[0]] * 20, seed=1))
    assert len(used) == 10


def test_labeller_never_calls_a_well_formed_correct_answer_hallucinated():
    """Every fact stated in every one of its ten templates, plus hand-written variants: all genuine."""
    for fact in country_facts():
        for template in range(10):
            assert label_response(fact, answer_text(fact, template)) == "genuine", (fact, template)
    handwritten = [
        ("Peru", "capital", "the capital of PERU is lima"),
        ("Peru", "capital", "Lima serves as the capital of Peru!"),
        ("Peru", "capital", "Peru's capital is Lima."),
        ("Peru", "capital", "If you visit the capital of Peru, you go to Lima."),
        ("Peru", "border", "One neighbour of Peru is Brazil."),
        ("Peru", "border", "Peru and Chile share a border."),
        ("Peru", "border", "Ecuador borders Peru."),
        ("Peru", "border", "Peru is next to Brasil."),
        ("Peru", "region", "You find Peru in the Americas."),
        ("Peru", "region", "Peru is in Americas"),
        ("Peru", "calling_code", "You reach Peru by dialling +51."),
        ("Peru", "language", "Most people in Peru speak Spanish."),
        ("Peru", "currency", "Prices in Peru are given in PEN."),
        ("Curaçao", "capital", "Curacao's capital is Willemstad."),
        ("Ivory Coast", "demonym", "Citizens of Ivory Coast are called Ivorian."),
        ("Japan", "subregion", "The subregion Eastern Asia includes Japan."),
        ("Japan", "demonym", "We call a person from Japan Japanese."),
    ]
    for country, attribute, response in handwritten:
        assert label_response(_fact(country, attribute), response) == "genuine", response


@pytest.mark.parametrize(
    ("response", "label"),
    [
        ("The capital of Peru is Quito.", "hallucinated"),  # well-formed: right type, wrong value
        ("Quito serves as the capital of Peru.", "hallucinated"),
        ("Peru's capital is Tokyo.", "hallucinated"),
        ("The capital of Peru is Lima.", "genuine"),
        ("The capital of Peru is Americas.", "malformed"),  # parses, but a region is not a capital
        ("The capital of Peru is Lima and Cusco.", "malformed"),  # run-on
        ("The capital of Chile is Lima.", "malformed"),  # another country
        ("Peru is in Americas.", "malformed"),  # another attribute's template
        ("The capital of Peru is Lim Lim the the.", "malformed"),  # garbled
        ("", "malformed"),
    ],
)
def test_hallucinated_means_well_formed_and_wrong(response, label):
    assert label_response(_fact("Peru", "capital"), response) == label


def test_value_types():
    assert "lima" in value_vocabulary("capital") and "quito" in value_vocabulary("capital")
    assert value_vocabulary("region") == frozenset({"africa", "americas", "asia", "europe", "oceania"})
    assert "+51" in value_vocabulary("calling_code") and "51" not in value_vocabulary("calling_code")
    # several templates can read a sentence; the labeller keeps every parse
    assert set(parse_answers(_fact("Peru", "region"), "Peru is in the region of Americas.")) >= {"region of americas"}


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
    assert extract_answer(fact, "Peru has its capital in San José.", use_truth=False) == "san jose"
    assert extract_answer(fact, "nonsense") is None
    assert prompt(fact, 0) == "Q: What is the capital of Peru? A:"
    assert fold_answer("The Bahamas.") == "bahamas"


@pytest.mark.parametrize(
    "key, wrong, near",
    [
        ("calling_code:Guatemala", "+503", True),  # one digit off
        ("calling_code:Guatemala", "+44", False),
        ("currency:Senegal", "xaf", True),  # the other CFA franc
        ("currency:Senegal", "eur", False),
        ("subregion:Peru", "northern america", True),  # shares "america"
        ("subregion:Peru", "western europe", False),  # "and", "the" are no shared words
        ("subregion:Senegal", "northern africa", True),
        ("subregion:Senegal", "melanesia", False),
    ],
)
def test_near_miss_rule(key, wrong, near):
    fact = next(f for f in country_facts() if f.key == key)
    assert is_near_miss(fact, wrong) is near
