"""Crafter worlds that evolve the same in every process (used by :func:`zoo.olaf_world.clips.play_crafter`).

Crafter lists a chunk's creatures from a ``set`` of objects hashed by ``id()`` and despawns ``random.choice`` of
that list, so the same world seed evolved differently between processes after the first despawn.
"""

from __future__ import annotations

import collections


class InsertionOrderedSet(dict):
    """The ``add`` / ``remove`` / iteration of a set, iterating in insertion order (Crafter's chunk contents)."""

    def add(self, item) -> None:
        self[item] = None

    def remove(self, item) -> None:
        del self[item]


def ordered_chunks(world) -> None:
    """Make a Crafter ``World`` keep its chunks' objects in :class:`InsertionOrderedSet` from every reset on.

    ``World.reset`` empties the chunks as ``defaultdict(set)`` before the world generator adds any object, so the
    wrapped reset replaces that empty container and nothing else changes.
    """
    reset = world.reset

    def ordered_reset(seed=None) -> None:
        reset(seed=seed)
        world._chunks = collections.defaultdict(InsertionOrderedSet)

    world.reset = ordered_reset
    world._chunks = collections.defaultdict(InsertionOrderedSet)  # World.__init__ already reset it
