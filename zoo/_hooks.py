"""What a module of the zoo declares for ``save_pretrained`` and loading: its extra files, metadata and head.

:class:`ExportHooks` sits below both the serialisation (:mod:`zoo._serialization`, which calls the hooks) and the
inference mixins (:mod:`zoo._inference`, whose :class:`~zoo._inference.PretrainedMixin` every module of the zoo
mixes in), so neither imports the other to find them.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any


class ExportHooks:
    """The hooks ``zoo.save_pretrained`` and ``zoo.load`` call on a module; each does nothing by default."""

    #: The classifier head's submodule, rebuilt when ``zoo.load(..., num_classes=K)`` changes the class count
    #: (None: the module has no head to replace).
    HEAD: str | None = None

    def export_metadata(self) -> dict[str, Any]:
        """JSON facts stored under ``config.json["metadata"]`` on export (e.g. a training history)."""
        return {}

    def export_files(self) -> dict[str, bytes | str]:
        """Extra files published beside the weights, by file name (a tokenizer, an allocation table)."""
        return {}

    def import_files(self, folder: Path) -> None:
        """Read back what :meth:`export_files` and :meth:`export_metadata` wrote; runs before the weights load.

        Args:
            folder: The exported folder (its ``config.json`` holds the metadata).
        """
