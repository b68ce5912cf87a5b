"""The SpecExit target on *validation* problems: greedy accuracy in distribution and on longer problems (also: the
operands its step lines read), forced exits.

Checks a target export (stage 1, ``recipes/specexit/arith_target.yaml``) before the draft is trained on it, without
touching the test problems. Run under the CPU lock:

    flock /tmp/zoo-cpu.lock .venv/bin/python benchmarks/specexit_target_check.py runs/specexit.arith_target/pretrained
"""

from __future__ import annotations

import argparse
import collections
import json
import time

import torch


def _operands_read(completion: str) -> list[str]:
    """The operator and operand of every step line of a completion, in order (values ignored)."""
    thinking = completion.split("</think>")[0]
    return [line.split("=")[0] for line in thinking.split("\n\n") if line[:1] in "+-"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder", help="an exported SpecExit folder (target or draft stage)")
    parser.add_argument("--problems", type=int, default=100, help="validation problems per length range")
    parser.add_argument("--long", type=int, nargs=2, default=[7, 10], help="operand range of the longer problems")
    parser.add_argument("--no-forced", action="store_true", help="skip the forced-exit check")
    args = parser.parse_args()

    import zoo
    from zoo.specexit.decoding import target_generate
    from zoo.specexit.evaluate import forced_exit_accuracy, validation_problems
    from zoo.specexit.traces import build_trace, parse_answer

    torch.set_num_threads(1)
    module = zoo.load_folder(args.folder).eval()
    tok = module.tokenizer
    out = {}
    for name, operands in (("in_distribution", (3, 6)), ("longer", tuple(args.long))):
        started = time.perf_counter()
        problems = validation_problems(args.problems, operands)
        by_count, exact, structure = collections.defaultdict(list), [], []
        for problem in problems:
            result = target_generate(module.target, module.encode_prompt(problem), module.taps, tok, 200)
            by_count[len(problem.operands)].append(parse_answer(tok.decode(result.tokens)) == problem.answer)
            clean = build_trace(problem, tok)
            exact.append(result.tokens == clean.ids[clean.prompt_len :])
            structure.append(
                _operands_read(tok.decode(result.tokens)) == _operands_read(tok.decode(clean.ids[clean.prompt_len :]))
            )
        flat = [hit for hits in by_count.values() for hit in hits]
        out[name] = {
            "accuracy": 100.0 * sum(flat) / len(flat),
            "exact_trace": 100.0 * sum(exact) / len(exact),
            "operands_read": 100.0 * sum(structure) / len(structure),
            "by_operands": {n: round(100.0 * sum(h) / len(h), 1) for n, h in sorted(by_count.items())},
            "forced": {} if args.no_forced else forced_exit_accuracy(module, problems),
            "seconds": round(time.perf_counter() - started, 1),
        }
        print(name, json.dumps(out[name]), flush=True)


if __name__ == "__main__":
    main()
