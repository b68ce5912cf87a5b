"""Token streams of DeepHA: per-step tokens, the compressed context, and teacher-forced training sequences.

A step's tokens follow the arm's layout (:data:`~zoo.deepha.vocab.LAYOUTS`), e.g. for CoA
``[OBS_t] [SKILL_type] [SKILL_obj] [SKILL_colour] [GND_f] [GND_r] [MOT]``. A sequence starts with the mission's
word tokens.

**Compression (R).** With window ``W`` the context of step ``t`` holds the mission, then the skill triples of
every step before ``b = W * floor(t / W)`` (only OBS, GND and MOT dropped; a triple equal to the previous kept
triple is dropped: deduplication), then the full tokens of steps ``b..t``. So no OBS token is ever ``W`` or more
steps old, and the prefix changes only at multiples of ``W``: at inference the KV cache is rebuilt from the
compressed prefix once every ``W`` steps and otherwise extended token by token. Positions are re-indexed
contiguously (0, 1, ...) after compression. Training builds the very same contexts: one sequence per block of
``W`` steps, whose targets are the block's action tokens.
"""

from __future__ import annotations

import numpy as np

from zoo.deepha.vocab import GND_F, GND_MAX, GND_R, GROUNDING, MOT, OBS, SKILL, TYPE_SIZES, WORD

IGNORE = -100


def step_tokens(layout, skill, grounding, motor: int, obs_row: int, drop: bool = False) -> list[tuple[int, int]]:
    """(type, id) tokens of one step in ``layout``; ``drop`` removes its skill and grounding tokens.

    Args:
        layout: Token types of a step (``LAYOUTS[arm]``).
        skill: The (type, object, colour) ids.
        grounding: (forward, right) offsets in [-12, 12].
        motor: The motor action id.
        obs_row: Row of the step's encoded observation (the OBS token's id).
        drop: Drop the skill and grounding tokens (motor-only step).
    """
    values = {
        OBS: obs_row,
        SKILL[0]: int(skill[0]),
        SKILL[1]: int(skill[1]),
        SKILL[2]: int(skill[2]),
        GND_F: int(grounding[0]) + GND_MAX,
        GND_R: int(grounding[1]) + GND_MAX,
        MOT: int(motor),
    }
    return [(kind, values[kind]) for kind in layout if not (drop and (kind in SKILL or kind in GROUNDING))]


def skill_of(tokens: list[tuple[int, int]]) -> tuple[int, int, int] | None:
    """The skill triple in a step's tokens, or None when the step has none (dropped or not in the layout)."""
    found = {kind: value for kind, value in tokens if kind in SKILL}
    return tuple(found[k] for k in SKILL) if len(found) == 3 else None


def compressed_prefix(steps: list[list[tuple[int, int]]], before: int) -> list[tuple[int, int]]:
    """Deduplicated skill triples of steps ``< before`` (the compressed memory)."""
    out, last = [], None
    for tokens in steps[:before]:
        skill = skill_of(tokens)
        if skill is None or skill == last:
            continue
        last = skill
        out += list(zip(SKILL, skill, strict=True))
    return out


def block_start(t: int, window: int | None) -> int:
    """First step kept in full at step ``t`` (0 for the full context)."""
    if window is None:
        return 0
    if window < 1:
        raise ValueError(f"W: the compression window must be >= 1, got {window}")
    return window * (t // window)


def context(mission, steps, t: int, window: int | None) -> list[tuple[int, int]]:
    """The context (before generation) at step ``t``: mission, compressed prefix, full tokens of steps ``b..t``."""
    start = block_start(t, window)
    tokens = [(WORD, int(w)) for w in mission]
    tokens += compressed_prefix(steps, start) if window is not None else []
    for tokens_s in steps[start : t + 1]:
        tokens += tokens_s
    return tokens


def training_sequences(mission, steps, window: int | None) -> list[tuple[list[tuple[int, int]], list[bool]]]:
    """Teacher-forced sequences of one episode: (tokens, is_target) with the contexts inference sees.

    ``window=None``: one sequence over the whole episode. Else one per block of ``window`` steps: mission +
    compressed prefix + the block's steps, whose action tokens are the targets (the prefix's are context only).
    """
    starts = [0] if window is None else list(range(0, len(steps), window))
    out = []
    for start in starts:
        end = len(steps) if window is None else min(start + window, len(steps))
        head = [(WORD, int(w)) for w in mission]
        head += compressed_prefix(steps, start) if window is not None else []
        body = [tok for s in steps[start:end] for tok in s]
        out.append((head + body, [False] * len(head) + [kind != OBS for kind, _ in body]))
    return out


def to_arrays(sequence: list[tuple[list[tuple[int, int]], list[bool]]], rng=None, p_noise: float = 0.0):
    """(types, ids, target ids, target types) arrays of one sequence; targets sit one position early.

    ``p_noise`` (with ``rng``) replaces each skill and grounding *input* id by a uniformly random id of its type
    with that probability; the targets keep the true ids. Teacher forcing alone lets the model copy the previous
    step's (true) skill and grounding, so it learns little perception and, at inference, carries its own early
    mistakes forward; noisy thoughts in the context make it re-derive them from the observation (R).
    """
    tokens, is_target = sequence
    types = np.array([k for k, _ in tokens], dtype=np.int64)
    ids = np.array([v for _, v in tokens], dtype=np.int64)
    targets = np.full(len(tokens), IGNORE, dtype=np.int64)
    target_types = np.full(len(tokens), -1, dtype=np.int64)
    mask = np.asarray(is_target[1:], dtype=bool)
    targets[:-1][mask] = ids[1:][mask]
    target_types[:-1][mask] = types[1:][mask]
    if p_noise > 0.0:
        thought = np.isin(types, (*SKILL, *GROUNDING)) & (rng.random(len(types)) < p_noise)
        sizes = np.array([TYPE_SIZES[k] for k in range(len(TYPE_SIZES))])
        ids = ids.copy()
        ids[thought] = (rng.random(int(thought.sum())) * sizes[types[thought]]).astype(np.int64)
    return types, ids, targets, target_types
