"""Position coupling (Cho et al. 2024, "Position Coupling: Leveraging Task Structure for Improved Length
Generalization of Transformers"): the position ids of every trace token, shared by training and all decoders.

Every prompt entry ``j`` (1-based) owns a block of :data:`STRIDE` position ids starting at ``B_j = STRIDE * j``, and
every thinking line that consumes entry ``j`` gets the **same** ids as the entry, slot by slot::

    slot        -1       0    1..2     3    4..5     6    7
    prompt      (Q: at slot 0 of block 1)  op  digits       (entry 1's digits sit in slot 4..5 of block 1)
    step line            op   digits   =    value    .    \\n\\n      "+4=12.\\n\\n"    consumes entry j
    bare line                                value    .    \\n\\n      "14.\\n\\n"       block n+1 (prompt "=?")
    check line           op   digits   =    value    .    \\n\\n      "Check: 14-9=5.\\n\\n" re-reads entry j
    Wait, line  Wait,    op   digits   =    value    .    \\n\\n      corrects the line of the same block

A check line starts before its block: ``Check:`` at ``B_j-4``, the space at ``B_j-3`` and the running value it
re-verifies (``14``, written by step line ``j`` at ``B_j+4..5``) at ``B_j-2..-1``, six ids before its source.
These four ids are slots 8..11 of block ``j-1``, which no step line uses (a step line fills slots 0..7): that is
why :data:`STRIDE` is 12. With a stride of 10 they were the slots where step line ``j-1`` writes its ``=``, value,
``.`` and delimiter; the same ids then carried two roles in training, and a target trained that way solved 71.7%
of 7-10-operand validation problems and read the operands right in ~52% of them, against 86.7% and 100% with
stride 12 (700-step pilots, issue 34).

So "read the next operand" is attention to an equal position id, and "read the previous running value" is
attention ``STRIDE`` ids back: both relations are the same at every problem length, which is what lets a target
trained on 2-6 operands run 7-10 (RoPE sees only relative positions). The prompt's ``=?`` sits at block ``n+1``,
so the line after the last step finds ``=`` where an operator would be and writes the bare answer line;
``<think>`` takes id ``2 * STRIDE - 3`` (slot 9 of block 1: it ends "line 1", entry 1 is the first running value);
checks walk the blocks backwards from ``n``; ``</think>`` and the answer take block ``n+2``, with the answer's digits in
slot 4..5 (the bare line's value is ``STRIDE`` ids back). Ids are assigned causally (a token's id depends on it and the
tokens before it only), so KV-cached decoding, speculative verification and the draft compute them token by token with
:func:`step`; a token the grammar does not expect takes the previous id + 1.

The **unmarked** grammar (:mod:`zoo.specexit.grammar`, chosen by ``tokenizer.grammar``) has no bare line: a line
opening with a digit is a re-derivation. Its layout keeps every id's *value* content the same wherever it occurs:
slot 4..5 of block ``j`` always holds the running value after entry ``j`` (entry 1's digits, or step line ``j-1``'s
value), so a verification line writes each value at the ids of the step that produced it::

    step line        +4=12.          op B, operand B+1.., = B+3, value B+4..5, . B+6, \\n\\n B+7 (as in checks)
    re-derivation    8+4=12.         input value at B-8..-7 (block j-1's value), then as a step line
    undo             Check: 12-4=8.  Check: B-4, space B-3, 12 at B+4..5, op B, operand, = B+3, 8 at B-8..-7

where ``B`` is the block of the step re-verified. A verification block walks back from the step just written (the
next verification after a step line takes that line's block; each verification moves one block back). ``</think>``
takes block ``n+1`` (slot 1), so the answer's digits sit at slot 4..5 of block ``n+1``, ``STRIDE`` ids after the last
step line's value, the relation "read the previous running value" of every step line.
"""

from __future__ import annotations

from typing import NamedTuple

import torch

from zoo.specexit.tokenizer import TraceTokenizer

STRIDE = 12
#: Attention window in position ids (:func:`zoo.specexit.models.coupled_mask`): a query sees only keys whose ids are
#: within this distance, so a longer problem adds no distance that training lacked (the last of 4 checks still sees
#: the bare answer line 4 blocks away). Without it, a target trained on <= 6 operands broke down from 8 on: the
#: first lines attended to prompt entries further ahead than any training prompt reached.
WINDOW = 48

