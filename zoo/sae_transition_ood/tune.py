"""Validation-only tuning of every arm, per ID setting: ``python -m zoo.sae_transition_ood.tune``.

Each ID setting's validation texts are scored against the validation OOD domain (WordNet glosses); the test
split is not read. SAEs are trained with seed 0 for each ``k_sae`` of the grid (the recipe's other training
arguments). Every arm gets at least the method's number of trials; the winners, the grids and every trial's
validation AUROC go to ``zoo/sae_transition_ood/tuning.json``, which the evaluation reads. ``k_sae`` is the
spec's k = 32 (a grid of one: the earlier 2-epoch tuning over {16, 32} chose 32 in every setting, and each
further value costs one SAE training per setting). The SAE-free arms' trials depend only on the cached MiniLM
features; trials already in the previous record (same parameters) are carried over (``reused_trials``).
``transition_lr_other_id`` (issue 66) is the method's NLL minus ``weight`` times a background transition model's,
counted on the other ID settings' train texts with the same SAEs: a score that does not reward generic text.
"""

from __future__ import annotations

import itertools
import json
import time
from pathlib import Path

import numpy as np

from zoo.sae_transition_ood import arms as A
from zoo.sae_transition_ood import domains as D
from zoo.sae_transition_ood.detector import auroc, cached_stack
from zoo.sae_transition_ood.features import default_cache_dir

RECIPE = "recipes/sae_transition_ood/docstrings.yaml"
TUNING_FILE = Path(__file__).with_name("tuning.json")
FEATURES_KEY = {"tokens_per_text": 20}  # the MiniLM feature cache the trials were scored on
LAYERS = list(range(7))
GRIDS = {
    # k_sae: the spec's k = 32. top_k 1 is the smallest possible K and 32 = k_sae the largest; alpha -> 0 is an
    # asymptote (the NLL becomes -log(alpha) times the number of unseen transitions), so 1e-6 sits at its limit.
    "transition": {"k_sae": [32], "top_k": [1, 2, 4, 8, 16, 32], "alpha": [1e-6, 1e-4, 1e-2, 1.0]},
    # the method minus weight x a background transition model counted on the other ID settings' train texts
    "transition_lr_other_id": {
        "top_k": [1, 2, 4, 8, 16],
        "alpha": [1e-6, 1e-4, 1e-2, 1.0, 100.0],
        "weight": [0.25, 0.5, 1.0],
    },
    "multi_layer_unigram": {"top_k": [2, 4, 8, 16, 32], "alpha": [1e-6, 1e-4, 1e-2, 0.1, 1.0]},  # the method's SAEs
    "single_layer": {"layer": LAYERS, "top_k": [4, 8, 16, 32]},  # SAEs and alpha: the transition arm's
    "raw_transition": {"top_k": [2, 4, 8, 16, 32], "alpha": [1e-6, 1e-4, 1e-2, 0.1, 1.0]},  # of 384 units
    "mahalanobis": {"layer": LAYERS, "pool": ["mean", "max"], "normalise": [False, True]},
    "knn": {"layer": LAYERS, "k": [1, 5, 10, 50]},
    "energy": {"layer": LAYERS, "C": [0.001, 0.01, 0.1, 1.0]},
}
SAE_ARMS = ("transition", "transition_lr_other_id", "multi_layer_unigram", "single_layer", "raw_transition")
SAE_FREE_ARMS = ("mahalanobis", "knn", "energy")  # read only the MiniLM features: independent of the SAEs


def recipe_train_args() -> dict:
    """The SAE training arguments of the recipe (the single source): epochs, batch, lr, aux-k, sample size.

    The tuning and the evaluation train their SAEs outside Lightning (:func:`~.detector.cached_stack`) with these.
    """
    import yaml

    from zoo._recipes import resolve_recipe

    with open(resolve_recipe(RECIPE)) as handle:
        recipe = yaml.safe_load(handle)
    model, data = recipe["model"]["init_args"], recipe["data"]["init_args"]
    return {
        "features": model.get("features", 1024),
        "train_tokens": data.get("train_tokens", 40_000),
        "epochs": recipe["trainer"]["max_epochs"],
        "batch_size": data.get("batch_size", 128),
        "lr": model.get("lr", 3e-3),
        "aux_k": model.get("aux_k", 256),
        "aux_coef": model.get("aux_coef", 1 / 32),
        "dead_after": model.get("dead_after", 10_000),
        "tied": model.get("tied", False),
        "init": model.get("init", "data"),
        "schedule": model.get("lr_schedule", "decay"),
    }


def trials(arm: str) -> int:
    return int(np.prod([len(values) for values in GRIDS[arm].values()]))


def _grid(arm: str):
    keys = list(GRIDS[arm])
    for values in itertools.product(*(GRIDS[arm][k] for k in keys)):
        yield dict(zip(keys, values, strict=True))


def _key(params: dict) -> str:
    return json.dumps({k: v for k, v in params.items() if k != "auroc"}, sort_keys=True)


def background_groups(id_domain: str) -> list[tuple[str, str]]:
    """The background texts of ``transition_lr_other_id``: the other ID settings' train splits (never a test split)."""
    return [(other, "train") for other in D.ID_DOMAINS if other != id_domain]


def _val_auroc(scores: dict, id_domain: str) -> float:
    return auroc(scores[(id_domain, "validation")], scores[(D.VALIDATION_OOD, "validation")])


