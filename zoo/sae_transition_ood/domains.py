"""The six offline text domains of the SAE-transition OOD benchmark, as 32-64 word-piece chunks.

Each domain is a list of documents ``(sub_label, text)``; documents are split into train / validation / test
by document (never by chunk, so no document crosses splits), then tokenised with MiniLM's word-piece
tokenizer and cut into consecutive chunks of 32-64 tokens (length drawn per chunk with a fixed seed). The
chunks keep their token ids (no re-tokenisation drift) and their decoded text.

* ``docstrings``: ``__doc__`` of public functions, classes and methods of the Python standard library modules
  importable here (``len > 80``); sub-label = top-level module.
* ``pyref``: ``pydoc_data.topics.topics`` (the Python language reference topics); sub-label = topic.
* ``countries``: templated sentences from ``countryinfo`` (capital, area, population, borders, provinces,
  languages, currencies, time zones); sub-label = region.
* ``wikipedia``: gensim's test Wikipedia articles (:func:`zoo.common.text.wikipedia_articles`); sub-label = title.
* ``lee``: the Lee background news corpus (:func:`zoo.common.text.lee_corpus`); sub-label = document.
* ``wordnet``: WordNet 3.0 synset glosses (:func:`zoo.common.wordnet.wordnet`), consecutive glosses of one
  lexicographer file joined; sub-label = lexicographer file. Validation OOD only, never a test domain.
"""

from __future__ import annotations

import hashlib
import importlib
import inspect
import sys
import warnings
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

DOMAINS = ("docstrings", "pyref", "countries", "wikipedia", "lee", "wordnet")
ID_DOMAINS = ("docstrings", "countries", "wikipedia")
VALIDATION_OOD = "wordnet"
TEST_DOMAINS = ("docstrings", "pyref", "countries", "wikipedia", "lee")
ONLY_SPLIT = {"pyref": "test", "lee": "test", "wordnet": "validation"}
NEAR_PAIRS = (("docstrings", "pyref"), ("wikipedia", "lee"))
SPLIT_FRACTIONS = {"train": 0.57, "validation": 0.14, "test": 0.29}
SIZES = {"train": 2000, "validation": 500, "test": 1000}
MIN_TOKENS, MAX_TOKENS = 32, 64
_SKIP_MODULES = ("antigravity", "this", "idlelib", "tkinter", "turtle", "turtledemo", "test", "lib2to3", "pydoc_data")


def check_domain(name: str, allowed: tuple[str, ...] = DOMAINS) -> str:
    """Return ``name`` if it is one of ``allowed``, else raise a ValueError naming them."""
    if name not in allowed:
        raise ValueError(f"unknown domain {name!r}; expected one of {', '.join(allowed)}")
    return name


# ------------------------------------------------------------------------------------------- documents


def _stdlib_docstrings() -> list[tuple[str, str]]:
    docs, seen = [], set()
    names = sorted(n for n in sys.stdlib_module_names if not n.startswith("_") and n not in _SKIP_MODULES)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for name in names:
            try:
                module = importlib.import_module(name)
            except Exception:  # platform modules (winreg, msvcrt, ...) and ones needing a display
                continue
            for attr, obj in sorted(vars(module).items()):
                if attr.startswith("_") or str(getattr(obj, "__module__", None) or name).split(".")[0] != name:
                    continue
                members = [obj]
                if inspect.isclass(obj):
                    members += [m for a, m in sorted(vars(obj).items()) if not a.startswith("_") and callable(m)]
                for member in members:
                    doc = getattr(member, "__doc__", None)
                    if isinstance(doc, str) and len(doc) > 80 and doc not in seen:
                        seen.add(doc)
                        docs.append((name, inspect.cleandoc(doc)))
    return docs


def _pyref_topics() -> list[tuple[str, str]]:
    from pydoc_data.topics import topics

    return [(name, topics[name]) for name in sorted(topics)]


def _country_facts() -> list[tuple[str, str]]:
    from countryinfo import all_countries

    infos = sorted((country.info() for country in all_countries()), key=lambda info: str(info.get("name")))
    by_code = {str((info.get("ISO") or {}).get("alpha3")): info.get("name") for info in infos}
    languages = {"en": "English", "fr": "French", "es": "Spanish", "de": "German", "it": "Italian", "ja": "Japanese"}
    docs = []
    for info in infos:
        name = info.get("name") or "This country"
        facts = []
        if info.get("capital"):
            facts.append(f"The capital of {name} is {info['capital']}.")
            facts.append(f"{info['capital']} is the capital city of {name}.")
        if info.get("region"):
            sub = f", in {info['subregion']}" if info.get("subregion") else ""
            facts.append(f"{name} lies in {info['region']}{sub}.")
        if info.get("latlng") and len(info["latlng"]) == 2:
            lat, lng = info["latlng"]
            facts.append(f"{name} is centred near latitude {lat} and longitude {lng}.")
        if info.get("area"):
            facts.append(f"{name} covers an area of {int(float(info['area'])):,} square kilometres.")
        if info.get("population"):
            facts.append(f"About {int(info['population']):,} people live in {name}.")
            if info.get("area") and float(info["area"]) > 0:
                density = int(info["population"]) / float(info["area"])
                facts.append(f"The population density of {name} is about {density:.0f} people per square kilometre.")
        if info.get("demonym"):
            facts.append(f"People from {name} are called {info['demonym']}.")
        for code in info.get("languages") or []:
            facts.append(f"The language with code {code} is spoken in {name}.")
        for currency in info.get("currencies") or []:
            facts.append(f"The currency {currency} is used in {name}.")
        for border in info.get("borders") or []:
            facts.append(f"{name} shares a border with {by_code.get(border, border)}.")
        for zone in info.get("timezones") or []:
            facts.append(f"Part of {name} uses the time zone {zone}.")
        for zone in info.get("timezoneNames") or []:
            facts.append(f"{zone} is a time zone of {name}.")
        if info.get("callingCodes"):
            facts.append(f"The calling code of {name} is +{', +'.join(info['callingCodes'])}.")
        if info.get("tld"):
            facts.append(f"Web addresses in {name} end in {', '.join(info['tld'])}.")
        iso = info.get("ISO") or {}
        if iso.get("alpha2") and iso.get("alpha3"):
            facts.append(f"The ISO codes of {name} are {iso['alpha2']} and {iso['alpha3']}.")
        if info.get("nativeName"):
            facts.append(f"In its own language {name} is called {info['nativeName']}.")
        for spelling in info.get("altSpellings") or []:
            facts.append(f"{name} is also known as {spelling}.")
        for code, translated in sorted((info.get("translations") or {}).items()):
            if code in languages and translated:
                facts.append(f"In {languages[code]}, {name} is called {translated}.")
        for province in info.get("provinces") or []:
            facts.append(f"{province} is a province of {name}.")
        docs.append((info.get("region") or "other", " ".join(facts)))
    return docs


