"""Acceptance rules of speculative decoding: which drafted tokens the target keeps, and the token it emits next.

:func:`verify_greedy` keeps the longest prefix of the draft that matches the target's argmax (lossless with respect
to target greedy decoding); :func:`verify_sampling` is the exact rejection-sampling rule that leaves the target
distribution unchanged. :class:`~zoo.specexit.decoding.SpeculativeDecoder` applies one of them to every round.
"""

from __future__ import annotations

import torch


def verify_greedy(draft_tokens: torch.Tensor, target_logits: torch.Tensor) -> tuple[int, int]:
    """Greedy acceptance: keep the longest prefix of the draft that matches the target's argmax.

    Args:
        draft_tokens: (k,) proposed tokens.
        target_logits: (k+1, vocab) target logits after the pending token and after each draft token.

    Returns:
        ``(m, token)``: the number of accepted draft tokens and the target's next token after them.
    """
    best = target_logits.argmax(-1)
    matches = (best[:-1] == draft_tokens).long()
    m = int(matches.cumprod(0).sum())
    return m, int(best[m])


def verify_sampling(
    draft_tokens: torch.Tensor, draft_probs: torch.Tensor, target_probs: torch.Tensor, generator: torch.Generator | None
) -> tuple[int, int]:
    """Speculative-sampling acceptance (Leviathan et al.; Chen et al.): the output is distributed as the target.

    Draft token ``d_j`` is kept with probability ``min(1, p_j(d_j) / q_j(d_j))``; at the first rejection the
    emitted token is drawn from ``norm(max(0, p_j - q_j))``; if all are kept, from ``p_k``.

    Args:
        draft_tokens: (k,) tokens sampled from ``draft_probs``.
        draft_probs: (k, vocab) draft distributions ``q_1..q_k``.
        target_probs: (k+1, vocab) target distributions ``p_0..p_k`` at the same positions (and one more).
        generator: Source of randomness.

    Returns:
        ``(m, token)``: the number of accepted draft tokens and the emitted token.
    """
    k = draft_tokens.shape[0]
    index = torch.arange(k)
    p = target_probs[index, draft_tokens]
    q = draft_probs[index, draft_tokens]
    u = torch.rand(k, generator=generator, dtype=p.dtype)
    accepted = (u * q <= p).long()  # u < p/q without dividing by a zero q
    m = int(accepted.cumprod(0).sum())
    if m == k:
        dist = target_probs[k]
    else:
        residual = (target_probs[m] - draft_probs[m]).clamp_min(0.0)
        total = residual.sum()
        dist = residual / total if total > 0 else target_probs[m]
    return m, int(torch.multinomial(dist, 1, generator=generator))
