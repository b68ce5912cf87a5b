"""BOBA (arXiv 2606.26657): registration pending its card (see zoo/boba/module.py)."""

#: What the weights take (config.json["pretrained_cfg"]; BOBAModule uses the same).
INPUT = {
    "input_format": "Morgan radius-2 2048-bit fingerprints (rdFingerprintGenerator) packed to 256 uint8 bytes "
    "(np.packbits); predict() returns the ensemble mean and std of the O1 oracle score",
    "input_size": (256,),
}
