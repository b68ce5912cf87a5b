"""SpecExit's EWMA weight alpha on the *validation* problems: tokens and accuracy against plain speculative decoding.

The paper uses alpha = 0.1 over 1-4k-token traces (hundreds of verification rounds); our traces have ~10-20
rounds of thinking. This sweep shows how the exit depends on alpha and backs the recipe's choice (0.9).
Run under the CPU lock:

    flock /tmp/zoo-cpu.lock .venv/bin/python benchmarks/specexit_alpha.py --problems 100
"""

from __future__ import annotations

import argparse
import json

import torch


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--problems", type=int, default=100, help="validation problems (never the test split)")
    parser.add_argument("--alphas", type=float, nargs="+", default=[0.1, 0.3, 0.5, 0.7, 0.9, 1.0])
    parser.add_argument("--json", default=None, help="also write the table here")
    parser.add_argument(
        "--paper-order", action="store_true", help="decide on earlier rounds' EWMA only (no delimiter read-out)"
    )
    args = parser.parse_args()

    import zoo
    from zoo.specexit.decoding import ExitConfig
    from zoo.specexit.evaluate import validation_problems
    from zoo.specexit.traces import parse_answer

    torch.set_num_threads(1)
    module = zoo.load("specexit", pretrained=True)
    problems = validation_problems(256)[: args.problems]
    baseline = [module.generate(p, mode="spec") for p in problems]
    base_tokens = sum(len(r.tokens) for r in baseline) / len(problems)
    base_acc = 100.0 * sum(parse_answer(r.text) == p.answer for r, p in zip(baseline, problems)) / len(problems)
    rows = [{"alpha": None, "accuracy": base_acc, "tokens_mean": base_tokens, "token_reduction": 0.0, "exit_rate": 0.0}]
    original = module.exit_rule
    for alpha in args.alphas:
        module.exit_rule = ExitConfig(**{**vars(original), "alpha": alpha, "read_delimiter": not args.paper_order})
        results = [module.generate(p, mode="specexit") for p in problems]
        tokens = sum(len(r.tokens) for r in results) / len(problems)
        rows.append(
            {
                "alpha": alpha,
                "accuracy": 100.0
                * sum(parse_answer(r.text) == p.answer for r, p in zip(results, problems))
                / len(problems),
                "tokens_mean": tokens,
                "token_reduction": 1.0 - tokens / base_tokens,
                "exit_rate": sum(r.exit_at is not None for r in results) / len(problems),
            }
        )
    module.exit_rule = original
    print(f"{'alpha':>6} {'accuracy':>9} {'tokens':>8} {'cut vs spec':>12} {'exit rate':>10}")
    for row in rows:
        name = "spec" if row["alpha"] is None else f"{row['alpha']:.2f}"
        print(
            f"{name:>6} {row['accuracy']:>9.1f} {row['tokens_mean']:>8.1f} {100 * row['token_reduction']:>11.1f}% "
            f"{100 * row['exit_rate']:>9.0f}%"
        )
    if args.json:
        with open(args.json, "w") as handle:
            json.dump(rows, handle, indent=2)


if __name__ == "__main__":
    main()
