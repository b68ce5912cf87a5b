"""A small longest-match tokenizer for the generated arithmetic reasoning traces.

The traces use a closed alphabet, so a fixed vocabulary of 25 tokens covers them: the special tokens
(``<pad>``, ``<eos>``, ``<think>``, ``</think>``), the step delimiter ``"\\n\\n"`` as **one** token (the
paper requires single-token delimiters), four word tokens (``Q:``, ``Check:``, ``Wait,``, ``Answer:``) and
single characters (digits, ``+ - = ? .`` and space). Encoding is greedy longest match, decoding is
concatenation, so ``decode(encode(s)) == s`` for every string over the alphabet.

The vocabulary ships with a checkpoint as ``tokenizer.json`` (see :meth:`SpecExitModule.export_files`).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence

PAD, EOS, THINK, END_THINK, DELIM = "<pad>", "<eos>", "<think>", "</think>", "\n\n"
WORDS = ("Q:", "Check:", "Wait,", "Answer:")
CHARS = tuple("0123456789") + ("+", "-", "=", "?", ".", " ")
DEFAULT_TOKENS = (PAD, EOS, THINK, END_THINK, DELIM, *WORDS, *CHARS)
#: Trace grammars (``unmarked``: the published recipes', :mod:`zoo.specexit.grammar`; ``checks``: the first recipes').
GRAMMARS = ("checks", "unmarked")


class TraceTokenizer:
    """Greedy longest-match tokenizer over a fixed token list.

    Args:
        tokens: The vocabulary in id order; must hold the special tokens and the delimiter.
        grammar: The trace grammar the ids encode (``checks``: the recipes' :func:`~zoo.specexit.traces.build_trace`;
            ``unmarked``: :mod:`zoo.specexit.grammar`). The vocabulary is the same; the grammar decides the position
            ids (:mod:`zoo.specexit.positions`) and how a thinking text states its answer (``exit_label``).
    """

    def __init__(self, tokens: Sequence[str] = DEFAULT_TOKENS, grammar: str = "checks") -> None:
        if grammar not in GRAMMARS:
            raise ValueError(f"unknown trace grammar {grammar!r}; choose one of {', '.join(GRAMMARS)}")
        self.grammar = grammar
        tokens = tuple(tokens)
        if len(set(tokens)) != len(tokens):
            raise ValueError("tokenizer vocabulary has duplicate tokens; each token must appear once")
        missing = [t for t in (PAD, EOS, THINK, END_THINK, DELIM) if t not in tokens]
        if missing:
            raise ValueError(f"tokenizer vocabulary lacks the required tokens {missing}")
        self.tokens = tokens
        self.ids = {token: i for i, token in enumerate(tokens)}
        # Longest first, so "\n\n" wins over a hypothetical "\n" and "</think>" over "<".
        self._by_length = sorted(tokens, key=len, reverse=True)
        self.pad_id, self.eos_id = self.ids[PAD], self.ids[EOS]
        self.think_id, self.end_think_id, self.delim_id = self.ids[THINK], self.ids[END_THINK], self.ids[DELIM]

    def __len__(self) -> int:
        return len(self.tokens)

    def encode(self, text: str) -> list[int]:
        """Token ids of ``text``.

        Raises:
            ValueError: If ``text`` contains a character outside the vocabulary.
        """
        out, pos = [], 0
        while pos < len(text):
            for token in self._by_length:
                if text.startswith(token, pos):
                    out.append(self.ids[token])
                    pos += len(token)
                    break
            else:
                raise ValueError(
                    f"character {text[pos]!r} at position {pos} is not in the trace vocabulary; "
                    f"prompts look like 'Q:23+45-12=?' (digits, + and - only)"
                )
        return out

    def decode(self, ids: Iterable[int], skip_pad: bool = True) -> str:
        """The text of ``ids`` (padding dropped unless ``skip_pad`` is False)."""
        return "".join(self.tokens[i] for i in ids if not (skip_pad and i == self.pad_id))

    def to_json(self) -> str:
        """The vocabulary as ``tokenizer.json`` text."""
        data = {"type": "longest-match", "tokens": list(self.tokens)}
        if self.grammar != "checks":  # the published (checks) tokenizer.json stays byte-identical
            data["grammar"] = self.grammar
        return json.dumps(data, indent=2) + "\n"

    @classmethod
    def from_json(cls, text: str) -> TraceTokenizer:
        """Rebuild a tokenizer from :meth:`to_json` output."""
        data = json.loads(text)
        if data.get("type") != "longest-match" or "tokens" not in data:
            raise ValueError("tokenizer.json is not a specexit longest-match vocabulary ({'type', 'tokens'})")
        return cls(data["tokens"], data.get("grammar", "checks"))
