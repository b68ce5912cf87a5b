"""Render a Hub model card (README.md + results figure) from the registry and ``zoo eval``'s metrics.json.

Every number in a card comes from ``hub_cards/<name>/metrics.json``, the file ``zoo eval --card``
writes, and from the training facts that ``ExportPretrained`` stored in config.json. Nothing is
copied from the paper.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from zoo._registry import ModelEntry, get_entry, import_object

FIGURE_FILE = "results.png"
ZOO_BIBTEX = """@software{icml26_zoo,
  title = {icml26-zoo: ICML 2026 papers as tested PyTorch Lightning modules},
  author = {{icml26-zoo contributors}},
  year = {2026},
  url = {https://huggingface.co/icml26-zoo}
}"""


def load_metrics(folder: Path) -> dict[str, Any]:
    """The eval result stored in ``folder/metrics.json``."""
    from zoo._errors import ZooError

    path = folder / "metrics.json"
    if not path.is_file():
        raise ZooError(f"{path} does not exist; run `zoo eval NAME --card` first")
    return json.loads(path.read_text())


def _fmt(value: float) -> str:
    if isinstance(value, int) or (abs(value) >= 1000 and float(value).is_integer()):
        return f"{int(value):,}"
    return f"{value:.4g}"


def results_table(metrics: dict[str, Any], highlight: str | None = None) -> str:
    """Markdown table: one row per arm, one column per metric (union over arms)."""
    arms = metrics["arms"]
    keys: list[str] = []
    for values in arms.values():
        keys += [k for k in values if k not in keys]
    lines = ["| arm | " + " | ".join(keys) + " |", "|---|" + "---|" * len(keys)]
    for arm, values in arms.items():
        name = f"**{arm}**" if arm == highlight else arm
        cells = [_fmt(values[k]) if k in values else "" for k in keys]
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def plot_results(metrics: dict[str, Any], path: Path, highlight: str | None = None) -> None:
    """Default figure: one panel per metric, one bar per arm, the method highlighted."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    arms = metrics["arms"]
    keys: list[str] = []
    for values in arms.values():
        keys += [k for k in values if k not in keys]
    keys = keys[:8]
    fig, axes = plt.subplots(1, len(keys), figsize=(2.6 * len(keys) + 0.6, 3.0), squeeze=False)
    for ax, key in zip(axes[0], keys):
        names = [arm for arm in arms if key in arms[arm]]
        values = [arms[arm][key] for arm in names]
        colours = ["tab:red" if arm == highlight else "tab:gray" for arm in names]
        ax.bar(range(len(names)), values, color=colours)
        ax.set_xticks(range(len(names)), names, rotation=45, ha="right", fontsize=8)
        ax.set_title(key, fontsize=9)
    fig.suptitle(f"{metrics['name']}: zoo eval, seeds {metrics['seeds']}", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _training_section(entry: ModelEntry, folder: Path) -> str:
    cfg = entry.pretrained_cfg
    if not cfg.has_weights:
        return "This entry has no learned weights; `zoo.load(name, pretrained=True)` raises and says so.\n"
    training: dict[str, Any] = {}
    if (folder / "config.json").is_file():
        training = json.loads((folder / "config.json").read_text()).get("metadata", {}).get("training", {}) or {}
    lines = []
    if cfg.recipe:
        lines.append(f"Trained from scratch by the recipe `{cfg.recipe}`:\n\n```bash\nzoo fit -c {cfg.recipe}\n```\n")
    if training.get("wall_time_s") is not None:
        threads = training.get("cpu_threads")
        where = training.get("accelerator", "cpu") + (f", {threads} thread{'s' * (threads != 1)}" if threads else "")
        # Manual-optimisation modules (federated rounds, RL) may leave Lightning's step counter at 0: say nothing then.
        steps = f"{training['global_step']} optimizer steps, " if training.get("global_step") else ""
        lines.append(
            f"Measured wall time of that command: **{training['wall_time_s'] / 60:.1f} min** ({where}; "
            f"seed {training.get('seed')}, {steps}torch "
            f"{training.get('torch')}, lightning {training.get('lightning')}, {training.get('date')})."
        )
    return "\n".join(lines) + "\n"


def render_card(name: str, metrics: dict[str, Any] | None = None):
    """Build the ModelCard of an entry.

    Args:
        name: Registry name.
        metrics: The eval result (default: ``hub_cards/<name>/metrics.json``).

    Returns:
        A ``huggingface_hub.ModelCard``.
    """
    from huggingface_hub import EvalResult, ModelCard, ModelCardData

    entry = get_entry(name)
    cfg = entry.pretrained_cfg
    folder = entry.mirror_dir
    metrics = metrics if metrics is not None else load_metrics(folder)
    arm = entry.eval_arm
    dataset = cfg.datasets[0] if cfg.datasets else "synthetic"
    eval_results = [
        EvalResult(
            task_type=cfg.task,
            dataset_type=dataset,
            dataset_name=dataset,
            metric_type=key,
            metric_value=value,
        )
        for key, value in metrics["arms"].get(arm, {}).items()
    ]
    data = ModelCardData(
        model_name=entry.name,
        license=cfg.license,
        library_name="zoo",
        tags=["zoo", "icml-2026", entry.paper, "pytorch-lightning"]
        + ([f"arxiv:{cfg.paper.arxiv}"] if cfg.paper.arxiv else []),
        datasets=list(cfg.datasets) or None,
        pipeline_tag=None if cfg.task == "other" else cfg.task,
        eval_results=eval_results or None,
    )
    paper = cfg.paper
    authors = ", ".join(paper.authors) if paper.authors else "see the paper"
    code = f" Authors' code: {paper.code}." if paper.code else ""
    figure = f"\n![{entry.name} results]({FIGURE_FILE})\n" if (folder / FIGURE_FILE).is_file() else ""
    pins = "\n".join(f"| `{file}` | `{digest}` |" for file, digest in cfg.sha256.items())
    load_line = (
        f'model = zoo.load("{entry.name}", pretrained=True)  # verified against the sha256 pins below'
        if cfg.has_weights
        else f'model = zoo.load("{entry.name}")  # no learned weights: pretrained=True raises'
    )
    settings = json.dumps(metrics.get("settings", {}), indent=2)
    body = f"""
# {entry.name}

{entry.description}

Implementation of **{paper.title}** ({authors}; {paper.venue}, [{paper.label}]({paper.link})) in
[icml26-zoo](https://huggingface.co/icml26-zoo).{code}

## Usage

```python
import zoo
{load_line}
```

```bash
pip install icml26-zoo{f"[{entry.extra}]" if entry.extra else ""}
zoo eval {entry.name} --json out.json   # the paper's claim, method and baselines side by side
```

## Training

{_training_section(entry, folder)}
## Results

Measured by `zoo eval {metrics["name"]}` (zoo {metrics["zoo_version"]}), seeds {metrics["seeds"]}; this entry is
the arm **{arm}**. These numbers are ours, not copied from the paper.

{results_table(metrics, highlight=arm)}
{figure}
<details><summary>Evaluation settings</summary>

```json
{settings}
```

</details>

## Notes and deviations from the paper

{cfg.notes or "None recorded."}

## Files

| file | sha256 |
|---|---|
{pins}

## Citation

```bibtex
{paper.bibtex(entry.paper + "2026")}

{ZOO_BIBTEX}
```
"""
    return ModelCard(f"---\n{data.to_yaml()}\n---\n{body}")


def write_card(name: str, metrics_path: str | Path | None = None) -> Path:
    """Re-render ``hub_cards/<name>/README.md`` and its figure; returns the README path.

    Args:
        name: Registry name.
        metrics_path: Eval JSON to render from (default: the folder's metrics.json).
    """
    entry = get_entry(name)
    folder = entry.mirror_dir
    folder.mkdir(parents=True, exist_ok=True)
    metrics = json.loads(Path(metrics_path).read_text()) if metrics_path else load_metrics(folder)
    plot = _paper_plot(entry) or plot_results
    plot(metrics, folder / FIGURE_FILE, highlight=entry.eval_arm)
    card = render_card(entry.name, metrics)
    path = folder / "README.md"
    card.save(path)
    return path


def _paper_plot(entry: ModelEntry):
    if not entry.evaluate:
        return None
    try:
        return import_object(entry.evaluate.partition(":")[0] + ":plot")
    except AttributeError:
        return None
