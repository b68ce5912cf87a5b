"""``zoo eval`` of GEMQ after issue 32 on the Qwen2-MoE base (shared expert kept in full precision): the protocol,
arms, settings and claims of :mod:`zoo.gemq.evaluate_v2`, measured on ``gemq.wiki2_qwen2moe_fp``."""

from __future__ import annotations

from zoo.gemq.evaluate_v2 import FP_NAMES, build, claims, plot, score_pretrained_for

_QWEN = build("qwen2_moe")
FP_NAME = FP_NAMES["qwen2_moe"]
PROTOCOL = _QWEN.PROTOCOL
measure = _QWEN.measure
score_pretrained = score_pretrained_for
CACHE_ENV = "ZOO_GEMQ_V2_CACHE"

__all__ = ["FP_NAME", "PROTOCOL", "claims", "measure", "plot", "score_pretrained"]
