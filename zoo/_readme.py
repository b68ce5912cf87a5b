"""README.md's models table, generated from the cards' metrics.json (``python tools/readme_table.py``).

One row per paper: its entries, seeds, the headline metric of the method against the strongest other arm (the
best baseline or reference in the metric's own direction; ablations are parts of the method and ceilings see what
no competitor may, so neither is the comparison),
and the claims by kind: paper claims held, headroom gates, validity checks.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from zoo._cards import claim_summary, strongest_other
from zoo._registry import ModelEntry, _all_entries

README_START = "<!-- models-table:start: generated from hub_cards/*/metrics.json by `python tools/readme_table.py` -->"
README_END = "<!-- models-table:end -->"


def headline(result: dict[str, Any], metric: str | None) -> str:
    """``metric method / strongest (name)``, or empty when the method does not report it."""
    arms, method = result["arms"], result["settings"].get("method")
    if not metric or metric not in arms.get(method, {}):
        return ""
    other = strongest_other(result, metric)
    rival = f"{other[1]:.4g} ({other[0]})" if other else "no other arm reports it"
    return f"{metric} {arms[method][metric]:.4g} / {rival}"


def readme_table() -> str:
    """The README's models table, one row per evaluated paper."""
    papers: dict[str, list[ModelEntry]] = {}
    for entry in _all_entries():
        papers.setdefault(entry.paper, []).append(entry)
    lines = [
        "| paper | entries | seeds | headline: method / strongest other arm (name) | paper claims held | gates | "
        "checks | failing paper claims |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for entries in papers.values():
        main = next((e for e in entries if e.default), entries[0])
        path = main.mirror_dir / "metrics.json"
        names = ", ".join(f"`{e.name}`" for e in entries)
        title = f"{main.pretrained_cfg.paper.title[:40]}… ({main.pretrained_cfg.paper.label})"
        if not path.is_file():
            lines.append(f"| {title} | {names} | | not evaluated | | | | |")
            continue
        result = json.loads(path.read_text())
        claims = result.get("claims", [])
        counts = {kind: "/".join(map(str, pair)) for kind, pair in claim_summary(claims).items()}
        failing = [c["id"] for c in claims if c.get("kind", "paper") == "paper" and not c["holds"]]
        cells = [title, names, str(result["seeds"]), headline(result, main.pretrained_cfg.headline)]
        cells += [counts["paper"], counts["headroom"], counts["validity"], ", ".join(failing) or "none"]
        lines.append("| " + " | ".join(cells) + " |")
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