def tune_setting(features, id_domain: str, train_args: dict, previous: dict | None = None) -> dict:
    """Every arm's grid on one ID setting's validation split; returns {arm: {"best", "auroc", "trials"}}.

    ``previous``: an earlier record of this setting; the trials of the SAE-free arms (:data:`SAE_FREE_ARMS`,
    deterministic functions of the cached MiniLM features) whose parameters it holds are taken from it instead
    of being recomputed.
    """
    groups = [(id_domain, "validation"), (D.VALIDATION_OOD, "validation")]
    train_tokens, _ = features.token_slice(id_domain, "train")
    record: dict = {arm: {"trials": []} for arm in GRIDS}
    scorers = {}
    for k_sae in GRIDS["transition"]["k_sae"]:
        key = f"{id_domain}/train"
        stack, quality = cached_stack(train_tokens, key, default_cache_dir(), k_sae=k_sae, seed=0, **train_args)
        record.setdefault("sae_quality", {})[str(k_sae)] = quality
        scorers[k_sae] = A.SAEScorer(features, stack, id_domain, groups, 32, 32, background_groups(id_domain))
    for params in _grid("transition"):
        value = _val_auroc(scorers[params["k_sae"]].transition(params["top_k"], params["alpha"]), id_domain)
        record["transition"]["trials"].append({**params, "auroc": value})
    best = max(record["transition"]["trials"], key=lambda t: t["auroc"])
    for params in _grid("transition_lr_other_id"):
        scores = scorers[best["k_sae"]].transition_ratio(params["top_k"], params["alpha"], params["weight"])
        record["transition_lr_other_id"]["trials"].append({**params, "auroc": _val_auroc(scores, id_domain)})
    for params in _grid("multi_layer_unigram"):
        value = _val_auroc(scorers[best["k_sae"]].unigram(params["top_k"], params["alpha"]), id_domain)
        record["multi_layer_unigram"]["trials"].append({**params, "auroc": value})
    for params in _grid("single_layer"):
        scores = scorers[best["k_sae"]].unigram(params["top_k"], best["alpha"], [params["layer"]])
        record["single_layer"]["trials"].append({**params, "auroc": _val_auroc(scores, id_domain)})
    for params in _grid("raw_transition"):
        scores = scorers[best["k_sae"]].transition(params["top_k"], params["alpha"], raw=True)
        record["raw_transition"]["trials"].append({**params, "auroc": _val_auroc(scores, id_domain)})
    reused = []
    for arm in SAE_FREE_ARMS:
        done = {_key(t): t for t in (previous or {}).get(arm, {}).get("trials", [])}
        score = getattr(A, arm)  # A.mahalanobis, A.knn, A.energy
        for params in _grid(arm):
            if _key(params) in done:  # a deterministic function of the cached MiniLM features: carried over
                record[arm]["trials"].append(done[_key(params)])
                continue
            scores = score(features, id_domain, groups, **params)
            record[arm]["trials"].append({**params, "auroc": _val_auroc(scores, id_domain)})
        if done:
            reused.append(arm)
    record["reused_trials"] = reused
    for arm in GRIDS:
        winner = max(record[arm]["trials"], key=lambda t: t["auroc"])  # first of equals: the grid's order
        record[arm]["best"] = {k: v for k, v in winner.items() if k != "auroc"}
        record[arm]["auroc"] = winner["auroc"]
    record["single_layer"]["best"].update(k_sae=best["k_sae"], alpha=best["alpha"])
    record["multi_layer_unigram"]["best"].update(k_sae=best["k_sae"])
    record["raw_transition"]["best"].update(k_sae=best["k_sae"])
    record["transition_lr_other_id"]["best"].update(k_sae=best["k_sae"])  # its normaliser comes from that stack
    return record


def main(argv: list[str] | None = None) -> None:
    """Tune the given ID settings (default all) and merge them into ``tuning.json``."""
    import argparse

    import torch

    from zoo.sae_transition_ood.features import build_features

    parser = argparse.ArgumentParser(description="validation-only tuning of sae_transition_ood's arms")
    parser.add_argument("domains", nargs="*", help=f"ID settings (default: {' '.join(D.ID_DOMAINS)})")
    parser.add_argument("--force", action="store_true", help="re-tune settings already in tuning.json")
    args = parser.parse_args(argv)
    args.domains = [D.check_domain(d, D.ID_DOMAINS) for d in args.domains] or list(D.ID_DOMAINS)
    torch.set_num_threads(2)
    features = build_features()
    train_args = recipe_train_args()
    result = json.loads(TUNING_FILE.read_text()) if TUNING_FILE.is_file() else {}
    previous: dict = {}
    if result.get("features") in (None, FEATURES_KEY):
        previous = result.get("settings", {})  # SAE-free trials stay valid while their features do (matched by params)
    if result.get("train_args") not in (None, train_args) or result.get("grids") not in (None, GRIDS):
        result = {}  # another recipe or grid: start over
    result.update(grids=GRIDS, trials={arm: trials(arm) for arm in GRIDS}, train_args=train_args, features=FEATURES_KEY)
    result.setdefault("settings", {})
    result.setdefault("seconds", {})
    for id_domain in args.domains:
        if id_domain in result["settings"] and not args.force:
            print(f"{id_domain}: already tuned (pass --force to redo)", flush=True)
            continue
        started = time.perf_counter()
        print(f"tuning {id_domain}", flush=True)
        result["settings"][id_domain] = tune_setting(features, id_domain, train_args, previous.get(id_domain))
        result["seconds"][id_domain] = round(time.perf_counter() - started, 1)
        TUNING_FILE.write_text(json.dumps(result, indent=1) + "\n")
        best = {arm: result["settings"][id_domain][arm]["best"] for arm in GRIDS}
        print(json.dumps({"seconds": result["seconds"][id_domain], **best}), flush=True)


if __name__ == "__main__":
    main()
