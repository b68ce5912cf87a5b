"""Build the shipped SOCRATES-mini artifacts: ``python -m zoo.aporia.build [--seeds 0 1 2] [--out FILE]``.

The pipeline: load the published generator LMs (sha256-verified), sample, label and embed one dataset per
seed (:func:`zoo.aporia.sampling.build_socrates_mini`), write each into its own ``.npz``
(:func:`zoo.aporia.artifact.save_artifact`; ``hub_cards/aporia.socrates_mini/socrates_mini_seed<S>.npz``, one
file per seed keeps each under the 10 MB file limit) and print the sha256 digests with per-generator
statistics. The digests go into the registry pins (``zoo/aporia/pins.json``), which
:func:`zoo.aporia.artifact.published` checks on every load. ``--out FILE`` writes every dataset into one file.

``--merge FILE ...`` adds the datasets of earlier artifacts (bit for bit) to those built now, so seeds can be
built in separate runs and written out together: ``--seeds --merge a.npz b.npz`` rewrites their datasets into
the per-seed files without sampling anything.
"""

from __future__ import annotations

import argparse
import json
import time
from dataclasses import replace

import zoo
from zoo.aporia.artifact import PUBLISHED_SEEDS, artifact_path, load_artifact, save_artifact
from zoo.aporia.cache import load_generators
from zoo.aporia.dataset import SocratesConfig
from zoo.aporia.sampling import build_socrates_mini


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m zoo.aporia.build", description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="*", default=list(PUBLISHED_SEEDS), help="dataset seeds to build")
    parser.add_argument("--merge", nargs="+", default=[], metavar="FILE", help="also keep these artifacts' datasets")
    parser.add_argument("--out", default=None, help="output .npz (default: the detector's mirror folder)")
    parser.add_argument("--prompts-per-model", type=int, default=None, help="pairs per generator (default 60)")
    parser.add_argument(
        "--candidates-per-model", type=int, default=None, help="prompts (fact, question template) probed per generator"
    )
    parser.add_argument(
        "--generator", action="append", default=[], metavar="NAME=DIR",
        help="use the exported folder DIR for generator NAME (e.g. before it is pinned); repeatable",
    )  # fmt: skip
    args = parser.parse_args(argv)
    config = SocratesConfig()
    if args.prompts_per_model:
        config = replace(config, prompts_per_model=args.prompts_per_model)
    if args.candidates_per_model:
        config = replace(config, candidates_per_model=args.candidates_per_model)
    kept = {}
    for path in args.merge:
        for seed, dataset in load_artifact(path, renormalise=False).items():
            if seed in kept or seed in args.seeds:
                parser.error(f"dataset seed {seed} comes twice (--merge {path})")
            kept[seed] = dataset
    folders = dict(item.split("=", 1) for item in args.generator)
    unknown = sorted(set(folders) - set(config.generators))
    if unknown:
        parser.error(f"--generator {', '.join(unknown)}: not one of {', '.join(config.generators)}")
    datasets, started = {}, time.perf_counter()
    if args.seeds:
        generators = load_generators(tuple(n for n in config.generators if n not in folders))
        generators |= {name: zoo.load(folder) for name, folder in folders.items()}
        generators = {name: generators[name] for name in config.generators}
        for seed in args.seeds:
            datasets[seed] = build_socrates_mini(replace(config, seed=seed), generators)
            print(json.dumps({"seed": seed, "pairs": len(datasets[seed]), "models": datasets[seed].models}, indent=1))
    datasets |= _first_wins(kept)
    if args.out:
        written = {str(args.out): save_artifact(datasets, args.out)}
    else:
        written = {str(artifact_path(s)): save_artifact({s: d}, artifact_path(s)) for s, d in sorted(datasets.items())}
    print(json.dumps({"sha256": written, "build_s": round(time.perf_counter() - started, 1)}, indent=1))
    return 0


def _first_wins(kept: dict) -> dict:
    """The merged datasets in reverse order: a text shared by several keeps the embedding of the first listed
    (save_artifact stores one vector per distinct text, the last written), so the first file stays bit for bit."""
    return dict(reversed(list(kept.items())))


if __name__ == "__main__":
    raise SystemExit(main())