# Fields of a line (where the next digit goes).
_START, _PREFIXED, _OPERAND, _VALUE, _DONE, _SOURCE = range(6)
# Phases.
_PROMPT, _THINK, _ANSWER = range(3)
# Line kinds.
_STEP, _WAIT, _BARE, _CHECK, _REDERIVE = range(5)


class State(NamedTuple):
    """Parser state after a token (immutable, so a decoder can keep one per emitted token and roll back)."""

    phase: int = _PROMPT
    entries: int = 0  # prompt entries seen (n once the prompt is complete)
    block: int = 0  # block of the current line / entry
    field: int = _START
    digits: int = 0  # digits written in the current field
    kind: int = _STEP
    next_step: int = 2  # block of the next step line
    next_check: int = 0  # block of the next check line
    last: int = -1  # id of the previous token


class Coupler:
    """Token-id lookups for :func:`step` (built once per tokenizer).

    Args:
        tokenizer: The trace tokenizer.
    """

    def __init__(self, tokenizer: TraceTokenizer) -> None:
        ids = tokenizer.ids
        self.digits = {ids[str(d)] for d in range(10)}
        self.ops = {ids["+"], ids["-"]}
        self.q, self.equals, self.question = ids["Q:"], ids["="], ids["?"]
        self.dot, self.delim = ids["."], tokenizer.delim_id
        self.think, self.end_think = tokenizer.think_id, tokenizer.end_think_id
        self.check, self.wait, self.space = ids["Check:"], ids["Wait,"], ids[" "]
        self.unmarked = tokenizer.grammar == "unmarked"

    def step(self, state: State, token: int) -> tuple[int, State]:
        """The position id of ``token`` after ``state``, and the state after it."""
        s = state
        if s.phase == _PROMPT:
            position, s = self._prompt(s, token)
        elif s.phase == _THINK:
            position, s = self._think_unmarked(s, token) if self.unmarked else self._think(s, token)
        else:
            position = s.last + 1
        return position, s._replace(last=position)

    def _prompt(self, s: State, token: int) -> tuple[int, State]:
        if token == self.q:
            return STRIDE, s._replace(entries=1, block=1, field=_VALUE, digits=0)
        if token in self.digits and s.field in (_VALUE, _OPERAND):
            slot = (4 if s.field == _VALUE else 1) + s.digits
            return STRIDE * s.block + slot, s._replace(digits=s.digits + 1)
        if token in self.ops:
            block = s.block + 1
            return STRIDE * block, s._replace(entries=block, block=block, field=_OPERAND, digits=0)
        if token == self.equals:
            return STRIDE * (s.entries + 1), s._replace(field=_DONE)
        if token == self.question:
            return STRIDE * (s.entries + 1) + 1, s
        if token == self.think:
            s = s._replace(phase=_THINK, block=1, field=_START, next_step=2, next_check=s.entries)
            return STRIDE * 2 - 3, s
        return s.last + 1, s

    def _think(self, s: State, token: int) -> tuple[int, State]:
        if token == self.end_think:
            return STRIDE * (s.entries + 2) + 1, s._replace(phase=_ANSWER)
        if s.field == _START:
            if token == self.check:
                block = s.next_check
                return STRIDE * block - 4, s._replace(kind=_CHECK, block=block, field=_SOURCE, digits=0)
            if token == self.wait:
                block = s.next_step - 1
                return STRIDE * block - 1, s._replace(kind=_WAIT, block=block, field=_PREFIXED)
            if token in self.ops:
                block = s.next_step
                return STRIDE * block, s._replace(kind=_STEP, block=block, field=_OPERAND, digits=0)
            if token in self.digits:
                block = s.next_step
                return STRIDE * block + 4, s._replace(kind=_BARE, block=block, field=_VALUE, digits=1)
            return s.last + 1, s
        base = STRIDE * s.block
        if s.field == _SOURCE:  # a check restates the value it undoes: " 14" of "Check: 14-9=5."
            if token == self.space:
                return base - 3, s
            if token in self.digits and s.digits < 2:
                return base - 2 + s.digits, s._replace(digits=s.digits + 1)
            if token in self.ops:
                return base, s._replace(field=_OPERAND, digits=0)
            return s.last + 1, s
        if s.field == _PREFIXED and token in self.ops:
            return base, s._replace(field=_OPERAND, digits=0)
        if token in self.digits and s.field in (_OPERAND, _VALUE):
            slot = (1 if s.field == _OPERAND else 4) + s.digits
            return base + slot, s._replace(digits=s.digits + 1)
        if token == self.equals:
            return base + 3, s._replace(field=_VALUE, digits=0)
        if token == self.dot:
            return base + 6, s._replace(field=_DONE)
        if token == self.delim:
            if s.kind in (_STEP, _BARE):
                s = s._replace(next_step=s.next_step + 1)
            elif s.kind == _CHECK:
                s = s._replace(next_check=s.next_check - 1)
            return base + 7, s._replace(field=_START, digits=0)
        return s.last + 1, s

    def _think_unmarked(self, s: State, token: int) -> tuple[int, State]:
        """A thinking token of the ``unmarked`` grammar (module docstring)."""
        if token == self.end_think:
            return STRIDE * (s.entries + 1) + 1, s._replace(phase=_ANSWER)
        if s.field == _START:
            if token == self.check:  # undo "Check: 12-4=8." of the step in block next_check
                block = s.next_check
                return STRIDE * block - 4, s._replace(kind=_CHECK, block=block, field=_SOURCE, digits=0)
            if token in self.ops:
                block = s.next_step
                return STRIDE * block, s._replace(kind=_STEP, block=block, field=_OPERAND, digits=0)
            if token in self.digits:  # re-derivation "8+4=12.": its input value, where block - 1 holds it
                block = s.next_check
                return STRIDE * (block - 1) + 4, s._replace(kind=_REDERIVE, block=block, field=_SOURCE, digits=1)
            return s.last + 1, s
        base = STRIDE * s.block
        if s.field == _SOURCE:
            if token == self.space and s.kind == _CHECK:
                return base - 3, s
            if token in self.digits and s.digits < 2:
                source = base + 4 if s.kind == _CHECK else base - STRIDE + 4
                return source + s.digits, s._replace(digits=s.digits + 1)
            if token in self.ops:
                return base, s._replace(field=_OPERAND, digits=0)
            return s.last + 1, s
        if token in self.digits and s.field in (_OPERAND, _VALUE):
            if s.field == _OPERAND:
                slot = base + 1
            else:  # an undo's result is the value before the step: block - 1's
                slot = base - STRIDE + 4 if s.kind == _CHECK else base + 4
            return slot + s.digits, s._replace(digits=s.digits + 1)
        if token == self.equals:
            return base + 3, s._replace(field=_VALUE, digits=0)
        if token == self.dot:
            return base + 6, s._replace(field=_DONE)
        if token == self.delim:
            if s.kind == _STEP:
                s = s._replace(next_step=s.next_step + 1, next_check=s.block)
            elif s.kind in (_CHECK, _REDERIVE):
                s = s._replace(next_check=s.next_check - 1)
            return base + 7, s._replace(field=_START, digits=0)
        return s.last + 1, s


