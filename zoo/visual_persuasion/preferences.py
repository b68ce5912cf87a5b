"""Revealed preferences: the choice model over logged contests, the chooser's true sensitivities, autointerp.

* :func:`revealed_preferences` fits ``P(first chosen) = logistic(c + beta . (a(first) - a(second)))`` over every
  logged judge call with statsmodels' binomial GLM and standard errors clustered by image pair
  (``cov_type='cluster'``). The attributes are measured on the edited images, never read from edit parameters.
* :func:`true_sensitivities` measures ``dU/da_k`` through the chooser: edits of every item (single-parameter sweeps
  or random plausible edits), then least squares of the change in the judges' mean utility on the change in the
  six measured attributes. Which edits is chosen on the validation items by split-half reliability
  (``python -m zoo.visual_persuasion.tune --probe``; ``tuning.json["sensitivity"]``).
* :func:`autointerp` renders the top attributes by ``|beta|`` as themes, and groups the decisive contests'
  attribute differences with Ward clustering (``scipy.cluster.hierarchy``), one theme per cluster: the offline
  stand-in for describing pairs with an LLM and clustering the descriptions' embeddings.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from zoo.visual_persuasion.attributes import ATTRIBUTES, THEMES, measure
from zoo.visual_persuasion.editor import IDENTITY_UNIT, PARAMETERS, Editor, from_unit


def revealed_preferences(observations: Sequence) -> dict:
    """Binomial GLM of the choice on attribute differences, pair-clustered standard errors.

    Args:
        observations: :class:`~zoo.visual_persuasion.optimise.Observation` rows.

    Returns:
        ``{"coef": (6,), "se": (6,), "position_bias": float, "n": int, "pairs": int}``; zeros when there are
        too few observations or no variation to fit.
    """
    import statsmodels.api as sm

    n = len(observations)
    empty = {"coef": np.zeros(len(ATTRIBUTES)), "se": np.zeros(len(ATTRIBUTES)), "position_bias": 0.0, "n": n,
             "pairs": 0}  # fmt: skip
    if n < 2 * len(ATTRIBUTES):
        return empty
    x = np.stack([o.delta for o in observations])
    y = np.array([o.chose_first for o in observations], dtype=np.float64)
    _, groups = np.unique([o.pair for o in observations], return_inverse=True)
    if y.min() == y.max() or np.linalg.matrix_rank(x) < x.shape[1]:
        return empty
    model = sm.GLM(y, sm.add_constant(x, has_constant="add"), family=sm.families.Binomial())
    try:
        fit = model.fit(cov_type="cluster", cov_kwds={"groups": groups})
    except (np.linalg.LinAlgError, ValueError):
        return empty
    params, bse = np.asarray(fit.params), np.asarray(fit.bse)
    if not np.all(np.isfinite(params)):
        return empty
    return {"coef": params[1:], "se": np.nan_to_num(bse[1:]), "position_bias": float(params[0]), "n": n,
            "pairs": int(groups.max() + 1)}  # fmt: skip


def sweep_units(differences=(0.05, 0.1)) -> list[np.ndarray]:
    """Unit parameter vectors of the single-parameter sweeps around the identity (inside the bounds)."""
    units = []
    for i in range(len(PARAMETERS)):
        for d in differences:
            for sign in (-1.0, 1.0):
                unit = IDENTITY_UNIT.copy()
                unit[i] += sign * d
                if 0.0 <= unit[i] <= 1.0:
                    units.append(unit)
    return units


#: The ways of measuring the chooser's true sensitivities compared on the validation items (``tune.py --probe``).
SENSITIVITY_METHODS = {
    "sweep_small": {"method": "sweep", "differences": (0.05, 0.1)},
    "sweep_multi": {"method": "sweep", "differences": (0.05, 0.1, 0.2, 0.3)},
    "random_edits": {"method": "random", "edits_per_item": 48},
}


def _edits(method: str, editor: Editor, item: np.ndarray, rng, differences, edits_per_item) -> list[np.ndarray]:
    if method == "sweep":
        return [editor.edit(item, from_unit(unit)) for unit in sweep_units(differences)]
    if method == "random":
        return [editor.random_plausible(item, rng) for _ in range(edits_per_item)]
    raise ValueError(f"unknown sensitivity method {method!r}; 'sweep' or 'random'")


def true_sensitivities(
    utility,
    editor: Editor,
    items: np.ndarray,
    attribute_mean: np.ndarray,
    attribute_std: np.ndarray,
    method: str = "sweep",
    differences=(0.05, 0.1),
    edits_per_item: int = 32,
    seed: int = 0,
) -> np.ndarray:
    """The chooser's ``dU/da_k`` (k over the six attributes, z-scored): least squares of the change in the
    judges' mean utility on the change in the six measured attributes, over edits of every item.

    Args:
        utility: ``images -> (N,)`` mean utility of the optimisation judges.
        editor: The editor.
        items: The items ``(N, H, W, 3)``.
        attribute_mean: z-score means of the 7 measurements.
        attribute_std: z-score standard deviations.
        method: ``"sweep"``: single-parameter sweeps of ``+-differences`` (unit coordinates) around the identity
            (raw edits: the sweep is a measurement, not a proposal); ``"random"``: ``edits_per_item`` random
            plausible edits (every parameter uniform in its bounds, then the SSIM floor), the heads' training
            distribution, so the slope is the chooser's linear response over the plausible edits.
        differences: Sweep steps (``"sweep"``).
        edits_per_item: Random edits per item (``"random"``).
        seed: Seed of the random edits.
    """
    rng = np.random.default_rng([seed, 1418])
    images, deltas, owners = [], [], []
    for index, item in enumerate(items):
        base = (measure(item, item) - attribute_mean) / attribute_std
        images.append(item)
        owners.append((index, None))
        for edited in _edits(method, editor, item, rng, differences, edits_per_item):
            images.append(edited)
            deltas.append(((measure(edited, item) - attribute_mean) / attribute_std - base)[:6])
            owners.append((index, len(deltas) - 1))
    values = np.asarray(utility(images))
    base_value = {}
    changes = np.zeros(len(deltas))
    for (index, row), value in zip(owners, values, strict=True):
        if row is None:
            base_value[index] = value
        else:
            changes[row] = value - base_value[index]
    slopes, *_ = np.linalg.lstsq(np.stack(deltas), changes, rcond=None)
    return slopes


def autointerp(observations: Sequence, coef: np.ndarray, clusters: int = 3) -> dict:
    """Themes of the revealed preferences.

    Args:
        observations: Logged judge calls.
        coef: The GLM coefficients (six).
        clusters: Ward clusters of the chosen-minus-rejected attribute differences.

    Returns:
        ``{"top_themes": [3 strings], "clusters": [{"size", "theme", "centroid"}...]}``.
    """
    from scipy.cluster.hierarchy import fcluster, linkage

    order = np.argsort(-np.abs(coef))[:3]
    top = [THEMES[(ATTRIBUTES[k], 1 if coef[k] >= 0 else -1)] for k in order if coef[k] != 0]
    chosen = np.stack([o.delta if o.chose_first else -o.delta for o in observations]) if observations else None
    groups = []
    if chosen is not None and len(chosen) > clusters:
        sample = chosen[np.linspace(0, len(chosen) - 1, min(len(chosen), 2000)).astype(int)]
        labels = fcluster(linkage(sample, method="ward", metric="euclidean"), t=clusters, criterion="maxclust")
        for label in np.unique(labels):
            centroid = sample[labels == label].mean(axis=0)
            k = int(np.argmax(np.abs(centroid)))
            groups.append({"size": int((labels == label).sum()),
                           "theme": THEMES[(ATTRIBUTES[k], 1 if centroid[k] >= 0 else -1)],
                           "centroid": [round(float(v), 3) for v in centroid]})  # fmt: skip
    return {"top_themes": top, "clusters": groups}
