"""Wider held-out lead-in pools for prefetch_rag (issue 20): do issue 20's validation headroom gates survive them?

benchmarks/prefetch_rag_shift.py traced the validation-to-test drops to the held-out lead-in pools (2 long + 1 short
per attribute in each). This adds 4 long + 1 short new sentences per attribute to each pool (:data:`EXTRA_LEAD_INS`:
8 + 2 written together, then split between val and test by ``random.Random(2026)``), re-chooses the recipe's stage 2
(theta and keep_blocks, :meth:`PrefetchRAGModule.choose_theta` on the selection questions, which are drawn from the
validation pool) for the published LM, and reads the headroom gates on the declared validation set (120 + 180
questions), as ``python -m zoo.prefetch_rag.tune --headroom`` does before any test evaluation. The LM never sees a
held-out lead-in, so only stage 2's choice depends on the pools (the heads would be retrained on the new theta's
spikes, but the gates do not use them). Test questions are never decoded.

    .venv/bin/python benchmarks/prefetch_rag_wider_pools.py   # ~1.5 min, 1 thread

2026-12-04, published LM: stage 2 chose theta 3.0 / keep_blocks 1 (a full recipe refit with these pools chose the
same, fit 412 s); validation sync_active EM 0.340 vs no_retrieval 0.002 (+33.8, holds), em_multi 0.201 vs
single_shot 0.1375 (+6.4 of the 10 points asked: FAILS). With the current pools the same gate read +14.4: it held
only on the two easy validation templates per attribute, as the test split's +3.7 had suggested. So the wider pools
cannot land until the multi-domain task is harder for single_shot (issue 20: make the task harder, do not relax the
threshold).

Which way is harder? A validation-only probe (published LM; the multi-domain question naming only the first country,
"Tell me about A, then another country."): single_shot's em_multi barely moves (0.190 -> 0.196 with the current
pools), so it never relied on the second country's name; sync_active's em_multi is what the gate turns on (0.335 ->
0.318), i.e. how well the entropy-triggered retrievals serve the second country's slots. With the wider pools that
probe re-chose theta 1.0 and passed by 0.3 points (+10.3): a knife edge, not a fix.
"""

from __future__ import annotations

import json

import torch

import zoo
from zoo.prefetch_rag import corpus as C
from zoo.prefetch_rag import tune as T
from zoo.prefetch_rag.data import selection_questions
from zoo.prefetch_rag.index import TextEncoder, build_retriever

EXTRA_LEAD_INS: dict[str, dict[str, tuple[str, ...]]] = {
    "capital": {
        "val": (
            "Diplomats posted to the country spend most of their time in",
            "Its cabinet ministers meet every week in the capital,",
            "Its presidential palace overlooks the busy streets of the capital,",
            "Foreign ministers on an official visit usually land in the capital,",
        ),
        "val_short": ("Seat of power:",),
        "test": (
            "The city printed on its stamps as the seat of power is",
            "Protesters who want to be heard by its government march through",
            "Asked for the city where its laws are passed, a guide would say",
            "The national museum and the supreme court both stand in its capital,",
        ),
        "test_short": ("Ruling city:",),
    },
    "currency": {
        "val": (
            "The notes handed out by its cash machines are in",
            "The price of bread in its bakeries is marked in",
            "Tourists who budget for a week there plan their spending in",
            "Exchange booths at its borders sell the local currency,",
        ),
        "val_short": ("Legal tender:",),
        "test": (
            "Its tax office collects every bill in",
            "Street vendors in its markets expect to be paid in",
            "Its public sector salaries arrive each month in",
            "Pension payments to its retirees are made in",
        ),
        "test_short": ("Local cash:",),
    },
    "language": {
        "val": (
            "Its theatres stage most of their plays in",
            "Most books in its public libraries are printed in",
            "The language of its government websites is",
            "Court hearings in the country are held mainly in",
        ),
        "val_short": ("Mother tongue:",),
        "test": (
            "The first words its babies learn are usually in",
            "Doctors in its hospitals talk to patients mostly in",
            "Its national anthem is sung in",
            "Visitors who want to order food there should learn some",
        ),
        "test_short": ("Local speech:",),
    },
    "calling_code": {
        "val": (
            "On its international calling cards, the prefix printed first is",
            "Its embassy lists every office number starting with",
            "Relatives calling home from overseas first press",
            "Hotel bookings made by phone from abroad begin with",
        ),
        "val_short": ("Its prefix:",),
        "test": (
            "Its telephone operators tell foreign callers to begin with",
            "The digits that open every one of its international numbers are",
            "A caller in another country trying to reach its hospitals first dials",
            "Fax numbers of its ministries, written for abroad, begin with",
        ),
        "test_short": ("Dial prefix:",),
    },
    "demonym": {
        "val": (
            "Ask its residents where they are from and they say they are",
            "Scientists from the country are introduced at conferences as",
            "A family that has lived there for generations is",
            "The faces on its bank notes are all",
        ),
        "val_short": ("Its nationals:",),
        "test": (
            "Children born to its citizens are",
            "Soldiers serving in its army are",
            "Every member of its national parliament is",
            "Its emigrants living overseas still call themselves",
        ),
        "test_short": ("Inhabitants:",),
    },
}


def widen() -> None:
    """Append :data:`EXTRA_LEAD_INS` to the held-out pools of :data:`zoo.prefetch_rag.corpus.LEAD_INS` (in place)."""
    for attribute, pools in EXTRA_LEAD_INS.items():
        for pool, sentences in pools.items():
            assert not set(sentences) & {t for p in C.LEAD_INS.values() for v in p.values() for t in v}
            C.LEAD_INS[attribute][pool] = C.LEAD_INS[attribute][pool] + sentences


def main() -> None:
    torch.set_num_threads(1)
    widen()
    retriever, encoder = build_retriever(), TextEncoder()
    module = zoo.load("prefetch_rag", pretrained=True).eval()
    questions = selection_questions(module.hparams.val_single, module.hparams.val_multi)
    choice = module.choose_theta(retriever, questions, encoder)
    module.theta.fill_(choice["theta"])
    module.keep_blocks.fill_(choice["keep_blocks"])
    record = T.tune(module, retriever, encoder, headroom_only=True)
    print(json.dumps({"theta": choice["theta"], "keep_blocks": choice["keep_blocks"], **T.headroom_gates(record)}))


if __name__ == "__main__":
    main()
