"""Render a Hub model card (README.md + results figure) from the registry and ``zoo eval``'s metrics.json.

Every number in a card comes from ``hub_cards/<name>/metrics.json``, the file ``zoo eval --card``
writes, and from the training facts that ``ExportPretrained`` stored in config.json. Nothing is
copied from the paper.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from zoo._registry import ModelEntry, get_entry

FIGURE_FILE = "results.png"

#: The card's ``library_name``: a custom library (the Hub lists it without a widget); every card's Usage section
#: shows the code that loads and runs the weights with it.
LIBRARY_NAME = "icml26-zoo"

#: The Hub's pipeline tags (huggingface.js ``PIPELINE_DATA``) that the zoo's tasks use; anything else is "other".
PIPELINE_TAGS = frozenset(
    {
        "image-classification",
        "text-classification",
        "text-generation",
        "reinforcement-learning",
        "image-to-image",
        "tabular-classification",
        "tabular-regression",
        "feature-extraction",
        "other",
    }
)
#: Zoo tasks that are not pipeline tags, and the tag that fits them.
TASK_PIPELINE_TAGS = {"linear-bandit": "reinforcement-learning"}

#: Data sets of the zoo that exist on the Hub, by the zoo's name; the others (synthetic, procedural, Debian
#: test data) are left out of the card's ``datasets`` metadata and named in its text only.
HUB_DATASETS = {"fashion_mnist": "zalando-datasets/fashion_mnist"}


def pipeline_tag(task: str) -> str:
    """The Hub pipeline tag of a zoo task (``"other"`` when the Hub has none for it)."""
    tag = TASK_PIPELINE_TAGS.get(task, task)
    return tag if tag in PIPELINE_TAGS else "other"


def usage_snippet(entry: ModelEntry) -> str | None:
    """The Usage snippet of ``zoo/<paper>/usage.py`` for this entry, or None when the paper has none."""
    import importlib

    try:
        usage = importlib.import_module(f"zoo.{entry.paper}.usage")
    except ModuleNotFoundError as error:
        if error.name not in (f"zoo.{entry.paper}", f"zoo.{entry.paper}.usage"):
            raise
        return None
    return usage.snippet(entry.name)


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


def _metric_keys(arms: dict[str, dict[str, float]]) -> list[str]:
    keys: list[str] = []
    for values in arms.values():
        keys += [k for k in values if k not in keys and not k.endswith("_std") and k != "n_seeds"]
    return keys


def results_table(metrics: dict[str, Any], highlight: str | None = None) -> str:
    """Markdown table: one row per arm (its role and seed count), one column per metric, ``mean ± std``."""
    arms, settings = metrics["arms"], metrics.get("settings", {})
    keys = _metric_keys(arms)
    lines = ["| arm | role | seeds | " + " | ".join(keys) + " |", "|---|---|---|" + "---|" * len(keys)]
    for arm, values in arms.items():
        name = f"**{arm}**" if arm == highlight else arm
        cells = []
        for key in keys:
            if key not in values:
                cells.append("")
            elif values.get(f"{key}_std"):
                cells.append(f"{_fmt(values[key])} ± {_fmt(values[key + '_std'])}")
            else:
                cells.append(_fmt(values[key]))
        seeds = str(int(values["n_seeds"])) if "n_seeds" in values else ""
        lines.append(f"| {name} | {_role(settings, arm)} | {seeds} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def _role(settings: dict[str, Any], arm: str) -> str:
    if settings.get("method") == arm:
        return "method"
    for role, label in (("baselines", "baseline"), ("ablations", "ablation"), ("references", "reference")):
        if arm in settings.get(role, []):
            return label
    return ""


def claims_section(metrics: dict[str, Any]) -> str:
    """Markdown: the claims with pass or fail, and a plain sentence when the method does not beat a reference."""
    claims = metrics.get("claims", [])
    if not claims:
        return "This evaluation states no claims.\n"
    lines = ["| claim | measured | threshold | result |", "|---|---|---|---|"]
    for claim in claims:
        verdict = "pass" if claim["holds"] else "**fail**"
        lines.append(f"| {claim['text']} | {_fmt(claim['value'])} | {_fmt(claim['threshold'])} | {verdict} |")
    references = set(metrics.get("settings", {}).get("references", []))
    failed: dict[str, list[str]] = {}
    for claim in claims:
        if claim.get("versus") in references and not claim["holds"]:
            failed.setdefault(claim["versus"], []).append(claim["id"])
    for reference, ids in failed.items():
        lines.append(
            f"\n**The method does not clearly beat the reference arm `{reference}`** ({', '.join(ids)}): "
            "read every other number on this card with that in mind."
        )
    held = sum(bool(c["holds"]) for c in claims)
    lines.append(f"\n{held} of {len(claims)} claims hold.")
    return "\n".join(lines) + "\n"


def plot_results(metrics: dict[str, Any], path: Path, highlight: str | None = None) -> None:
    """The card figure: the paper's ``plot(result, axes)`` when it has one, else bars of its headline metrics."""
    from zoo._figures import card_figure, default_plot

    entry = get_entry(metrics["name"])
    module = _paper_module(entry)
    if module is not None and hasattr(module, "plot"):
        with card_figure(metrics, path, panels=module.PROTOCOL.panels) as axes:
            module.plot(metrics, axes)
        return
    headline = module.PROTOCOL.headline if module is not None and hasattr(module, "PROTOCOL") else ()
    default_plot(metrics, path, headline)