def _wikipedia() -> list[tuple[str, str]]:
    from zoo.common.text import wikipedia_articles

    return [(article.title, article.text) for article in wikipedia_articles()]


def _lee() -> list[tuple[str, str]]:
    from zoo.common.text import lee_corpus

    return [(f"lee{i}", text) for i, text in enumerate(lee_corpus())]


def _wordnet_glosses() -> list[tuple[str, str]]:
    from zoo.common.wordnet import wordnet

    groups: dict[str, list[str]] = {}
    for synset in wordnet().all_synsets():
        groups.setdefault(synset.lexname(), []).append(synset.definition() + ".")
    docs = []
    for lexname in sorted(groups):  # documents of 40 consecutive glosses, so chunks hold whole glosses
        glosses = groups[lexname]
        docs += [(lexname, " ".join(glosses[i : i + 40])) for i in range(0, len(glosses), 40)]
    return docs


_SOURCES = {
    "docstrings": _stdlib_docstrings,
    "pyref": _pyref_topics,
    "countries": _country_facts,
    "wikipedia": _wikipedia,
    "lee": _lee,
    "wordnet": _wordnet_glosses,
}


@lru_cache(maxsize=8)
def documents(domain: str) -> tuple[tuple[str, str], ...]:
    """The domain's documents ``(sub_label, text)`` in a fixed order."""
    return tuple(_SOURCES[check_domain(domain)]())


# ---------------------------------------------------------------------------------------------- chunks


@dataclass(frozen=True)
class Chunk:
    """A 32-64 token piece of one document: word-piece ids (no specials), its text, its sub-label."""

    ids: tuple[int, ...]
    text: str
    label: str


def _document_split(domain: str, label: str, text: str) -> str:
    """Deterministic split of a document by a hash of its text (stable across runs and machines).

    Domains that are only ever OOD need no training texts: ``pyref`` and ``lee`` go wholly to test, ``wordnet``
    wholly to validation.
    """
    if domain in ONLY_SPLIT:
        return ONLY_SPLIT[domain]
    value = int(hashlib.sha256(f"{label}\n{text}".encode()).hexdigest()[:8], 16) / 0xFFFFFFFF
    if value < SPLIT_FRACTIONS["train"]:
        return "train"
    return "validation" if value < SPLIT_FRACTIONS["train"] + SPLIT_FRACTIONS["validation"] else "test"


def chunk_ids(ids: list[int], rng: np.random.Generator) -> list[list[int]]:
    """Consecutive pieces of ``ids`` with lengths drawn from [32, 64]; a tail under 32 tokens is dropped."""
    pieces, start = [], 0
    while len(ids) - start >= MIN_TOKENS:
        length = int(rng.integers(MIN_TOKENS, MAX_TOKENS + 1))
        pieces.append(ids[start : start + length])
        start += length
    return pieces


@lru_cache(maxsize=32)
def chunks(domain: str, split: str, limit: int | None = None) -> tuple[Chunk, ...]:
    """The domain's chunks of one split, shuffled with a fixed seed, at most ``limit`` (default: the spec's size).

    Args:
        domain: One of :data:`DOMAINS`.
        split: ``train``, ``validation`` or ``test``.
        limit: Keep this many (default ``SIZES[split]``); fewer when the domain has fewer.
    """
    from zoo.sae_transition_ood.hidden import tokenizer

    check_domain(domain)
    if split not in SIZES:
        raise ValueError(f"unknown split {split!r}; expected train, validation or test")
    tok = tokenizer()
    rng = np.random.default_rng(int(hashlib.sha256(f"{domain}/{split}".encode()).hexdigest()[:8], 16))
    pieces: list[Chunk] = []
    for label, text in documents(domain):
        if _document_split(domain, label, text) != split:
            continue
        ids = tok(text, add_special_tokens=False, verbose=False)["input_ids"]
        for piece in chunk_ids(ids, rng):
            pieces.append(Chunk(tuple(piece), tok.decode(piece), label))
    order = rng.permutation(len(pieces))
    wanted = SIZES[split] if limit is None else limit
    return tuple(pieces[i] for i in order[:wanted])
