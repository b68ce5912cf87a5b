"""The LightningModule and its datamodule: bad inputs, the counts file, the float16 round trip, the adapter."""

import numpy as np
import pytest
import torch

from zoo._serialization import load_folder, save_pretrained
from zoo.sae_transition_ood.data import SAEOODDataModule
from zoo.sae_transition_ood.domains import check_domain, chunk_ids
from zoo.sae_transition_ood.module import SAETransitionOODModule


def _small(**kwargs):
    return SAETransitionOODModule(**{"features": 32, "k_sae": 6, "top_k": 3, "num_layers": 3, "width": 8, **kwargs})


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"id_domain": "news"}, "unknown domain 'news'"),
        ({"top_k": 7}, "top-K = 7 must be in"),
        ({"alpha": 0.0}, "alpha must be"),
        ({"alpha": -0.5}, "alpha must be"),
        ({"num_layers": 1}, "at least 2 hidden states"),
    ],
)
def test_bad_arguments_raise(kwargs, message):
    with pytest.raises(ValueError, match=message):
        _small(**kwargs)


def test_bad_datamodule_arguments_raise():
    with pytest.raises(ValueError, match="unknown domain 'pyref'"):
        SAEOODDataModule(id_domain="pyref")  # a test-only domain is never an ID setting
    with pytest.raises(ValueError, match="val_ood must differ"):
        SAEOODDataModule(id_domain="countries", val_ood="countries")
    with pytest.raises(ValueError, match="unknown domain"):
        check_domain("20newsgroups")


@pytest.mark.parametrize("shape", [(5, 4, 8), (5, 3, 9)])
def test_hidden_states_of_the_wrong_shape_raise(shape):
    module = _small()
    with pytest.raises(ValueError, match="3 layers of width 8"):
        module(torch.randn(*shape))
    with pytest.raises(ValueError, match="3 layers of width 8"):
        module.score_states([np.zeros((shape[1], 5, shape[2]), dtype=np.float32)])


def test_text_without_tokens_raises():
    module = SAETransitionOODModule()
    with pytest.raises(ValueError, match="no tokens left"):
        module.score_texts(["fine text", "[CLS] [SEP]"])
    with pytest.raises(TypeError, match="list of texts"):
        module.score_texts("one string")


@pytest.mark.parametrize("tied", [False, True])
def test_counts_and_stored_weights_round_trip(tmp_path, tied):
    module = _small(tied=tied)
    rng = np.random.default_rng(0)
    module.fit_transitions(rng.normal(size=(200, 3, 8)).astype(np.float32))
    assert module.counts.sum() == 200 * 2 * 3 * 3  # tokens x transitions x K x K
    before = module(module.example_input_array)
    save_pretrained(module, tmp_path)
    reloaded = load_folder(tmp_path)
    np.testing.assert_array_equal(reloaded.counts, module.counts)
    assert torch.equal(reloaded.saes.dictionary, module.saes.dictionary)
    if not tied:  # untied: encoder and decoder stored as int8 rows + scales; tied: the dictionary as float16
        assert torch.equal(reloaded.saes.decoder, module.saes.decoder)
    after = reloaded(module.example_input_array)
    assert torch.equal(before["nll"], after["nll"]) and torch.equal(before["reconstruction"], after["reconstruction"])
    # counts are additive: absorbing the same data again doubles them
    module.fit_transitions(rng.normal(size=(200, 3, 8)).astype(np.float32), reset=False)
    assert module.counts.sum() == 2 * 200 * 2 * 3 * 3


def test_chunks_are_32_to_64_tokens():
    pieces = chunk_ids(list(range(1000)), np.random.default_rng(0))
    assert all(32 <= len(p) <= 64 for p in pieces)
    assert [t for p in pieces for t in p] == list(range(sum(len(p) for p in pieces)))  # consecutive, no overlap
