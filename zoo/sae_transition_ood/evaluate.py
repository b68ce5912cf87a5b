"""``zoo eval sae_transition_ood``: the transition detector against its ablations and black-box baselines.

Per seed and ID setting, the four SAE arms share one SAE stack; every arm scores the ID test texts against each other
test domain's (``auroc_<id>_vs_<ood>``), averaged into ``auroc_mean``, ``fpr95_mean`` and ``auroc_near_mean``.
"""

from __future__ import annotations

import json

import numpy as np

from zoo.eval import Arm, Claim, Protocol, Setting, Shared, Step, Tuning, beats, per_seed_values
from zoo.sae_transition_ood import domains as D
from zoo.sae_transition_ood import token_unigram as U
from zoo.sae_transition_ood.tune import (
    GRIDS,
    SAE_FREE_ARMS,
    TUNING_FILE,
    background_groups,
    recipe_train_args,
    trials,
)

PUBLISHED_ID = "docstrings"
LR_OTHER_ID = "transition_lr_other_id"
ARMS = ("transition", "single_layer", "multi_layer_unigram", "raw_transition", LR_OTHER_ID, *SAE_FREE_ARMS)
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
TOKEN_UNIGRAM = "reference_token_unigram"
TUNING[TOKEN_UNIGRAM] = Tuning(
    "validation",
    U.GRID,
    len(U.GRID["alpha"]),
    "ID validation texts vs WordNet glosses, per ID setting (python -m zoo.sae_transition_ood.token_unigram, "
    "token_unigram_tuning.json); for docstrings and Wikipedia validation AUROC rises monotonically as alpha -> 0 (the "
    "limit ranks texts by their share of word pieces unseen in training), so the smallest alpha wins; chosen: "
    + json.dumps(U.chosen()),
)


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
    scorer = A.SAEScorer(features, stack, id_domain, TEST_GROUPS, 32, 32, background_groups(id_domain))
    if published is not None:
        transition = scorer.transition_from_counts(published.counts, published.hparams.top_k, published.hparams.alpha)
    else:
        transition = scorer.transition(best["transition"]["top_k"], best["transition"]["alpha"])
    single, multi, raw, ratio = (
        best[a] for a in ("single_layer", "multi_layer_unigram", "raw_transition", LR_OTHER_ID)
    )
    return {
        "transition": transition,
        "single_layer": scorer.unigram(single["top_k"], single["alpha"], [single["layer"]]),
        "multi_layer_unigram": scorer.unigram(multi["top_k"], multi["alpha"]),  # the transition arm's SAEs
        "raw_transition": scorer.transition(raw["top_k"], raw["alpha"], raw=True),
        LR_OTHER_ID: scorer.transition_ratio(ratio["top_k"], ratio["alpha"], ratio["weight"]),
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


#: A likelihood ratio against a WordNet background transition model was measured and not adopted (validation
#: 0.989 against 0.886 via python -m zoo.sae_transition_ood.lr_validation; seed-0 test 0.753 against 0.835):
#: its scorer is in commit 072006a (zoo/sae_transition_ood/evaluate.py), see card.md's Why. The registered
#: ``transition_lr_other_id`` takes its background from the other ID settings' train texts instead (issue 66); a
#: two-sided score |NLL - mean ID validation NLL| lost on validation (benchmarks/sae_transition_ood/
#: typicality_validation.py) and is not registered.


def token_unigram(run) -> dict[str, float]:
    """``reference_token_unigram``: the model-free word-piece unigram NLL (deterministic: no seed enters)."""
    alphas = U.chosen()
    return _metrics({i: U.scores(i, TEST_GROUPS, alphas[i]) for i in D.ID_DOMAINS})


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
    text = "no test pair below 0.55 transition AUROC (the worst pair, mean over seeds)"
    pairs = {f"{i} vs {o}": arms["transition"][f"auroc_{i}_vs_{o}"] for i, o in PAIRS}
    worst = min(pairs, key=pairs.get)
    out.append(Claim.at_least("transition_no_pair_below_055", f"{text}: {worst}", pairs[worst], 0.55, arm="transition"))
    others = ("raw_transition", TOKEN_UNIGRAM, *SAE_FREE_ARMS)
    return out + [beats(result, "auroc_mean", "transition", other) for other in others if other in arms]


def plot(result: dict, axes) -> None:
    from zoo._figures import bar_panel

    bar_panel(axes[0], result, "auroc_mean")
    pair_panel(axes[1], result)


PAIR_ARMS = ("transition", LR_OTHER_ID, "raw_transition", TOKEN_UNIGRAM, "mahalanobis", "knn")


def pair_panel(ax, result: dict, arms: tuple[str, ...] = PAIR_ARMS) -> None:
    """Per-pair test AUROC (mean over seeds) of the method, its ratio variant and its strongest comparisons."""
    names = [arm for arm in arms if arm in result["arms"]]
    width = 0.8 / max(len(names), 1)
    for index, arm in enumerate(names):
        values = [result["arms"][arm][f"auroc_{i}_vs_{o}"] for i, o in PAIRS]
        ax.bar(np.arange(len(PAIRS)) + (index - (len(names) - 1) / 2) * width, values, width, label=arm)
    labels = [f"{i[:4]}/{o[:4]}" + (" *" if (i, o) in D.NEAR_PAIRS else "") for i, o in PAIRS]
    ax.set_xticks(range(len(PAIRS)), labels, rotation=60, ha="right", fontsize=7)
    ax.axhline(0.5, color="grey", lw=0.8, ls="--")
    ax.set_ylim(0.3, 1.3)
    ax.set_xlabel("ID / OOD test pair (* near pair)")
    ax.set_ylabel("AUROC")
    ax.legend(fontsize=6, loc="upper center", ncol=3)


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
    ablations=(
        "multi_layer_unigram",
        "raw_transition",
        Arm(
            LR_OTHER_ID,
            help="the method's NLL minus weight x a background transition model's (other ID settings' train texts)",
        ),
    ),
    references=(
        "mahalanobis",
        "knn",
        "energy",
        Arm(TOKEN_UNIGRAM, measure=token_unigram, help="model-free word-piece unigram NLL of the ID train texts"),
    ),
    shared=(Shared(ARMS, measure),),
    settings={
        "tokens_per_text": Setting(20, "tokens per text kept from the MiniLM pass (SAE sample and scoring)", minimum=1),
    },
    tuning=TUNING,
    claims=claims,
    plot=plot,
    panels=2,
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
