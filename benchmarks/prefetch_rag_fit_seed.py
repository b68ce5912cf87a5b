"""Train ``prefetch_rag``'s recipe for one evaluation seed and store it where ``zoo eval prefetch_rag`` looks for it
(``ZOO_PREFETCH_RAG_FITS``), so the fit (~10 min) and that seed's decoding (~9 min) fit two locked slots:

    export ZOO_PREFETCH_RAG_FITS=/tmp/prefetch_rag_fits ZOO_PREFETCH_RAG_EVAL_CACHE=/tmp/prefetch_rag_eval
    flock /tmp/zoo-cpu.lock .venv/bin/python benchmarks/prefetch_rag_fit_seed.py 1
    flock /tmp/zoo-cpu.lock .venv/bin/python benchmarks/eval_pieces.py prefetch_rag --arms prefetch --seeds 1

The fit is the harness's own (``zoo._eval.Run.load``: the recipe with the seed keys set), stored under the same key
the evaluation computes (seed, recipe text, overrides), so a changed recipe is never read back.
"""

from __future__ import annotations

import sys
import time


def main() -> None:
    import logging
    import os

    from zoo._eval import Run, paper_arms
    from zoo.prefetch_rag import evaluate as E

    seed = int(sys.argv[1])
    if not os.environ.get(E.FITS_ENV):
        raise SystemExit(f"set {E.FITS_ENV} to the folder that keeps the fits")
    logging.getLogger("lightning.pytorch").setLevel(logging.WARNING)
    run = Run(paper_arms("prefetch_rag"), E.PROTOCOL, seed, E.PROTOCOL.resolve())
    if run.uses_published(E.METHOD):
        raise SystemExit(f"seed {seed} uses the published weights: nothing to fit")
    start = time.perf_counter()
    path = E.store_fit(run)
    print(f"seed {seed}: fit stored in {path} ({time.perf_counter() - start:.0f} s)")


if __name__ == "__main__":
    main()
