"""WordNet 3.0 offline: the Debian package ``wordnet-base`` (plus ``wordnet-sense-index``) read through nltk.

Debian ships the WordNet database in ``/usr/share/wordnet`` (installed by ``tools/bootstrap.sh`` from
``debian-packages.txt``) but not the ``lexnames`` file nltk needs, and nltk looks for
``corpora/wordnet`` under ``NLTK_DATA``. :func:`wordnet` copies the Debian files into a private nltk
data folder (``zoo._paths.cache_dir("nltk_data")``, i.e. ``$ZOO_CACHE_DIR/nltk_data``; about 30 MB), writes
``lexnames`` there, and returns nltk's ``wordnet`` reader. Nothing is downloaded. Papers 7 (negative
labels), 12 (class glosses) and 18 (a text domain of synset definitions) share it.
"""

from __future__ import annotations

import os
import shutil
import warnings
from functools import lru_cache
from pathlib import Path

from zoo._errors import MissingExtraError, ZooError

DEBIAN_WORDNET = Path("/usr/share/wordnet")

# The 45 lexicographer files of WordNet 3.0, in their numeric order (lexnames(5WN)).
LEXNAMES = (
    "adj.all", "adj.pert", "adv.all", "noun.Tops", "noun.act", "noun.animal", "noun.artifact",
    "noun.attribute", "noun.body", "noun.cognition", "noun.communication", "noun.event", "noun.feeling",
    "noun.food", "noun.group", "noun.location", "noun.motive", "noun.object", "noun.person",
    "noun.phenomenon", "noun.plant", "noun.possession", "noun.process", "noun.quantity", "noun.relation",
    "noun.shape", "noun.state", "noun.substance", "noun.time", "verb.body", "verb.change",
    "verb.cognition", "verb.communication", "verb.competition", "verb.consumption", "verb.contact",
    "verb.creation", "verb.emotion", "verb.motion", "verb.perception", "verb.possession", "verb.social",
    "verb.stative", "verb.weather", "adj.ppl",
)  # fmt: skip

_POS_NUMBER = {"noun": 1, "verb": 2, "adj": 3, "adv": 4}
_FILES = (
    [f"{kind}.{pos}" for kind in ("data", "index") for pos in ("noun", "verb", "adj", "adv")]
    + [f"{pos}.exc" for pos in ("noun", "verb", "adj", "adv")]
    + ["index.sense"]
)  # from Debian wordnet-sense-index; nltk reads it when it opens WordNet


def nltk_data_dir() -> Path:
    """The nltk data folder the zoo manages: ``zoo._paths.cache_dir("nltk_data")`` (``$ZOO_CACHE_DIR/nltk_data``)."""
    from zoo._paths import cache_dir

    return cache_dir("nltk_data")


def prepare(source: Path = DEBIAN_WORDNET, target: Path | None = None) -> Path:
    """Lay the Debian WordNet files out as nltk's ``corpora/wordnet`` and return that nltk data folder.

    Args:
        source: The Debian ``wordnet-base`` database folder.
        target: nltk data folder to fill; :func:`nltk_data_dir` by default.
    """
    missing = [name for name in _FILES if not (source / name).is_file()]
    if missing:
        raise ZooError(
            f"WordNet is not installed at {source} (missing {', '.join(missing[:3])}...): "
            "run tools/bootstrap.sh --debian-only as root, or sudo apt-get install wordnet-base wordnet-sense-index"
        )
    target = nltk_data_dir() if target is None else Path(target)
    corpus = target / "corpora" / "wordnet"
    corpus.mkdir(parents=True, exist_ok=True)
    for name in _FILES:  # copied, not linked: nltk refuses files that resolve outside its data folder
        copy = corpus / name
        if not copy.exists() or copy.stat().st_size != (source / name).stat().st_size:
            tmp = copy.with_suffix(f".tmp{os.getpid()}")
            shutil.copyfile(source / name, tmp)
            tmp.replace(copy)
    lexnames = corpus / "lexnames"
    if not lexnames.exists():
        tmp = lexnames.with_suffix(f".tmp{os.getpid()}")
        tmp.write_text(
            "".join(f"{i:02d}\t{name}\t{_POS_NUMBER[name.split('.')[0]]}\n" for i, name in enumerate(LEXNAMES))
        )
        tmp.replace(lexnames)  # atomic: concurrent processes never read half a file
    return target


@lru_cache(maxsize=1)
def wordnet():
    """nltk's WordNet 3.0 reader over the Debian files, loaded once per process."""
    try:
        import nltk
        from nltk.corpus.reader.wordnet import WordNetCorpusReader
    except ImportError:
        raise MissingExtraError("WordNet is read through nltk: pip install 'icml26-zoo[nlp]'") from None
    data_dir = prepare()
    if str(data_dir) not in nltk.data.path:  # nltk only reads corpora below its data path
        nltk.data.path.insert(0, str(data_dir))
    with warnings.catch_warnings():  # "multilingual functions are not available": no Open Multilingual Wordnet
        warnings.simplefilter("ignore", UserWarning)
        return WordNetCorpusReader(str(data_dir / "corpora" / "wordnet"), None)
