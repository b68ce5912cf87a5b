"""prefetch_rag: does the generator learn to copy a slot value from its context? (issue 20's headroom diagnosis)

Trains the GPT-2 d128/L4 of the recipe on counterfactual sequences (stage 1 only, no Lightning, no index) with the
datamodule's knobs, and every ``--probe-every`` steps measures on validation questions (``val`` countries, val
lead-ins, true facts, never seen by the LM):

* ``tf_value``: teacher-forced accuracy of each slot value (every value token the argmax) with every gold document
  of the answer in context (shuffled), one batched forward (cheap copy signal);
* ``tf_value_nodoc``: the same without documents (what memorising or guessing gives: should stay near 0);
* ``oracle_em``: greedy slot EM with the gold documents of the first three slots in context
  (:func:`zoo.prefetch_rag.scoring.oracle_em`, the note's diagnostic).

    flock /tmp/zoo-cpu.lock .venv/bin/python benchmarks/prefetch_rag_copy_pilot.py --steps 600
"""

from __future__ import annotations

import argparse
import json
import random
import time

import torch


def probe(lm, tokens, questions, with_docs: bool, seed: int = 0) -> float:
    from zoo.prefetch_rag import corpus as C
    from zoo.prefetch_rag.lm import collate

    rng = random.Random(seed)
    rows, firsts = [], []
    for question in questions:
        docs = [C.fact_document(s.country, s.attribute) for s in question.slots] if with_docs else []
        rng.shuffle(docs)
        ids = tokens.context(docs, question.question)
        first = []
        for i, segment in enumerate(question.segments):
            piece = tokens.segment(segment, first=i == 0)
            if segment.is_slot:
                first.append((len(ids), len(piece) - 1))
            ids += piece
        rows.append((ids, ids))
        firsts.append(first)
    batch = collate(rows, tokens.pad)
    with torch.no_grad():
        logits = lm(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"]).logits
    hits = total = 0
    for r, spans in enumerate(firsts):
        for p, n in spans:  # a value is right when every one of its tokens is the argmax
            pred = logits[r, p - 1 : p - 1 + n].argmax(-1)
            hits += int(bool((pred == batch["input_ids"][r, p : p + n]).all()))
            total += 1
    return hits / total


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=600)
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--lr", type=float, default=3e-3)
    parser.add_argument("--warmup", type=int, default=50)
    parser.add_argument("--slot-weight", type=float, default=10.0)
    parser.add_argument("--train-slots", type=int, default=4)
    parser.add_argument("--gold-docs", type=int, nargs=2, default=(4, 4))
    parser.add_argument("--probe-every", type=int, default=150)
    parser.add_argument("--probe-questions", type=int, default=20)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--no-pointer", action="store_true", help="the plain GPT-2 (no copy head)")
    parser.add_argument("--save", default=None, help="save the LM state_dict here at the end")
    args = parser.parse_args()
    torch.set_num_threads(1)
    torch.manual_seed(args.seed)

    from zoo.common.schedules import warmup_cosine
    from zoo.common.text import train_bpe
    from zoo.prefetch_rag import corpus as C
    from zoo.prefetch_rag.lm import LMConfig, Tokens, build_lm, collate, tokenizer_texts, training_sequence
    from zoo.prefetch_rag.module import PrefetchRAGModule
    from zoo.prefetch_rag.scoring import oracle_em

    tokens = Tokens(train_bpe(tokenizer_texts(), vocab_size=4096))
    lm = build_lm(LMConfig(pointer=not args.no_pointer))
    countries = C.country_split()["lm"]
    distractors = C.distractor_documents()
    rng = random.Random(args.seed)
    questions = C.question_set("val", args.probe_questions, 0, seed=1)
    opt = torch.optim.AdamW(lm.parameters(), lr=args.lr, betas=(0.9, 0.95), weight_decay=0.01)

    sched = warmup_cosine(opt, args.warmup, args.steps)  # the recipe's schedule (PrefetchRAGModule)
    module = PrefetchRAGModule()
    module.lm, module.tokens = lm, tokens
    shape = {"n_slots": args.train_slots, "gold_docs": tuple(args.gold_docs)}
    log, start, losses = [], time.perf_counter(), []
    for step in range(1, args.steps + 1):
        lm.train()
        rows = [
            training_sequence(tokens, rng, countries, distractors, with_slots=True, **shape) for _ in range(args.batch)
        ]
        batch = collate(rows, tokens.pad)
        module.hparams.slot_weight = args.slot_weight
        loss = module._loss(batch)
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(lm.parameters(), 1.0)
        opt.step()
        sched.step()
        losses.append(loss.item())
        if step % args.probe_every == 0 or step == args.steps:
            lm.eval()
            record = {
                "step": step,
                "seconds": round(time.perf_counter() - start, 1),
                "loss": round(sum(losses[-50:]) / len(losses[-50:]), 3),
                "tf_value": round(probe(lm, tokens, questions, True), 3),
                "tf_value_nodoc": round(probe(lm, tokens, questions, False), 3),
                "oracle_em": round(oracle_em(module, questions), 3),
            }
            log.append(record)
            print(json.dumps(record), flush=True)
    if args.save:
        torch.save(lm.state_dict(), args.save)
    print(json.dumps({"args": vars(args), "log": log}))


if __name__ == "__main__":
    main()
