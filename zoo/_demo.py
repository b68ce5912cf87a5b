"""``zoo demo``: list the zoo and score one pretrained model offline."""

from __future__ import annotations

import time

from zoo._registry import get_entry, list_models, resolve_name


def demo(name: str | None = None, table=None) -> int:
    """Print the model table, then load ``name`` (default: fedgr) with its weights and score it offline.

    Args:
        name: The entry to score.
        table: Prints the model table (``zoo list``'s).
    """
    from zoo._cards import load_metrics
    from zoo.eval import score_pretrained

    if table is not None:
        table()
    names = list_models(pretrained=True)
    if not names:
        print("\nNo paper has landed with pretrained weights yet: the registry above is the demo.")
        return 0
    if name:
        name = resolve_name(name)
    else:
        name = resolve_name("fedgr") if "fedgr" in {get_entry(n).paper for n in names} else names[0]
    print(f"\nzoo.load({name!r}, pretrained=True), then scored offline:")
    started = time.perf_counter()
    scores = score_pretrained(name)
    entry = get_entry(name)
    card = entry.metrics
    has_card = (entry.mirror_dir / "metrics.json").is_file()
    seeds = load_metrics(entry.mirror_dir).get("seeds", []) if has_card else []
    # A card may average several seeds while the checkpoint is one of them: say which number is which.
    label = f"card, mean over seeds {seeds}" if len(seeds) > 1 else "card"
    for key, value in scores.items():
        published = f" ({label}: {card[key]:.4g})" if key in card else ""
        print(f"  {key} = {value:.4g}{published}")
    print(f"  in {time.perf_counter() - started:.1f} s")
    return 0
