"""The card figure: one helper sets up, labels and saves it, so a paper's ``plot`` draws only its data.

A paper's ``evaluate.py`` may define ``plot(result, axes)``, drawing on ``PROTOCOL.panels`` matplotlib axes;
:func:`card_figure` creates them, titles the figure with the evaluation and its seeds, refuses a panel
without axis labels, and saves the PNG. :func:`bar_panel` is the common panel: one bar per arm (mean over
seeds, with the sample std as error bar and each seed as a dot), the method highlighted.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from zoo._errors import ZooError

METHOD_COLOUR = "tab:red"
REFERENCE_COLOUR = "tab:blue"
OTHER_COLOUR = "tab:gray"
MAX_COLUMNS = 3


@contextmanager
def card_figure(result: Mapping[str, Any], path: str | Path, panels: int = 1, width: float = 4.2) -> Iterator[list]:
    """Yield ``panels`` axes, three to a row; on exit check every drawn axis is labelled, then save to ``path``.

    Args:
        result: The eval result (its name and seeds title the figure).
        path: Where the PNG goes.
        panels: Number of axes.
        width: Width of one panel in inches.

    Raises:
        ZooError: If a drawn panel lacks an x or y label (tick labels count as an x label).
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    columns = min(panels, MAX_COLUMNS)
    rows = -(-panels // columns)
    fig, grid = plt.subplots(rows, columns, figsize=(width * columns + 0.4, 3.4 * rows), squeeze=False)
    axes = list(grid.flat)
    try:
        yield axes[:panels]
        for index, ax in enumerate(axes):
            if not ax.has_data():
                ax.set_axis_off()
                continue
            has_x = bool(ax.get_xlabel()) or any(t.get_text() for t in ax.get_xticklabels())
            if not (has_x and ax.get_ylabel()):
                raise ZooError(f"figure of {result['name']}: panel {index} needs an x and a y label")
            if ax.get_legend() is None:
                handles, _ = ax.get_legend_handles_labels()
                if not handles:
                    raise ZooError(
                        f"figure of {result['name']}: panel {index} needs a legend (label what it draws, "
                        "or draw it with bar_panel, which adds one)"
                    )
                ax.legend(fontsize=7)
        fig.suptitle(f"zoo eval {result['name']}: seeds {result['seeds']}", fontsize=10)
        fig.tight_layout()
        fig.savefig(path, dpi=110)
    finally:
        plt.close(fig)


def arm_colour(result: Mapping[str, Any], arm: str, highlight: str | None = None) -> str:
    """Red for the highlighted arm (default: the method), blue for reference arms, grey otherwise."""
    settings = result["settings"]
    if arm == (highlight or settings.get("method")):
        return METHOD_COLOUR
    return REFERENCE_COLOUR if arm in settings.get("references", []) else OTHER_COLOUR


def bar_panel(
    ax,
    result: Mapping[str, Any],
    metric: str,
    arms: Sequence[str] | None = None,
    ylabel: str | None = None,
    highlight: str | None = None,
) -> None:
    """One bar per arm for ``metric``: mean, sample-std error bar, one dot per seed.

    Args:
        ax: The matplotlib axis.
        result: The eval result.
        metric: The metric key.
        arms: Arms to show, in order (default: every arm that reports the metric).
        ylabel: Label of the y axis (default: the metric key).
        highlight: The arm drawn in red (default: the method).
    """
    names = [arm for arm in (arms or result["arms"]) if metric in result["arms"].get(arm, {})]
    means = [result["arms"][arm][metric] for arm in names]
    errors = [result["arms"][arm].get(f"{metric}_std", 0.0) for arm in names]
    colours = [arm_colour(result, arm, highlight) for arm in names]
    ax.bar(range(len(names)), means, yerr=errors, color=colours, capsize=3)
    for index, arm in enumerate(names):
        dots = [scores[metric] for scores in result["per_seed"].get(arm, {}).values() if metric in scores]
        ax.scatter([index] * len(dots), dots, color="black", s=8, zorder=3)
    ax.set_xticks(range(len(names)), names, rotation=35, ha="right", fontsize=8)
    ax.set_xlabel("arm")
    ax.set_ylabel(ylabel or metric)
    role_legend(ax, result, names, highlight)


def role_legend(ax, result: Mapping[str, Any], arms: Sequence[str], highlight: str | None = None) -> None:
    """A legend of the colours :func:`arm_colour` gave ``arms`` (and of the per-seed dots)."""
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

    settings = result["settings"]
    highlighted = highlight or settings.get("method")
    labels = {METHOD_COLOUR: f"{highlighted} (this card)" if highlight else "method"}
    labels[REFERENCE_COLOUR] = "reference (no learning)"
    labels[OTHER_COLOUR] = "baseline / ablation"
    used = [
        c
        for c in (METHOD_COLOUR, REFERENCE_COLOUR, OTHER_COLOUR)
        if any(arm_colour(result, a, highlight) == c for a in arms)
    ]
    handles = [Patch(color=c, label=labels[c]) for c in used]
    handles.append(Line2D([], [], color="black", marker="o", linestyle="", markersize=3, label="one seed"))
    ax.legend(handles=handles, fontsize=7)


def default_plot(result: Mapping[str, Any], path: str | Path, metrics: Sequence[str] = ()) -> None:
    """Bar panels of ``metrics`` (default: the method's first three metrics)."""
    method = result["settings"].get("method")
    keys = list(metrics) or [k for k in result["arms"].get(method, {}) if not k.endswith("_std") and k != "n_seeds"][:3]
    with card_figure(result, path, panels=max(1, len(keys))) as axes:
        for ax, key in zip(axes, keys):
            bar_panel(ax, result, key)
