"""``zoo eval sae_transition_ood``: the transition detector against its ablations and black-box baselines.

Per seed and ID setting, the four SAE arms share one SAE stack; every arm scores the ID test texts against each other
test domain's (``auroc_<id>_vs_<ood>``), averaged into ``auroc_mean``, ``fpr95_mean`` and ``auroc_near_mean``.
"""

from __future__ import annotations

import json

import numpy as np

from zoo.eval import Claim, Protocol, Setting, Shared, Step, Tuning, beats, per_seed_values
from zoo.sae_transition_ood import domains as D
from zoo.sae_transition_ood.tune import GRIDS, SAE_FREE_ARMS, TUNING_FILE, recipe_train_args, trials

PUBLISHED_ID = "docstrings"
ARMS = ("transition", "single_layer", "multi_layer_unigram", "raw_transition", *SAE_FREE_ARMS)
PAIRS = [(i, o) for i in D.ID_DOMAINS for o in D.TEST_DOMAINS if o != i]
TEST_GROUPS = [(d, "test") for d in D.TEST_DOMAINS]
_TUNED = json.loads(TUNING_FILE.read_text())["settings"] if TUNING_FILE.is_file() else {}
#: Every arm's hyperparameters chosen on validation, by ID setting and arm (``tuning.json``, :mod:`.tune`).
CHOSEN = {id_domain: {arm: record[arm]["best"] for arm in GRIDS} for id_domain, record in _TUNED.items()}
_NOTE = "ID validation texts vs WordNet glosses (validation OOD), per ID setting, SAEs of seed 0; chosen: "
TUNING = {
    arm: Tuning("validation", GRIDS[arm], trials(arm), _NOTE + json.dumps({d: c[arm] for d, c in CHOSEN.items()}))
    for arm in GRIDS
}


def _sae_arms(run, features, id_domain: str, best: dict) -> dict[str, dict]:
    """The SAE arms' test scores for one seed and ID setting (SAEs trained here, or the published ones)."""
    import torch

    from zoo.sae_transition_ood import arms as A
    from zoo.sae_transition_ood.detector import cached_stack
    from zoo.sae_transition_ood.features import default_cache_dir

    torch.set_num_threads(2)
    published = None
    if id_domain == PUBLISHED_ID and run.uses_published("transition") and run.settings["tokens_per_text"] == 20:
        published = run.load("transition")
        stack = published.saes
    else:
        tokens, _ = features.token_slice(id_domain, "train")
        args = {**recipe_train_args(), "k_sae": best["transition"]["k_sae"], "seed": run.seed}
        stack, quality = cached_stack(tokens, f"{id_domain}/train", default_cache_dir(), **args)
        run.extras[f"sae_quality_{id_domain}"] = quality
    scorer = A.SAEScorer(features, stack, id_domain, TEST_GROUPS, 16, 32)
    if published is not None:
        transition = scorer.transition_from_counts(published.counts, published.hparams.top_k, published.hparams.alpha)
    else:
        transition = scorer.transition(best["transition"]["top_k"], best["transition"]["alpha"])
    single, multi, raw = best["single_layer"], best["multi_layer_unigram"], best["raw_transition"]
    return {
        "transition": transition,
        "single_layer": scorer.unigram(single["top_k"], single["alpha"], [single["layer"]]),
        "multi_layer_unigram": scorer.unigram(multi["top_k"], multi["alpha"]),  # the transition arm's SAEs
        "raw_transition": scorer.transition(raw["top_k"], raw["alpha"], raw=True),
    }


def _metrics(scores_by_id: dict[str, dict]) -> dict[str, float]:
    from zoo.sae_transition_ood.detector import auroc, fpr_at_95_tpr

    out, fprs = {}, []
    for id_domain, ood in PAIRS:
        scores = scores_by_id[id_domain]
        out[f"auroc_{id_domain}_vs_{ood}"] = auroc(scores[(id_domain, "test")], scores[(ood, "test")])
        fprs.append(fpr_at_95_tpr(scores[(id_domain, "test")], scores[(ood, "test")]))
    out["auroc_mean"] = float(np.mean(list(out.values())))
    out["auroc_near_mean"] = float(np.mean([out[f"auroc_{i}_vs_{o}"] for i, o in D.NEAR_PAIRS]))
    out["fpr95_mean"] = float(np.mean(fprs))
    return out


