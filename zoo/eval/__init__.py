"""``zoo eval``: the one evaluation harness every paper's claim runs through.

A paper's ``evaluate.py`` declares *what* is measured as one :class:`Protocol`; this package owns *how*: seeds,
pieces (arm, seed), loading or training an arm, settings overrides, caching, stored fits, worker processes,
timing, resumption, aggregation over seeds, claims, the published pieces and the cards. A paper writes::

    from zoo.eval import Arm, Claim, Protocol, Setting, Tuning, beats

    def score(arm, model, run):                      # an arm the harness loads (published) or trains
        return {"accuracy": accuracy(model, run.settings["test_limit"])}

    def prior(run):                                  # an arm without a model
        return {"accuracy": majority_accuracy(run.seed)}

    def claims(result):
        return [beats(result, "accuracy", "fedgr", "fedavg", margin=0.05),
                beats(result, "accuracy", "fedgr", "reference_prior", margin=0.3)]

    PROTOCOL = Protocol(
        method="fedgr",                                               # the entry registered with arm="fedgr"
        baselines=("fedavg",),
        ablations=(Arm("fedgr_no_sieve", base="fedgr", overrides=("--model.init_args.fedgr.sieve=false",)),),
        references=(Arm("reference_prior", measure=prior),),
        settings={"test_limit": Setting(10000, "test images scored", minimum=1)},
        tuning={"fedgr": Tuning("validation", {"lr": [0.01, 0.05]}, 2, "chosen on the clients' validation split")},
        score=score,
        claims=claims,
    )

See :mod:`zoo.eval.protocol` (declarations), :mod:`zoo.eval.run` (what a piece sees), :mod:`zoo.eval.claims`,
:mod:`zoo.eval.engine` (the harness), :mod:`zoo.eval.published` (cards) and :mod:`zoo.eval.reproduce`.
"""

from __future__ import annotations

from zoo.eval.claims import (
    KINDS,
    MIN_SEEDS,
    Claim,
    beats,
    claims_table,
    mean_interval,
    paired_gains,
    per_seed_values,
    ratio_of_means,
    reaches,
    rounded,
    std,
)
from zoo.eval.protocol import Arm, Protocol, Setting, Shared, Step, Tuning
from zoo.eval.run import Run

__all__ = [
    "KINDS",
    "MIN_SEEDS",
    "Arm",
    "Claim",
    "Protocol",
    "Run",
    "Setting",
    "Shared",
    "Step",
    "Tuning",
    "beats",
    "claims_table",
    "mean_interval",
    "paired_gains",
    "per_seed_values",
    "ratio_of_means",
    "reaches",
    "rounded",
    "score_pretrained",
    "std",
]


def score_pretrained(name: str, limit: int | None = None) -> dict[str, float]:
    """Load an entry's published weights and score them with its protocol's ``score_pretrained``.

    Args:
        name: Registry name.
        limit: Score only the first ``limit`` test items (a small slice), if the paper supports it.
    """
    import zoo
    from zoo._errors import ZooError
    from zoo.eval.engine import evaluation

    ev = evaluation(name)
    if ev.protocol.score_pretrained is None:
        raise ZooError(f"{ev.entry.name}'s evaluation defines no score_pretrained")
    return ev.protocol.score_pretrained(zoo.load(ev.entry.name, pretrained=True), limit=limit)