_COUPLERS: dict[tuple, Coupler] = {}


def coupler(tokenizer: TraceTokenizer) -> Coupler:
    """The (cached) :class:`Coupler` of a tokenizer (its vocabulary and grammar)."""
    key = (tokenizer.tokens, tokenizer.grammar)
    if key not in _COUPLERS:
        _COUPLERS[key] = Coupler(tokenizer)
    return _COUPLERS[key]


def extend(tokenizer: TraceTokenizer, state: State, tokens) -> tuple[list[int], list[State]]:
    """Position ids of ``tokens`` following ``state``, and the state after each of them."""
    c = coupler(tokenizer)
    positions, states = [], []
    for token in tokens:
        position, state = c.step(state, int(token))
        positions.append(position)
        states.append(state)
    return positions, states


def position_ids(tokenizer: TraceTokenizer, tokens) -> list[int]:
    """Position ids of a whole sequence (prompt first)."""
    return extend(tokenizer, State(), tokens)[0]


def batch_position_ids(tokenizer: TraceTokenizer, input_ids: torch.Tensor) -> torch.Tensor:
    """(B, T) position ids of a right-padded batch (padding continues +1 and is never a target)."""
    rows = [position_ids(tokenizer, row) for row in input_ids.tolist()]
    return torch.tensor(rows, dtype=torch.long, device=input_ids.device)
