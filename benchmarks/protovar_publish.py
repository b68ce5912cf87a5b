"""Publishing steps of ProtoVAR (issue 22): gate a new tokenizer, copy exports in and re-pin the registry, export
the distilled sets, summarise the evaluation for the notes.

The registry pins (``_PINS`` in ``zoo/protovar/__init__.py``) are what ``zoo pin NAME`` prints; ``pin`` writes them
into that file (``zoo pin --write``) instead of leaving them to be pasted by hand. Each step is its own process, so
the next one imports the re-pinned registry and loads the new files through the sha256 check, from the offline
mirror.

    python benchmarks/protovar_publish.py gate runs/protovar.tokenizer/pretrained   # validation MSE and usage
    python benchmarks/protovar_publish.py pin protovar.tokenizer --from runs/protovar.tokenizer/pretrained
    python benchmarks/protovar_publish.py distilled     # seed-0 protovar IPC 1/10 sets into hub_cards, re-pinned
    python benchmarks/protovar_publish.py summary       # the card's numbers that the registry notes cite
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

#: Issue 22's tokenizer thresholds (reconstruction MSE in [0, 1] units, share of the 256 codes used).
MAX_MSE, MIN_USAGE = 0.02, 0.5
HEADLINE = ("acc_ipc1", "acc_ipc10")


def pin(name: str, source: str | None) -> dict[str, str]:
    """``zoo pin NAME [--from SOURCE --force] --write``: copy an export into the mirror (the old files go to
    runs/pin-backups/) and write the new pins into ``_PINS`` of zoo/protovar/__init__.py. Returns the pins."""
    from zoo._hub import pinned_files
    from zoo._registry import get_entry
    from zoo.cli import main as zoo_main

    args = ["pin", name, "--write", *(["--from", source, "--force"] if source is not None else [])]
    if zoo_main(args) != 0:
        raise SystemExit(f"zoo {' '.join(args)} failed")
    return pinned_files(get_entry(name).mirror_dir)


def gate(folder: str, enforce: bool = True) -> dict[str, float]:
    """The exported tokenizer's reconstruction MSE and codebook usage on the 5,000 validation images; with
    ``enforce``, exit 1 when it misses issue 22's thresholds (so a chain stops before replacing the published one).
    """
    import zoo
    from zoo.protovar.evaluate import tokenizer_scores

    scores = tokenizer_scores(zoo.load_folder(folder).eval(), split="val")
    passed = scores["recon_mse"] < MAX_MSE and scores["codebook_usage"] >= MIN_USAGE
    print(f"tokenizer {folder} on validation: {scores} ({'passes' if passed else 'MISSES'} MSE < {MAX_MSE}, "
          f"usage >= {MIN_USAGE})")  # fmt: skip
    if enforce and not passed:
        raise SystemExit(1)
    return scores


def distilled() -> dict[str, str]:
    """Export the seed-0 ``protovar`` IPC 1 and 10 sets of the published models into hub_cards/protovar.fmnist and
    re-pin the entry (the evaluation's cache keys pin only the weights, so its pieces stay valid)."""
    from zoo._registry import get_entry
    from zoo.protovar.evaluate import export_distilled

    for path in export_distilled(get_entry("protovar.fmnist").mirror_dir, seed=0):
        print("wrote", path)
    return pin("protovar.fmnist", None)


def summary(metrics: str | None = None) -> None:
    """Print what the registry notes (``_NOTES`` in zoo/protovar/__init__.py) cite, from the card's metrics.json."""
    from zoo._registry import get_entry

    path = Path(metrics) if metrics else get_entry("protovar.fmnist").mirror_dir / "metrics.json"
    result = json.loads(path.read_text())
    arms = result["arms"]

    def mean_std(arm: str, metric: str) -> str:
        return f"{arms[arm][metric]:.4f} +- {arms[arm].get(metric + '_std', 0.0):.4f}"

    print(f"{path}: seeds {result['seeds']}")
    for arm, values in arms.items():
        shown = [mean_std(arm, k) + f" {k}" for k in values if not k.endswith("_std") and k != "n_seeds"]
        print(f"  {arm}: {', '.join(shown)}")
    held = [c for c in result["claims"] if c["holds"]]
    print(f"claims: {len(held)} of {len(result['claims'])} hold")
    for claim in result["claims"]:
        print(f"  {'holds' if claim['holds'] else 'FAILS'} {claim['id']}: {claim['value']:+.4f} "
              f"(threshold {claim['threshold']:g})")  # fmt: skip
    print("\ndraft of the numbers in _RESULTS (zoo/protovar/__init__.py; the reading of them is yours to write):\n")
    print(results_draft(result))


def results_draft(result: dict) -> str:
    """The numbers sentence of the registry's ``_RESULTS`` in its wording, from an evaluation result."""
    from zoo.protovar.evaluate import tuning_record

    arms, lr = result["arms"], tuning_record()["student"]["best"]["lr"]

    def pair(arm: str, std: bool = False) -> str:
        metrics = [m for m in HEADLINE if m in arms[arm]]  # a toy run may score IPC 1 only
        values = [f"{arms[arm][m]:.3f}" + (f" +- {arms[arm][m + '_std']:.3f}" if std else "") for m in metrics]
        return f"{arm} {' / '.join(values)}"

    def verdict(value: float, threshold: float, above: bool = True) -> str:
        return "holds" if (value >= threshold if above else value < threshold) else "fails"

    failed = [c["id"] for c in result["claims"] if not c["holds"]]
    tokenizer, tf_acc = arms["tokenizer"], arms["protovar"]["tf_acc_scale8"]
    generative = ", ".join(pair(a) for a in ("var_unguided", "protovar_noselect", "var_unguided_select"))
    return (
        f"zoo eval protovar (seeds {' '.join(map(str, result['seeds']))}; seed = sampling + student; one fixed "
        f"soft-label student protocol, ConvNet-3 16-32-64, the spec's 300 steps, Adam lr {lr} chosen on validation "
        f"from {{0.01, 0.03, 0.1}}; every generative arm tuned with 4 validation trials) on the 10,000 test images, "
        f"IPC 1 / IPC 10: {pair('protovar', std=True)}, {generative}, {pair('random_real')}, {pair('herding')}; "
        f"full_data {arms['full_data']['acc_full']:.3f}, teacher {arms['teacher']['acc_full']:.3f}. "
        f"{len(result['claims']) - len(failed)} of issue 22's {len(result['claims'])} claims hold"
        f"{' (failing: ' + ', '.join(failed) + ')' if failed else ''}. Tokenizer: test MSE "
        f"{tokenizer['recon_mse']:.4f} (< {MAX_MSE} {verdict(tokenizer['recon_mse'], MAX_MSE, above=False)}), "
        f"codebook usage {100 * tokenizer['codebook_usage']:.1f}% (>= {100 * MIN_USAGE:.0f}% "
        f"{verdict(tokenizer['codebook_usage'], MIN_USAGE)}); VAR teacher-forced scale-8 code accuracy "
        f"{tf_acc:.3f} (>= 0.40 {verdict(tf_acc, 0.40)})."
    )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="step", required=True)
    p = sub.add_parser("gate", help="validation MSE and codebook usage of an exported tokenizer (exit 1 if missed)")
    p.add_argument("folder")
    p.add_argument("--report-only", action="store_true", help="print, never exit 1 (toy fits)")
    p = sub.add_parser("pin", help="copy an export into hub_cards/NAME and write its pins into the registry")
    p.add_argument("name", choices=["protovar.fmnist", "protovar.tokenizer", "protovar.teacher"])
    p.add_argument("--from", dest="source", default=None, help="exported folder (default: re-pin the mirror)")
    sub.add_parser("distilled", help="export the seed-0 distilled sets into hub_cards/protovar.fmnist, re-pin")
    p = sub.add_parser("summary", help="print the card numbers the registry notes cite")
    p.add_argument("--metrics", default=None, help="an eval JSON (default: hub_cards/protovar.fmnist/metrics.json)")
    args = parser.parse_args(argv)
    if args.step == "gate":
        gate(args.folder, enforce=not args.report_only)
    elif args.step == "pin":
        pin(args.name, args.source)
    elif args.step == "distilled":
        distilled()
    else:
        summary(args.metrics)


if __name__ == "__main__":
    sys.exit(main())
