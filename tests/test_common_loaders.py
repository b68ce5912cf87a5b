"""The shared offline loaders in zoo.common: WordNet (Debian files via nltk), EfficientNet-Lite0, MiniLM."""

import numpy as np
import pytest
import torch

from zoo.common import efficientnet, wordnet


def test_wordnet_reads_the_debian_database_with_lexnames(tmp_path, monkeypatch):
    pytest.importorskip("nltk")
    monkeypatch.setenv("ZOO_CACHE_DIR", str(tmp_path))
    wordnet.wordnet.cache_clear()
    try:
        wn = wordnet.wordnet()
        parka = wn.synset("parka.n.01")
        assert parka.lexname() == "noun.artifact"  # needs the lexnames file Debian does not ship
        assert "jacket" in parka.definition()
        assert wn.synset("happy.a.01").pos() == "a"
        lexnames = tmp_path / "nltk_data" / "corpora" / "wordnet" / "lexnames"  # under $ZOO_CACHE_DIR/nltk_data
        assert lexnames.read_text().splitlines()[3] == "03\tnoun.Tops\t1"
    finally:
        wordnet.wordnet.cache_clear()


def test_wordnet_missing_database_says_how_to_install(tmp_path):
    with pytest.raises(Exception, match="apt-get install wordnet-base"):
        wordnet.prepare(source=tmp_path / "nowhere", target=tmp_path / "nltk")


def test_efficientnet_preprocess_layouts_and_range():
    gray = np.full((2, 28, 28), 255, dtype=np.uint8)
    hwc = np.ones((2, 28, 28, 3), dtype=np.float32)
    chw = torch.ones(2, 3, 28, 28)
    for images in (gray, hwc, chw):
        x = efficientnet.preprocess(images, size=32)
        assert x.shape == (2, 3, 32, 32)
        torch.testing.assert_close(x, torch.full_like(x, (1 - efficientnet.MEAN) / efficientnet.STD))
    with pytest.raises(ValueError, match="must lie in \\[0, 1\\]"):
        efficientnet.preprocess(hwc * 255)
    with pytest.raises(ValueError, match="expected images"):
        efficientnet.preprocess(np.zeros((28, 28)))


def test_efficientnet_features_are_pretrained_and_deterministic():
    pytest.importorskip("efficientnet_lite_pytorch")
    rng = np.random.default_rng(0)
    images = rng.integers(0, 256, size=(4, 40, 40, 3), dtype=np.uint8)
    first = efficientnet.features(images, size=64, batch_size=3)
    assert first.shape == (4, efficientnet.FEATURE_DIM) and first.dtype == np.float32
    np.testing.assert_allclose(first, efficientnet.features(images, size=64), rtol=1e-4, atol=1e-5)
    random_features = efficientnet.features(images, size=64, model=efficientnet.random_efficientnet_lite0(seed=0))
    assert not np.allclose(first, random_features, atol=1e-3)  # the pretrained weights were loaded


def test_minilm_embeddings_are_unit_norm_and_semantic():
    pytest.importorskip("sentence_transformers")
    from zoo.common.minilm import embed

    vectors = embed(["a warm winter coat", "a heavy jacket for cold weather", "the stock market fell"])
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    assert vectors[0] @ vectors[1] > vectors[0] @ vectors[2] + 0.2
