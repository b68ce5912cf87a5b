"""Tests of olaf_world (paper 13): SeqDelta-REPA latent actions."""