def _paper_module(entry: ModelEntry):
    import importlib

    return importlib.import_module(entry.evaluate.partition(":")[0]) if entry.evaluate else None


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


def _inputs_section(cfg) -> str:
    """What the weights take and return (``pretrained_cfg``): input format, size, scaling, normalisation, labels."""
    pre = cfg.preprocess
    if not pre:
        return ""
    rows = [
        f"| {key} | {', '.join(map(str, value)) if isinstance(value, list) else value} |" for key, value in pre.items()
    ]
    return (
        "\nWhat the weights take (`model.pretrained_cfg`, also in config.json; where the module has them, "
        "`model.transform` and `model.predict` apply it):\n\n| field | value |\n|---|---|\n" + "\n".join(rows) + "\n"
    )


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
    hub_datasets = [HUB_DATASETS[d] for d in cfg.datasets if d in HUB_DATASETS]
    task = pipeline_tag(cfg.task)
    # model-index results need a Hub data set id: only entries evaluated on one get them (the table has all).
    eval_results = [
        EvalResult(
            task_type=task,
            dataset_type=hub_datasets[0],
            dataset_name=cfg.datasets[0],
            dataset_split="test",
            metric_type=key,
            metric_value=value,
        )
        for key, value in metrics["arms"].get(arm, {}).items()
        if key in _metric_keys(metrics["arms"]) and hub_datasets
    ]
    base = {}
    if cfg.base_model:
        base = {"base_model": get_entry(cfg.base_model).pretrained_cfg.hf_hub_id}
        base["base_model_relation"] = cfg.base_model_relation
    data = ModelCardData(
        model_name=entry.name,
        license=cfg.license,
        library_name=LIBRARY_NAME,
        tags=["icml26-zoo", "icml-2026", entry.paper, "pytorch-lightning", "safetensors"]
        + ([f"arxiv:{cfg.paper.arxiv}"] if cfg.paper.arxiv else []),
        datasets=hub_datasets or None,
        pipeline_tag=task,
        eval_results=eval_results or None,
        **base,
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
    snippet = usage_snippet(entry) or f"import zoo\n{load_line}"
    inputs = _inputs_section(cfg)
    fit_line = ""
    if cfg.recipe:
        recipe = cfg.recipe.removeprefix("recipes/").removesuffix(".yaml")
        fit_line = f"zoo fit -c {recipe}   # retrain from the packaged recipe; prints where the weights went\n"
    settings = json.dumps(metrics.get("settings", {}), indent=2)
    body = f"""
# {entry.name}

{entry.description}

Implementation of **{paper.title}** ({authors}; {paper.venue}, [{paper.label}]({paper.link})) in
[icml26-zoo](https://huggingface.co/icml26-zoo).{code}

## Usage

```bash
pip install icml26-zoo{f"[{entry.extra}]" if entry.extra else ""}
```

```python
{snippet.strip()}
```
{inputs}
```bash
zoo eval {entry.name} --json out.json   # the paper's claim, method and baselines side by side
{fit_line}```

`zoo.load(FOLDER)` loads what `zoo fit` exported, `zoo.load("hf-hub:ORG/REPO")` any Hub repo in this format;
the module has `save_pretrained`, `push_to_hub` and `from_pretrained` where it mixes in the zoo's Hub helpers.

## Training

{_training_section(entry, folder)}
## Results

Measured by `zoo eval {metrics["name"]}` (zoo {metrics["zoo_version"]}), seeds {metrics["seeds"]}; this entry is
the arm **{arm}**. These numbers are ours, not copied from the paper.

{results_table(metrics, highlight=arm)}
{figure}
### Claims

{claims_section(metrics)}
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
    plot_results(metrics, folder / FIGURE_FILE, highlight=entry.eval_arm)
    card = render_card(entry.name, metrics)
    path = folder / "README.md"
    card.save(path)
    return path


README_START = "<!-- models-table:start: generated from hub_cards/*/metrics.json by `python tools/readme_table.py` -->"
README_END = "<!-- models-table:end -->"


def readme_table() -> str:
    """The README's models table, one row per evaluated paper, from the cards' metrics.json and claims."""
    from zoo._registry import _all_entries

    papers: dict[str, list[ModelEntry]] = {}
    for entry in _all_entries():
        papers.setdefault(entry.paper, []).append(entry)
    lines = [
        "| paper | entries | seeds | headline: method / best reference | claims held | failing claims |",
        "|---|---|---|---|---|---|",
    ]
    for entries in papers.values():
        main = next((e for e in entries if e.default), entries[0])
        path = main.mirror_dir / "metrics.json"
        names = ", ".join(f"`{e.name}`" for e in entries)
        title = f"{main.pretrained_cfg.paper.title[:40]}… ({main.pretrained_cfg.paper.label})"
        if not path.is_file():
            lines.append(f"| {title} | {names} | | not evaluated | | |")
            continue
        result = json.loads(path.read_text())
        settings, arms = result["settings"], result["arms"]
        key, method = main.pretrained_cfg.headline, settings.get("method")
        headline = ""
        if key and key in arms.get(method, {}):
            refs = [f"{arms[r][key]:.4g} ({r})" for r in settings.get("references", []) if key in arms.get(r, {})]
            headline = f"{key} {arms[method][key]:.4g} / " + (", ".join(refs) or "no reference reports it")
        claims = result.get("claims", [])
        held = sum(bool(c["holds"]) for c in claims)
        failing = ", ".join(c["id"] for c in claims if not c["holds"]) or "none"
        lines.append(f"| {title} | {names} | {result['seeds']} | {headline} | {held}/{len(claims)} | {failing} |")
    return "\n".join(lines)


def update_readme(path: str | Path, check: bool = False) -> bool:
    """Rewrite the generated table between the README's markers; with ``check``, only compare.

    Returns:
        Whether the README already held the current table.
    """
    from zoo._errors import ZooError

    path = Path(path)
    text = path.read_text()
    if README_START not in text or README_END not in text:
        raise ZooError(f"{path} has no generated-table markers ({README_START} ... {README_END})")
    head, rest = text.split(README_START, 1)
    _, tail = rest.split(README_END, 1)
    new = f"{head}{README_START}\n{readme_table()}\n{README_END}{tail}"
    if new != text and not check:
        path.write_text(new)
    return new == text
