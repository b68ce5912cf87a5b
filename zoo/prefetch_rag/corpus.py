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
  (at most 4 tokens). 20% of the questions of a set use only short lead-ins (:attr:`Question.short`).
* Country split (R, split seed fixed, independent of the model seed): 30% test countries (held out, touched once);
  the 70% training countries are split into ``lm`` (the LM trains on them), ``heads`` (predictor and query head
  train on the LM's synchronous runs over them) and ``val`` (tuning). Heads and tuning use countries the LM never
  saw, so their slots are as uncertain as the test countries'.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from functools import lru_cache

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

# Lead-in pools (R). Long lead-ins never name the country ("its"), so the country comes from the intro or the switch.
# The training pools (24 long + 8 short per attribute) are wider than the held-out ones so that the predictor learns
# "a value is coming" rather than the templates: with 5 long + 2 short, the published predictor's AUROC on the
# validation questions (val lead-ins) was 0.735; with 12 + 4, 0.855 and 0.808 (seeds 0 and 1; 2026-12-04); with
# 24 + 8 (the last 12 + 4 added 2026-12-05) and the recipe's predictor_noise, 0.848 / 0.847 / 0.872 (seeds 0 1 2).
# The added sentences were written to differ in form from the val and test pools. The held-out pools were 2 long +
# 1 short per attribute until 2026-12-04, when a diagnostic crossing countries and lead-ins traced the
# validation-to-test drops (predictor AUROC 0.81 -> 0.74, sync_active EM 0.52 -> 0.40 on the test countries) to those
# few templates rather than to the countries: 8 long + 2 short new sentences per attribute (written together, then
# split between val and test by random.Random(2026)) make each 6 + 2, the earlier ones first. With the question-led
# text query the multi-domain headroom gate then failed on validation (sync_active's em_multi 0.201 vs single_shot's
# 0.1375, +6.4 of 10; +14.4 on the 2 + 1 pools): the easy validation templates had hidden it. Hyper.query_topic
# lifted it to +23.8 (2026-12-04).
LEAD_INS: dict[str, dict[str, tuple[str, ...]]] = {
    "capital": {
        "train": (
            "Turning to its government, the city that serves as its capital is",
            "When it comes to where the government sits, the national capital is",
            "As for the political centre of the nation, its capital city is",
            "Looking at the seat of its national government, the capital is",
            "If you ask where parliament and ministries meet, the capital is",
            "Ask a local schoolchild to name the capital and the answer is",
            "Most foreign embassies have their offices in the capital,",
            "The parliament building stands in the capital city,",
            "Its government ministries are all based in",
            "Maps mark the national capital with a star, and it is",
            "In most atlases the capital of the nation appears as",
            "The head of state lives and works in",
            "Foreign correspondents file their stories from the capital,",
            "Whoever wins the national election moves into an office in",
            "The country's main airport serves the capital city of",
            "Signs on the motorway point the way to the capital,",
            "The largest crowds on its national day gather in",
            "Every road distance in the country is measured from",
            "Trade delegations that come to sign deals head for",
            "According to its constitution, the seat of government is",
            "The ministers, judges and generals all work in",
            "A letter to its prime minister is addressed to",
            "Generations of its rulers have governed from",
            "Its central bank has its headquarters in the capital,",
        ),
        "train_short": (
            "Its capital is",
            "Capital city:",
            "Capital:",
            "Government seat:",
            "Capital city is",
            "Its capital:",
            "Seat:",
            "Main city:",
        ),
        "val": (
            "Speaking of the place where its leaders govern from, the capital is",
            "Regarding its main administrative city, the capital is",
            "Diplomats posted to the country spend most of their time in",
            "Its cabinet ministers meet every week in the capital,",
            "Its presidential palace overlooks the busy streets of the capital,",
            "Foreign ministers on an official visit usually land in the capital,",
        ),
        "val_short": (
            "The capital:",
            "Seat of power:",
        ),
        "test": (
            "On the question of which city hosts its government, the capital is",
            "Travellers heading to its centre of power arrive in the capital,",
            "The city printed on its stamps as the seat of power is",
            "Protesters who want to be heard by its government march through",
            "Asked for the city where its laws are passed, a guide would say",
            "The national museum and the supreme court both stand in its capital,",
        ),
        "test_short": (
            "Capital here:",
            "Ruling city:",
        ),
    },
    "currency": {
        "train": (
            "Turning to money, the currency that people use for everyday payments is",
            "When it comes to shopping, prices in its shops are written in",
            "As for its economy, the official currency code of the country is",
            "Looking at banknotes and coins, the money used there is",
            "If you want to pay for a meal there, you need",
            "Wages, rents and taxes there are all paid in",
            "The central bank prints notes in its own currency,",
            "A cup of coffee in a local cafe is priced in",
            "Its savings accounts and loans are kept in",
            "The money in a local wallet would be",
            "Every price tag in its markets shows the currency",
            "Its national budget is counted in",
            "Shoppers at its supermarkets hand over",
            "The coins that jingle in its pockets are",
            "Economists report its inflation rate for the",
            "A taxi ride across its biggest city costs a few units of",
            "Importers who buy goods abroad must first sell",
            "The money its government spends on schools is counted in",
            "Rent for a flat in its cities is paid monthly in",
            "Foreign investors buying its bonds are paid back in",
            "Its stock exchange quotes every share price in",
            "Salaries advertised in its newspapers are given in",
            "Banks there hold their customers' deposits in",
            "The official money of the country is",
        ),
        "train_short": (
            "Its currency is",
            "Currency:",
            "Currency is",
            "Paid in",
            "Currency used:",
            "Its money is",
            "Money:",
            "Cash:",
        ),
        "val": (
            "Speaking of payments and prices, the national currency is",
            "Regarding what its banks issue, the currency is",
            "The notes handed out by its cash machines are in",
            "The price of bread in its bakeries is marked in",
            "Tourists who budget for a week there plan their spending in",
            "Exchange booths at its borders sell the local currency,",
        ),
        "val_short": (
            "Money used:",
            "Legal tender:",
        ),
        "test": (
            "On the matter of what travellers exchange their cash into, the currency is",
            "Visitors who change money at the airport receive",
            "Its tax office collects every bill in",
            "Street vendors in its markets expect to be paid in",
            "Its public sector salaries arrive each month in",
            "Pension payments to its retirees are made in",
        ),
        "test_short": (
            "Its money:",
            "Local cash:",
        ),
    },
    "language": {
        "train": (
            "Turning to speech, the language that most people use at home is",
            "When it comes to schools, lessons are mostly taught in",
            "As for its culture, the main language spoken across the country is",
            "Looking at newspapers and radio, most of them use",
            "If you talk to people in the street, you will hear",
            "Children there learn to read and write first in",
            "Most television news there is broadcast in",
            "The laws of the country are written mainly in",
            "Families at the dinner table usually speak",
            "Its main language, heard in most homes, is",
            "Songs on its popular radio stations are mostly in",
            "Its parliament holds its debates in",
            "Teachers in its primary schools give lessons in",
            "The novels that its writers publish are mostly in",
            "Its television soap operas are filmed in",
            "A foreigner moving there for work should study",
            "Road signs across the country are written in",
            "Most of its people dream, joke and argue in",
            "The official language of the country is",
            "Its radio presenters speak to listeners in",
            "Instructions on its medicine packets are printed in",
            "Its courts hand down judgments written in",
            "Sermons in its churches and mosques are given in",
            "Students at its universities take exams in",
        ),
        "train_short": (
            "Its language is",
            "Language:",
            "Its tongue is",
            "Main language:",
            "Language spoken:",
            "Its language:",
            "Tongue:",
            "Speech:",
        ),
        "val": (
            "Speaking of words and conversation, the main language is",
            "Regarding what its people speak, the language is",
            "Its theatres stage most of their plays in",
            "Most books in its public libraries are printed in",
            "The language of its government websites is",
            "Court hearings in the country are held mainly in",
        ),
        "val_short": (
            "Spoken language:",
            "Mother tongue:",
        ),
        "test": (
            "On the topic of how its citizens talk to each other, the main language is",
            "Anyone reading its road signs and menus will see",
            "The first words its babies learn are usually in",
            "Doctors in its hospitals talk to patients mostly in",
            "Its national anthem is sung in",
            "Visitors who want to order food there should learn some",
        ),
        "test_short": (
            "People speak",
            "Local speech:",
        ),
    },
    "calling_code": {
        "train": (
            "Turning to telephones, the international code to dial before a number is",
            "When it comes to phone calls from abroad, callers must first dial",
            "As for its telecommunications, the country calling code is",
            "Looking at phone numbers written for foreigners, they start with",
            "If you want to call a friend there from abroad, you dial",
            "Its international telephone prefix is",
            "Business cards printed for foreign clients show the code",
            "To reach a mobile there from another country, first enter",
            "Its country code for telephone calls is",
            "Before the local number, an international caller adds",
            "The telephone code assigned to the country is",
            "Phone directories list its international code as",
            "Callers abroad who want to reach its capital dial",
            "Its mobile operators register numbers under the code",
            "Every telephone number in the country, dialled from abroad, starts with",
            "The international dialling code of the country is",
            "A tourist calling home from a hotel there first sees the code",
            "Switchboards around the world connect to it through the code",
            "Numbers on its official websites carry the prefix",
            "Its emergency hotlines, reached from abroad, begin with",
            "The code that routes a call to the country is",
            "Companies there print their phone numbers after the code",
            "Text messages sent to it from abroad need the prefix",
            "Telecom engineers know the country by its dialling code,",
        ),
        "train_short": (
            "Its calling code is",
            "Dialling code:",
            "Calling code:",
            "Its dial code:",
            "Phone prefix:",
            "Dial code:",
            "Its code is",
            "Prefix:",
        ),
        "val": (
            "Speaking of international calls, the dialling prefix is",
            "Regarding its phone numbers, the calling code is",
            "On its international calling cards, the prefix printed first is",
            "Its embassy lists every office number starting with",
            "Relatives calling home from overseas first press",
            "Hotel bookings made by phone from abroad begin with",
        ),
        "val_short": (
            "Phone code:",
            "Its prefix:",
        ),
        "test": (
            "On the subject of reaching its hotels by phone from overseas, the prefix is",
            "Someone ringing its offices from another country keys in",
            "Its telephone operators tell foreign callers to begin with",
            "The digits that open every one of its international numbers are",
            "A caller in another country trying to reach its hospitals first dials",
            "Fax numbers of its ministries, written for abroad, begin with",
        ),
        "test_short": (
            "Code here:",
            "Dial prefix:",
        ),
    },
    "demonym": {
        "train": (
            "Turning to its people, a person born and raised in the country is called",
            "When it comes to nationality, the word used for its citizens is",
            "As for how residents describe themselves, they say they are",
            "Looking at passports, the nationality written for its people is",
            "If you meet someone from there, you would call them",
            "Its national football team is cheered on by fans who call themselves",
            "A citizen of the country is known as",
            "Newspapers abroad describe its people as",
            "Its athletes at the games are described as",
            "People who hold its passport are",
            "Its citizens, at home and abroad, are called",
            "Newcomers who settle there for good eventually become",
            "Athletes who represent it at the world championships are",
            "Its writers and poets are known abroad as",
            "Scholars studying its history describe its people as",
            "Migrants who come from the country are",
            "Its sailors and fishermen are",
            "Tourists from the country are recognised abroad as",
            "Its chefs, famous in many cities, are",
            "The inhabitants of the country are known as",
            "Its doctors and nurses working overseas are",
            "Musicians from its villages and towns are",
            "On official forms, its citizens write that they are",
            "Soldiers who fought in its wars were",
        ),
        "train_short": (
            "Its people are",
            "Demonym:",
            "Nationality:",
            "Its citizens are",
            "Its people:",
            "People are",
            "Citizens:",
            "Natives are",
        ),
        "val": (
            "Speaking of its citizens, the word for a local person is",
            "Regarding what its residents are called, they are",
            "Ask its residents where they are from and they say they are",
            "Scientists from the country are introduced at conferences as",
            "A family that has lived there for generations is",
            "The faces on its bank notes are all",
        ),
        "val_short": (
            "Locals are",
            "Its nationals:",
        ),
        "test": (
            "On the question of what name its inhabitants go by, they are",
            "A traveller chatting with its residents would describe them as",
            "Children born to its citizens are",
            "Soldiers serving in its army are",
            "Every member of its national parliament is",
            "Its emigrants living overseas still call themselves",
        ),
        "test_short": (
            "Its folk are",
            "Inhabitants:",
        ),
    },
}
INTRO = "Here is what I know about {c}."
SWITCH = "Next, consider {c}."
QUESTION = "Tell me about {c}."
QUESTION_MULTI = "Tell me about {c}, then {c2}."
POOLS = ("train", "val", "test")


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
