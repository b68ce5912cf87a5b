"""The zoo's error types. Every message is one line that says what went wrong and what to do."""


class ZooError(Exception):
    """Base class of the errors the zoo raises on bad input; the CLI prints them as one line."""


class UnknownModelError(ZooError, KeyError):
    """A registry name that does not exist."""

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0]) if self.args else ""


class ZooTypeError(ZooError, TypeError):
    """An argument of the wrong type, e.g. ``zoo.load(123)``."""


class NoPretrainedWeightsError(ZooError):
    """``pretrained=True`` on an entry that publishes no learned weights."""


class ChecksumError(ZooError):
    """A fetched file does not match the sha256 pinned in the registry."""


class HubUnavailableError(ZooError):
    """The Hub cannot be reached and neither the HF cache nor the offline mirror holds the files."""


class MissingExtraError(ZooError, ImportError):
    """An optional dependency that an entry needs is not installed."""


class RecipeError(ZooError):
    """A recipe that LightningCLI cannot parse (unknown key, wrong type, missing file)."""
