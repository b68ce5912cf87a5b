"""Spike labels, faiss against brute force, and the one-line errors on bad input."""

import numpy as np
import pytest

from zoo.prefetch_rag.clock import ClockConstants
from zoo.prefetch_rag.decoder import Hyper
from zoo.prefetch_rag.heads import check_query, combine, drift, spike_labels


def test_spike_labels_shift_with_k():
    spikes = [False] * 10
    spikes[6] = True
    # positions t with the spike in (t, t + k]
    assert np.flatnonzero(spike_labels(spikes, 1)).tolist() == [5]
    assert np.flatnonzero(spike_labels(spikes, 3)).tolist() == [3, 4, 5]
    assert np.flatnonzero(spike_labels(spikes, 12)).tolist() == [0, 1, 2, 3, 4, 5]
    two = [False] * 12
    two[4] = two[11] = True
    assert np.flatnonzero(spike_labels(two, 2)).tolist() == [2, 3, 9, 10]
    assert not spike_labels(spikes, 3)[6]  # the spike position itself looks ahead


def test_faiss_topk_equals_brute_force():
    pytest.importorskip("faiss")
    from zoo.prefetch_rag.index import Retriever

    rng = np.random.default_rng(0)
    docs = rng.standard_normal((500, 384)).astype(np.float32)
    docs /= np.linalg.norm(docs, axis=1, keepdims=True)
    retriever = Retriever([f"d{i}" for i in range(500)], docs)
    for _ in range(5):
        q = rng.standard_normal(384).astype(np.float32)
        q /= np.linalg.norm(q)
        ids, scores = retriever.search(q, 8)
        brute = np.argsort(-(docs @ q))[:8]
        assert ids.tolist() == brute.tolist()
        np.testing.assert_allclose(scores, (docs @ q)[brute], rtol=1e-5)
    assert retriever.rerank(brute, docs[brute[5]], 1) == [int(brute[5])]


def test_query_mixing_and_drift():
    a = np.zeros(384, np.float32)
    a[0] = 1
    b = np.zeros(384, np.float32)
    b[1] = 1
    q = combine(a, b, 0.5)
    np.testing.assert_allclose(q[:2], [2**-0.5, 2**-0.5], rtol=1e-6)
    assert drift(a, a) == pytest.approx(0.0)
    assert drift(a, b) == pytest.approx(1.0)
    assert drift(a, q) == pytest.approx(1 - 2**-0.5)


@pytest.mark.parametrize(
    ("make", "name"),
    [
        (lambda: Hyper(tau=1.5), "tau"),
        (lambda: Hyper(tau=-0.1), "tau"),
        (lambda: Hyper(rho=2.0), "rho"),
        (lambda: Hyper(k=0), "k"),
        (lambda: Hyper(w=-1), "w"),
        (lambda: Hyper(keep_blocks=0), "keep_blocks"),
        (lambda: Hyper(max_slot_tokens=0), "max_slot_tokens"),
        (lambda: ClockConstants(decode_ms=-1), "decode_ms"),
        (lambda: ClockConstants(retrieval_ms=-300), "retrieval_ms"),
        (lambda: ClockConstants(prefill_ms=-0.5), "prefill_ms"),
        (lambda: check_query(np.zeros(128)), "query"),
        (lambda: spike_labels([True], 0), "k"),
    ],
)
def test_bad_input_names_the_argument(make, name):
    with pytest.raises(ValueError) as error:
        make()
    message = str(error.value)
    assert message.startswith(name) and "\n" not in message


def test_empty_knowledge_base_is_refused():
    pytest.importorskip("faiss")
    from zoo.prefetch_rag.index import Retriever

    with pytest.raises(ValueError, match="knowledge base is empty"):
        Retriever([], np.zeros((0, 384), np.float32))