def measure(run) -> dict[str, dict[str, float]]:
    """Every arm, one seed: its AUROC on every (ID, OOD) test pair of the three ID settings."""
    from zoo.sae_transition_ood import arms as A
    from zoo.sae_transition_ood.features import build_features

    features = build_features(run.settings["tokens_per_text"])
    per_id = {}
    for id_domain in D.ID_DOMAINS:
        best = CHOSEN[id_domain]
        per_id[id_domain] = {
            **{arm: getattr(A, arm)(features, id_domain, TEST_GROUPS, **best[arm]) for arm in SAE_FREE_ARMS},
            **_sae_arms(run, features, id_domain, best),
        }
    return {arm: _metrics({i: per_id[i][arm] for i in D.ID_DOMAINS}) for arm in ARMS}


def claims(result: dict) -> list[Claim]:
    arms = result["arms"]
    text = "transition mean AUROC over the 12 test pairs of the 3 ID settings >= 0.90"
    out = [Claim.at_least("transition_auroc_mean", text, arms["transition"]["auroc_mean"], 0.90, arm="transition")]
    for other in ("single_layer", "multi_layer_unigram"):
        gain = arms["transition"]["auroc_mean"] - arms[other]["auroc_mean"]
        text = f"transition mean AUROC is not below {other}'s (mean over seeds)"
        out.append(Claim.at_least(f"transition_not_below_{other}", text, gain, 0.0, versus=other, arm="transition"))
    best = max(("mahalanobis", "knn"), key=lambda a: arms[a]["auroc_near_mean"])
    near = {f"seed {seed}": value for seed, value in per_seed_values(result, best, "auroc_near_mean").items()}
    text = "the best of mahalanobis and knn scores at most 0.95 mean AUROC on the near pairs (benchmark headroom)"
    out.append(Claim.gate("headroom_near_pairs", text, near, 0.95, at_most=True, arm=best))
    return out + [beats(result, "auroc_mean", "transition", other) for other in ("raw_transition", *SAE_FREE_ARMS)]


def plot(result: dict, axes) -> None:
    from zoo._figures import bar_panel

    bar_panel(axes[0], result, "auroc_mean")


def score_pretrained(module, limit: int | None = None, ood: str = "pyref") -> dict[str, float]:
    """AUROC of a loaded checkpoint: its ID test texts vs ``ood``'s test texts (``limit`` per side), 20 tokens each."""
    from zoo.sae_transition_ood.detector import auroc

    id_domain = module.hparams.id_domain
    id_ids = [c.ids for c in D.chunks(id_domain, "test", limit)]
    ood_ids = [c.ids for c in D.chunks(ood, "test", limit)]
    id_scores = module.score_ids(id_ids, tokens_per_text=20)
    ood_scores = module.score_ids(ood_ids, tokens_per_text=20)
    return {f"auroc_{id_domain}_vs_{ood}": auroc(id_scores, ood_scores)}


PROTOCOL = Protocol(
    method="transition",
    baselines=("single_layer",),
    ablations=("multi_layer_unigram", "raw_transition"),
    references=("mahalanobis", "knn", "energy"),
    shared=(Shared(ARMS, measure),),
    settings={
        "tokens_per_text": Setting(20, "tokens per text kept from the MiniLM pass (SAE sample and scoring)", minimum=1),
    },
    tuning=TUNING,
    claims=claims,
    plot=plot,
    score_pretrained=score_pretrained,
    seed_args=("seed_everything", "model.init_args.seed", "data.init_args.seed"),
    headline=("auroc_mean", "auroc_near_mean"),
    lower_is_better=("fpr95_mean",),
    steps=(
        Step(
            "tune",
            ("python", "-m", "zoo.sae_transition_ood.tune"),
            "validation-only tuning of every arm per ID setting (SAEs of seed 0): writes tuning.json, whose "
            "transition choice the recipe's top_k and alpha copy and which the evaluation reads",
            stage="prepare",
        ),
    ),
)
