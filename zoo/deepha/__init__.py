"""DeepHA (OpenReview La7HVjveBA): Chain-of-Action over skill, grounding and motor tokens with compressed memory
and a KV cache, adapted to BabyAI.

This file only registers the entries (it runs whenever the zoo is listed). The code lives in
``zoo.deepha.{demos,vocab,sequences,model,agent}`` (plain torch), ``zoo.deepha.module`` / ``zoo.deepha.data``
(Lightning; module.py's docstring lists every reconstruction choice and deviation), ``zoo.deepha.evaluate`` and
``zoo.deepha.tune``; the card's text in ``card.md``.
"""

from zoo._registry import Entry, PaperRef, register_paper

# The spec gives the heading below, the venue and the OpenReview id only; the authors were not listed there.
PAPER = PaperRef(
    title="DeepHA: Deep Hierarchical Agent with Chain-of-Action and compressed memory",
    arxiv=None,
    venue="ICML",
    year=2026,
    url="https://openreview.net/forum?id=La7HVjveBA",
)

INPUT = {
    "input_format": "BabyAI observations: obs['image'] [7, 7, 3] uint8 (object, colour, state), obs['direction'] "
    "int and the mission string; model.policy(window=4) gives a greedy agent: policy.reset(mission), then "
    "policy.act(image, direction) -> a MiniGrid action id per step",
    "label_names": ("left", "right", "forward", "pickup", "drop", "toggle", "done"),
}

# The recipes' architecture (recipes/deepha/*.yaml), so zoo.load(name) without weights builds what the checkpoints hold.
_RECIPE_ARGS = {"d_model": 128, "n_layer": 4, "n_head": 4, "max_len": 1024, "obs_encoder": "film", "window": 4}

ENTRIES = {
    "babyai": Entry(
        arm="coa_compressed",
        default=True,
        model_args={**_RECIPE_ARGS, "arm": "coa"},
        description="Chain-of-Action agent (skill -> grounding -> motor, one GPT-2 decoder) acting with compressed "
        "memory (W = 4) and a KV cache, BabyAI",
        notes="The method: one GPT-2 decoder trained all-in-one on BabyAIBot demos with skill/grounding drops and "
        "compressed contexts; it acts with W = 4 (model.policy(window=None) is the full-context coa arm).",
    ),
    "flat": Entry(
        arm="flat",
        model_args={**_RECIPE_ARGS, "arm": "flat"},
        description="Flat behaviour-cloning policy (motor tokens only), the same decoder and demos, BabyAI",
        notes="The reference arm: the same decoder, data and budget, [OBS][MOT] per step (motor tokens only).",
    ),
}

register_paper(
    "deepha",
    PAPER,
    ENTRIES,
    module="zoo.deepha.module:DeepHAModule",
    requires=("minigrid", "transformers"),
    extra="games",
    smoke=(
        "--trainer.max_steps=3",
        "--data.init_args.episodes_per_level=4",
        "--data.init_args.val_episodes_per_level=1",
    ),
    task="reinforcement-learning",
    datasets=("babyai",),
    headline="success_multistep",
    num_params=1275438,  # every arm within 1% (decoupled: two 2-layer decoders); the FiLM OBS encoder
    **INPUT,
)
