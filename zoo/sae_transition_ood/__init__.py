"""SAE layer transitions for OOD detection (arXiv 2605.11920): per-layer SAEs and a depth-wise Markov model.

Registers the detector fitted on the stdlib-docstring ID setting (MiniLM-L6 hidden states). Every
reconstruction choice is documented in :mod:`zoo.sae_transition_ood.module`. This file imports only the registry.
"""

from zoo._registry import PaperRef

PAPER = PaperRef(
    title="Detecting Out-of-Domain Inputs from Sparse Autoencoder Layer Transitions",
    arxiv="2605.11920",
    authors=(),
)

INPUT_FORMAT = (
    "English texts (str); scored through all-MiniLM-L6-v2's 7 hidden states, special tokens dropped; "
    "higher score = more out-of-domain"
)
