"""Vocabularies and the 7-token-per-step layout of DeepHA on BabyAI (plain Python, no torch).

Token types (one embedding table per type, one output head per action type):

====  ==============  ==========================================================================
id    type            values
====  ==============  ==========================================================================
0     WORD            the mission's words (:data:`MISSION_WORDS`)
1     OBS             one token per step: the 7x7x3 egocentric grid + the direction (encoded, not looked up)
2     SKILL_TYPE      :data:`SKILL_TYPES` (the bot's subgoal class)
3     SKILL_OBJ       :data:`OBJ_TYPES` (the subgoal's object type, or "none")
4     SKILL_COLOUR    :data:`COLOURS` (the subgoal's object colour, or "none")
5     GND_F           forward offset of the subgoal's end cell in the egocentric frame, -12..12
6     GND_R           right offset of the same cell, -12..12
7     MOT             :data:`MOTOR` (MiniGrid's primitive actions 0..6)
====  ==============  ==========================================================================
"""

from __future__ import annotations

import re

WORD, OBS, SKILL_TYPE, SKILL_OBJ, SKILL_COLOUR, GND_F, GND_R, MOT = range(8)
TYPE_NAMES = ("word", "obs", "skill_type", "skill_obj", "skill_colour", "gnd_f", "gnd_r", "mot")
ACTION_TYPES = (SKILL_TYPE, SKILL_OBJ, SKILL_COLOUR, GND_F, GND_R, MOT)
SKILL = (SKILL_TYPE, SKILL_OBJ, SKILL_COLOUR)
GROUNDING = (GND_F, GND_R)

SKILL_TYPES = ("none", "GoNextTo", "Open", "Pickup", "Drop", "Explore", "Close")
OBJ_TYPES = ("none", "door", "key", "ball", "box", "wall", "goal")
COLOURS = ("none", "red", "green", "blue", "purple", "yellow", "grey")
GND_MAX = 12  # offsets in [-GND_MAX, GND_MAX]: 25 tokens per axis
MOTOR = ("left", "right", "forward", "pickup", "drop", "toggle", "done")
MISSION_WORDS = (
    "<pad>", "go", "to", "the", "a", "pick", "up", "put", "next", "open", "door", "key", "ball", "box", "object",
    "red", "green", "blue", "purple", "yellow", "grey", "in", "front", "of", "you", "behind", "on", "your", "left",
    "right", "and", "then", "after", ",",
)  # fmt: skip
WORD_INDEX = {word: i for i, word in enumerate(MISSION_WORDS)}

# vocabulary size of every token type (OBS has none: it is encoded from the grid)
TYPE_SIZES = {
    WORD: len(MISSION_WORDS),
    OBS: 0,
    SKILL_TYPE: len(SKILL_TYPES),
    SKILL_OBJ: len(OBJ_TYPES),
    SKILL_COLOUR: len(COLOURS),
    GND_F: 2 * GND_MAX + 1,
    GND_R: 2 * GND_MAX + 1,
    MOT: len(MOTOR),
}
TYPE_OFFSETS = {}
_offset = 0
for _kind in range(8):
    TYPE_OFFSETS[_kind] = _offset
    _offset += TYPE_SIZES[_kind]
N_DISCRETE = _offset

# the per-step token layout of each arm (the model's action levels)
LAYOUTS = {
    "coa": (OBS, *SKILL, *GROUNDING, MOT),
    "skill": (OBS, *SKILL, MOT),
    "grounding": (OBS, *GROUNDING, MOT),
    "flat": (OBS, MOT),
    "high": (OBS, *SKILL, *GROUNDING),  # the decoupled arm's high-level model (its low-level model adds MOT)
}


def mission_tokens(mission: str) -> list[int]:
    """Word ids of a BabyAI mission; words outside :data:`MISSION_WORDS` raise a ValueError naming them."""
    words = re.sub(",", " , ", mission.lower()).split()
    unknown = sorted({w for w in words if w not in WORD_INDEX or w == "<pad>"})
    if unknown:
        raise ValueError(f"mission: words outside the vocabulary: {', '.join(unknown)} (in {mission!r})")
    return [WORD_INDEX[w] for w in words]


def skill_index(kind: str, obj: str | None, colour: str | None) -> tuple[int, int, int]:
    """(type, object, colour) ids of a skill; unknown objects or colours map to "none"."""
    return (
        SKILL_TYPES.index(kind),
        OBJ_TYPES.index(obj) if obj in OBJ_TYPES else 0,
        COLOURS.index(colour) if colour in COLOURS else 0,
    )
