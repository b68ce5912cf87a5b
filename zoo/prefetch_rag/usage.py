"""The Usage snippet of the prefetch_rag card: rendered by ``zoo card``, run by ``tests/test_usage.py``.

It decodes one held-out test question with the prefetch arm (simulated clock), then ends with
``prediction: P | truth: T | tolerance: E``: the slot EM of the published checkpoint on the first 50 single-domain
test questions against the card's seed-0 value on the same questions.
"""

from string import Template

SNIPPET = Template("""
import json

import zoo
from zoo.prefetch_rag.evaluate import GOLDEN, score_pretrained, test_questions
from zoo.prefetch_rag.index import build_retriever

model = zoo.load("$name", pretrained=True)  # GPT-2 d128/L4 + retrieval predictor + query head + tokenizer
retriever = build_retriever()  # MiniLM over the documents: the 1st run embeds them (~5 min, progress bar), then cached
question = test_questions(1, 0)[0]  # a held-out country, held-out lead-ins
trace = model.decoder(retriever).answer(question, "prefetch")  # the asynchronous loop on the simulated clock
print(question.question, "->", list(zip(trace.predicted, trace.gold)))
print(f"{trace.latency_ms:.0f} ms (simulated), TTFT {trace.ttft_ms:.0f} ms, hits {trace.hits}/{len(trace.spikes)}")
card_result = json.loads((zoo.get_entry("$name").mirror_dir / "metrics.json").read_text())
card = card_result["per_seed"]["prefetch"]["0"][f"em_first{GOLDEN}"]  # the published checkpoint is seed 0
print(f"prediction: {score_pretrained(model, limit=GOLDEN)['em']:.3f} | truth: {card:.3f} | tolerance: 0.02")
""")


def snippet(name: str) -> str:
    """The snippet for the entry ``name``."""
    return SNIPPET.substitute(name=name)
