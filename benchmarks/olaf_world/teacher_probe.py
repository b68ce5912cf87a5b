"""Teacher gate on validation worlds: a linear probe of each teacher's per-transition temporal target on the true
actions, within and across contexts, for each way context B may differ:
``python benchmarks/olaf_world/teacher_probe.py [val]`` (``--smoke``: the zoomed design and the motion teacher only).
"""

from __future__ import annotations

import json
import sys
import time

from zoo.olaf_world.data import LatentActionVideoDataModule
from zoo.olaf_world.evaluate import transition_labels
from zoo.olaf_world.metrics import probe_accuracies


def main(part: str = "val", styles=("same", "recolour", "zoom"), teachers=("phase_correlation", "efficientnet_lite0")):
    out = {}
    for style in styles:
        for teacher in teachers:
            start = time.time()
            module = LatentActionVideoDataModule(split="terrain", context_b=style, teacher=teacher)
            clips = module.clips(part)
            targets = module.transition_targets(clips)
            scores = probe_accuracies(targets, *transition_labels(clips))
            out[f"{style}/{teacher}"] = {**scores, "n": len(targets), "s": time.time() - start}
            print(style, teacher, out[f"{style}/{teacher}"], flush=True)
    return out


if __name__ == "__main__":
    if sys.argv[1:] == ["--smoke"]:
        result = main("val", styles=("zoom",), teachers=("phase_correlation",))
    else:
        result = main(*sys.argv[1:2])
    print(json.dumps(result, indent=1))