def test_counterfactual_training_sequences_copy_from_their_documents():
    pytest.importorskip("countryinfo")
    import random
    import re

    from zoo.common.text import train_bpe
    from zoo.prefetch_rag import corpus as C
    from zoo.prefetch_rag.lead_ins import LEAD_INS
    from zoo.prefetch_rag.lm import Tokens, training_sequence

    lead_ins = [t for pools in LEAD_INS.values() for lead in pools.values() for t in lead] * 5
    texts = [text for _, _, text in C.fact_documents()] + lead_ins + [C.INTRO, C.SWITCH, C.QUESTION] * 50
    tokens = Tokens(train_bpe(texts, vocab_size=2000))
    patterns = [re.compile(re.escape(t).replace(r"\{c\}", "(.+?)").replace(r"\{v\}", "(.+?)") + "$")
                for t in C.DOC_TEMPLATES.values()]  # fmt: skip
    rng = random.Random(0)
    with_docs = true_values = 0
    for _ in range(60):
        ids, labels = training_sequence(tokens, rng, C.country_split()["lm"], ("A distractor text.",))
        assert len(ids) == len(labels)
        start = next(i for i, x in enumerate(labels) if x != -100)
        context, answer = tokens.decode(ids[:start]), tokens.decode(labels[start:])
        stated = [m.groups() for d in context.split(".") for p in patterns if (m := p.match(d.strip() + "."))]
        if stated and answer.endswith("."):  # (an answer cut at 256 tokens may lose its slots)
            with_docs += 1
            assert any(f" {value}." in answer for _, value in stated)  # a gold document states a slot's value
            true_values += sum(C.facts()[country].get(a) == v for country, v in stated for a in C.ATTRIBUTES)
    assert with_docs >= 40 and true_values <= with_docs  # the values are drawn at random, rarely the true ones


def test_question_shapes():
    pytest.importorskip("countryinfo")
    import random

    from zoo.prefetch_rag import corpus as C
    from zoo.prefetch_rag.lead_ins import LEAD_INS

    countries = C.country_split()["test"]
    q = C.make_question(countries[0], random.Random(0), "test")
    assert len(q.slots) == 4 and {s.country for s in q.slots} == {countries[0]}
    m = C.make_question(countries[0], random.Random(0), "test", multi=True, other=countries[1], n_slots=2)
    assert [s.country for s in m.slots] == [countries[0], countries[1]]
    assert m.segments[3].text == C.SWITCH.format(c=countries[1])  # intro, lead-in, slot, switch
    short = C.make_question(countries[0], random.Random(0), "test", short=True)
    assert all(s.text in LEAD_INS[n.attribute]["test_short"] for s, n in zip(short.segments[1::2], short.slots))
    assert not set(C.country_split()["test"]) & set(C.country_split()["lm"] + C.country_split()["val"])
    with pytest.raises(ValueError, match="^n_slots"):
        C.make_question(countries[0], random.Random(0), "test", n_slots=0)


def test_knowledge_base_embeddings_are_cached_in_the_zoos_data_cache(monkeypatch, tmp_path):
    import zoo.common.minilm
    from zoo.prefetch_rag.index import kb_embeddings

    calls, labels = [], []

    def fake_embed(texts, batch_size=64, progress=None):
        calls.append(len(texts))
        labels.append(progress)
        return np.ones((len(texts), 384), dtype=np.float32)

    monkeypatch.setenv("ZOO_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(zoo.common.minilm, "embed", fake_embed)
    first = kb_embeddings(["a", "b"])
    (path,) = (tmp_path / "prefetch_rag").glob("kb_*.npy")  # zoo._paths.cache_dir("prefetch_rag")
    assert np.array_equal(kb_embeddings(["a", "b"]), first) and calls == [2]  # the second call read the file
    kb_embeddings(["a", "c"])
    assert calls == [2, 2]  # other texts: another file
    kb_embeddings(["d"], verbose=True)
    assert labels[:2] == [None, None] and "embedding the 1 knowledge-base documents" in labels[2]  # a progress bar
