"""Reusable quantization for any torch model: ``zoo.quant.cim`` (compute-in-memory) and ``zoo.quant.moe``
(mixture-of-experts mixed precision). Subpackages load on import; nothing here is imported by ``import zoo``."""
