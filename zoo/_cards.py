"""Render a Hub model card (README.md + results figure) from the registry and ``zoo eval``'s metrics.json.

Every number in a card comes from ``hub_cards/<name>/metrics.json``, the file ``zoo eval --card``
writes, and from the training facts that ``ExportPretrained`` stored in config.json. Nothing is
copied from the paper.
"""

from __future__ import annotations

import json
from collections.abc import Callable
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


SOFTWARE_BIBTEX = """@software{icml26_zoo,
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


#: Metric columns per results table: with the arm, role and seeds columns no table is wider than 12.
TABLE_METRICS = 9


def results_table(metrics: dict[str, Any], highlight: str | None = None) -> str:
    """Markdown tables: one row per arm (its role and seed count), ``mean ± std`` per metric, at most 12 columns."""
    arms, settings = metrics["arms"], metrics.get("settings", {})
    keys = _metric_keys(arms)
    chunks = [keys[i : i + TABLE_METRICS] for i in range(0, len(keys), TABLE_METRICS)] or [[]]
    tables = []
    for chunk in chunks:
        lines = ["| arm | role | seeds | " + " | ".join(chunk) + " |", "|---|---|---|" + "---|" * len(chunk)]
        for arm, values in arms.items():
            if chunk and not any(key in values for key in chunk):
                continue
            name = f"**{arm}**" if arm == highlight else arm
            cells = [_cell(values, key) for key in chunk]
            seeds = str(int(values["n_seeds"])) if "n_seeds" in values else ""
            lines.append(f"| {name} | {_role(settings, arm)} | {seeds} | " + " | ".join(cells) + " |")
        tables.append("\n".join(lines))
    return "\n\n".join(tables)


def _cell(values: dict[str, float], key: str) -> str:
    if key not in values:
        return ""
    if values.get(f"{key}_std"):
        return f"{_fmt(values[key])} ± {_fmt(values[key + '_std'])}"
    return _fmt(values[key])


def _role(settings: dict[str, Any], arm: str) -> str:
    if settings.get("method") == arm:
        return "method"
    for role, label in (("baselines", "baseline"), ("ablations", "ablation"), ("references", "reference")):
        if arm in settings.get(role, []):
            return label
    return ""


KIND_TITLES = {
    "paper": "Paper claims (the method against another arm)",
    "headroom": "Headroom gates (the task leaves room above the strongest simple rule, on every seed)",
    "validity": "Checks (controls, data checks, properties true by construction: never results)",
}


def claim_summary(claims: list[dict[str, Any]]) -> dict[str, tuple[int, int]]:
    """``{kind: (held, total)}`` over the claims (cards and the README count ``paper`` claims as claims held)."""
    out = {}
    for kind in KIND_TITLES:
        of_kind = [c for c in claims if c.get("kind", "paper") == kind]
        out[kind] = (sum(bool(c["holds"]) for c in of_kind), len(of_kind))
    return out


def claim_counts(claims: list[dict[str, Any]]) -> str:
    """``paper claims held: 3/9 · gates: 2/3 · checks: 5/5``."""
    counts = claim_summary(claims)
    held, total = counts["paper"]
    return f"paper claims held: {held}/{total} · gates: {'/'.join(map(str, counts['headroom']))} · " + (
        f"checks: {'/'.join(map(str, counts['validity']))}"
    )


def claims_section(metrics: dict[str, Any]) -> str:
    """Markdown: the claims by kind with pass or fail, and a plain sentence when the method fails a reference."""
    claims = metrics.get("claims", [])
    if not claims:
        return "This evaluation states no claims.\n"
    lines = [f"**{claim_counts(claims)}**"]
    for kind, title in KIND_TITLES.items():
        of_kind = [c for c in claims if c.get("kind", "paper") == kind]
        if not of_kind:
            continue
        lines += ["", f"{title}:", "", "| claim | measured | threshold | result |", "|---|---|---|---|"]
        for claim in of_kind:
            verdict = "pass" if claim["holds"] else "**fail**"
            lines.append(f"| {claim['text']} | {_fmt(claim['value'])} | {_fmt(claim['threshold'])} | {verdict} |")
    references = set(metrics.get("settings", {}).get("references", []))
    failed: dict[str, list[str]] = {}
    for claim in claims:
        if claim.get("kind", "paper") == "paper" and claim.get("versus") in references and not claim["holds"]:
            failed.setdefault(claim["versus"], []).append(claim["id"])
    for reference, ids in failed.items():
        lines.append(
            f"\n**The method does not clearly beat the reference arm `{reference}`** ({', '.join(ids)}): "
            "read every other number on this card with that in mind."
        )
    return "\n".join(lines) + "\n"


#: The sections of ``zoo/<paper>/card.md``, the human-written part of a paper's cards, in card order. ``Lead`` (one
#: or two plain sentences: the strongest comparison, or that the claim does not reproduce) opens the Results.
CARD_SECTIONS = ("Lead", "Setup", "Deviations from the paper", "Why")


def card_text(paper: str) -> dict[str, str]:
    """The sections of ``zoo/<paper>/card.md`` by title (``## Title`` lines), each as markdown."""
    path = Path(__file__).resolve().parent / paper / "card.md"
    if not path.is_file():
        return {}
    sections: dict[str, list[str]] = {}
    current = None
    for line in path.read_text().splitlines():
        if line.startswith("## "):
            current = line[3:].strip()
            sections[current] = []
        elif current is not None:
            sections[current].append(line)
    return {title: "\n".join(lines).strip() for title, lines in sections.items()}


def strongest_other(result: dict[str, Any], metric: str) -> tuple[str, float] | None:
    """The best non-method arm on ``metric`` (a baseline or reference; ablations and ceilings excluded), or None."""
    settings, arms = result["settings"], result["arms"]
    lower = metric in settings.get("lower_is_better", [])
    others = [*settings.get("baselines", []), *settings.get("references", [])]
    ceilings = settings.get("ceilings", [])
    candidates = [arm for arm in others if arm not in ceilings and metric in arms.get(arm, {})]
    if not candidates:
        return None
    best = (min if lower else max)(candidates, key=lambda a: arms[a][metric])
    return best, arms[best][metric]


def lead_section(entry: ModelEntry, metrics: dict[str, Any], text: dict[str, str]) -> str:
    """The opening of the Results: card.md's ``Lead`` and the method against the strongest other arm, measured.

    Args:
        entry: The registry entry.
        metrics: Its eval result.
        text: The paper's card.md sections (``card_text``).
    """
    settings, arms = metrics.get("settings", {}), metrics.get("arms", {})
    method, metric = settings.get("method"), entry.pretrained_cfg.headline
    parts = [text.get("Lead", "")]
    if metric and metric in arms.get(method, {}):
        better = "lower" if metric in settings.get("lower_is_better", []) else "higher"
        other = strongest_other(metrics, metric)
        rival = (
            f"against {_cell(arms[other[0]], metric)} for `{other[0]}`, the strongest {_role(settings, other[0])} "
            f"(ablations and ceilings aside)"
            if other
            else "(no baseline or reference reports it)"
        )
        parts.append(
            f"**Strongest comparison** ({metric}, {better} is better): `{method}` scores "
            f"{_cell(arms[method], metric)} {rival}."
        )
    return "\n\n".join(part for part in parts if part) + "\n"


def notes_section(entry: ModelEntry, metrics: dict[str, Any], text: dict[str, str]) -> str:
    """Setup, what held, what did not and why, deviations: the card's text and the paper claims' verdicts.

    Args:
        entry: The registry entry.
        metrics: Its eval result.
        text: The paper's card.md sections (``card_text``).
    """
    paper_claims = [c for c in metrics.get("claims", []) if c.get("kind", "paper") == "paper"]
    held = [f"- {c['text']} (measured {_fmt(c['value'])})" for c in paper_claims if c["holds"]]
    failed = [f"- {c['text']}: measured {_fmt(c['value'])}" for c in paper_claims if not c["holds"]]
    parts = [entry.pretrained_cfg.notes] if entry.pretrained_cfg.notes else []
    if text.get("Setup"):
        parts += ["### Setup", text["Setup"]]
    parts += ["### What held", "\n".join(held) or "- None of the paper claims."]
    why = [*failed, *([text["Why"]] if text.get("Why") else [])]
    parts += ["### What did not hold, and why", "\n".join(why) or "- Every paper claim held."]
    parts += ["### Deviations from the paper", text.get("Deviations from the paper") or "None recorded."]
    return "\n\n".join(parts) + "\n"


def _training_section(entry: ModelEntry, folder: Path) -> str:
    cfg = entry.pretrained_cfg
    if not cfg.has_weights:
        return (
            "This entry has no learned weights; `zoo.load(name, pretrained=True)` raises and says so. Its numbers are "
            f"reproduced by the evaluation itself:\n\n```bash\nzoo eval {entry.name} --verify\n```\n"
        )
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


def _measured_at(metrics: dict[str, Any]) -> str:
    commits = metrics.get("provenance", {}).get("commits", [])
    return f", commit {', '.join(c[:10] for c in commits)}" if commits else ""


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
    text = card_text(entry.paper)
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
    if cfg.recipe and cfg.has_weights:
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
zoo eval {entry.name}            # the claims, rebuilt from the published pieces (seconds)
zoo eval {entry.name} --verify   # re-measure them and compare each with this card
{fit_line}```

`zoo.load(FOLDER)` loads what `zoo fit` exported, `zoo.load("hf-hub:ORG/REPO")` any Hub repo in this format;
the module has `save_pretrained`, `push_to_hub` and `from_pretrained` where it mixes in the zoo's Hub helpers.

## Training

{_training_section(entry, folder)}
## Results

{lead_section(entry, metrics, text)}
Measured by `zoo eval {metrics["name"]}` (zoo {metrics["zoo_version"]}{_measured_at(metrics)}), seeds
{metrics["seeds"]}; this entry is the arm **{arm}**. These numbers are ours, not copied from the paper; every
piece (arm, seed) is in `pieces.json`.

{results_table(metrics, highlight=arm)}
{figure}
### Claims

{claims_section(metrics)}
<details><summary>Evaluation settings</summary>

```json
{settings}
```

</details>

## Notes

{notes_section(entry, metrics, text)}

## Files

| file | sha256 |
|---|---|
{pins}

## Citation

```bibtex
{paper.bibtex(entry.paper + "2026")}

{SOFTWARE_BIBTEX}
```
"""
    return ModelCard(f"---\n{data.to_yaml()}\n---\n{body}")


def write_card(name: str, metrics_path: str | Path | None = None, figure: Callable | None = None) -> Path:
    """Re-render ``hub_cards/<name>/README.md`` and its figure; returns the README path.

    Args:
        name: Registry name.
        metrics_path: Eval JSON to render from (default: the folder's metrics.json).
        figure: ``figure(metrics, path, highlight)`` draws the results figure (the evaluation's own plot, from
            :func:`zoo.eval.published.figure_of`); default: bars of the arms' metrics.
    """
    from zoo._figures import default_plot

    entry = get_entry(name)
    folder = entry.mirror_dir
    folder.mkdir(parents=True, exist_ok=True)
    metrics = json.loads(Path(metrics_path).read_text()) if metrics_path else load_metrics(folder)
    draw = figure or (lambda result, path, highlight: default_plot(result, path))
    draw(metrics, folder / FIGURE_FILE, entry.eval_arm)
    card = render_card(entry.name, metrics)
    path = folder / "README.md"
    card.save(path)
    return path
