"""Country facts of the ``countryinfo`` package: the one reader of the papers that build text from them.

aporia's SOCRATES-mini (facts, question and answer templates, labelling) and prefetch_rag's knowledge base (fact
documents about five of the attributes) read the same facts in the same fixed order through :func:`country_facts`.
A *fact* is (country, attribute, value) with every folded answer string that counts as correct (:func:`fold_answer`:
case, diacritics, whitespace, leading "the" and punctuation other than ``+`` folded).
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass, field
from functools import lru_cache

ATTRIBUTES = ("capital", "region", "subregion", "demonym", "currency", "calling_code", "border", "language")

#: ISO 639-1 (and a few other) codes used by countryinfo, to English language names.
LANGUAGE_NAMES = {
    "English": "English", "af": "Afrikaans", "am": "Amharic", "ar": "Arabic", "az": "Azerbaijani",
    "be": "Belarusian", "bg": "Bulgarian", "bi": "Bislama", "bn": "Bengali", "bs": "Bosnian", "ca": "Catalan",
    "cnr": "Montenegrin", "cs": "Czech", "da": "Danish", "de": "German", "dv": "Dhivehi", "dz": "Dzongkha",
    "el": "Greek", "en": "English", "es": "Spanish", "et": "Estonian", "fa": "Persian", "fi": "Finnish",
    "fo": "Faroese", "fr": "French", "ga": "Irish", "he": "Hebrew", "hi": "Hindi", "hr": "Croatian",
    "hu": "Hungarian", "hy": "Armenian", "id": "Indonesian", "is": "Icelandic", "it": "Italian", "ja": "Japanese",
    "ka": "Georgian", "kk": "Kazakh", "kl": "Greenlandic", "km": "Khmer", "ko": "Korean", "ky": "Kyrgyz",
    "la": "Latin", "lo": "Lao", "lt": "Lithuanian", "lv": "Latvian", "mk": "Macedonian", "mn": "Mongolian",
    "ms": "Malay", "mt": "Maltese", "my": "Burmese", "ne": "Nepali", "nl": "Dutch", "no": "Norwegian",
    "pl": "Polish", "ps": "Pashto", "pt": "Portuguese", "ro": "Romanian", "rs": "Serbian", "ru": "Russian",
    "rw": "Kinyarwanda", "si": "Sinhala", "sk": "Slovak", "sl": "Slovenian", "sm": "Samoan", "so": "Somali",
    "sq": "Albanian", "sr": "Serbian", "sv": "Swedish", "sw": "Swahili", "tg": "Tajik", "th": "Thai",
    "ti": "Tigrinya", "tk": "Turkmen", "tr": "Turkish", "uk": "Ukrainian", "uz": "Uzbek", "vi": "Vietnamese",
    "zh": "Chinese",
}  # fmt: skip


@dataclass(frozen=True)
class Fact:
    """One atomic fact.

    Args:
        country: Country name as countryinfo spells it.
        attribute: One of :data:`ATTRIBUTES`.
        value: The answer the corpus teaches.
        accepted: Every folded answer string that counts as correct (value, aliases, other true values).
    """

    country: str
    attribute: str
    value: str
    accepted: frozenset[str] = field(default_factory=frozenset)

    @property
    def key(self) -> str:
        """A stable identifier ``attribute:country``."""
        return f"{self.attribute}:{self.country}"


def fold(text: str) -> str:
    """Case-, diacritic- and whitespace-folded text, trailing punctuation dropped."""
    text = unicodedata.normalize("NFKD", text)
    text = "".join(ch for ch in text if not unicodedata.combining(ch))
    text = re.sub(r"\s+", " ", text.casefold()).strip()
    return text.rstrip(" .!?;,")


def fold_answer(text: str) -> str:
    """A folded answer string: :func:`fold`, leading "the" and punctuation other than ``+`` removed."""
    text = fold(text)
    text = re.sub(r"[^\w+ ]+", " ", text)
    text = re.sub(r"^the ", "", re.sub(r"\s+", " ", text).strip())
    return text.strip()


@lru_cache(maxsize=1)
def country_facts() -> tuple[Fact, ...]:
    """All facts of the 256 countries in ``countryinfo``, in a fixed order (about 1.9 k facts)."""
    from countryinfo import all_countries

    infos = [country.info() for country in all_countries()]
    by_alpha3 = {info.get("ISO", {}).get("alpha3"): info for info in infos}

    def names_of(info: dict) -> set[str]:
        spellings = [s for s in info.get("altSpellings") or [] if len(s.strip()) > 3]
        return {fold_answer(s) for s in [info["name"], *spellings]}

    facts = []
    for info in infos:
        country = info["name"]
        values: dict[str, tuple[str, set[str]]] = {}
        for attribute in ("capital", "region", "subregion", "demonym"):
            value = info.get(attribute)
            value = value[0] if isinstance(value, list) and value else value  # one capital is a list
            if isinstance(value, str) and value:
                values[attribute] = (value, {fold_answer(value)})
        if info.get("currencies"):
            values["currency"] = (info["currencies"][0], {fold_answer(info["currencies"][0])})
        codes = [c for c in info.get("callingCodes") or [] if c]
        if codes:
            values["calling_code"] = (f"+{codes[0]}", {fold_answer(f"+{codes[0]}")})
        neighbours = [by_alpha3[b] for b in info.get("borders") or [] if b in by_alpha3]
        if neighbours:
            accepted = set().union(*(names_of(n) for n in neighbours))
            values["border"] = (neighbours[0]["name"], accepted)
        languages = [code for code in info.get("languages") or [] if code in LANGUAGE_NAMES]
        if languages:
            name = LANGUAGE_NAMES[languages[0]]
            values["language"] = (name, {fold_answer(name)})
        for attribute in ATTRIBUTES:
            if attribute in values:
                value, accepted = values[attribute]
                facts.append(Fact(country, attribute, value, frozenset(accepted)))
    return tuple(facts)
