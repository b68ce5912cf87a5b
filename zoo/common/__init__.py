"""Pieces shared by several papers: data readers, text corpora and tokenizers, small backbones."""
