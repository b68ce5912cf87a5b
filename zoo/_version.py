"""The zoo's version, in a module of its own so that the zoo's modules need not import ``zoo`` for it."""

__version__ = "0.1.0"
