"""PB-SAC: PAC-Bayes certificates for RL under Markov dependence (arXiv 2510.10544). Registry entries only."""

from zoo._registry import PaperRef, PretrainedCfg, register_model

# The zoo's spec (02-pbsac.md) and issue 7 give no paper title: the spec has only the descriptive heading
# "PAC-Bayesian RL with Markov dependence", the arXiv id 2510.10544 and the authors. The title and author names
# below are those printed on the arXiv paper itself (arxiv.org/abs/2510.10544, checked against the v1 and v2
# HTML); the author list and order agree with the spec's.
PAPER = PaperRef(
    title="PAC-Bayesian Reinforcement Learning Trains Generalizable Policies",
    arxiv="2510.10544",
    authors=("Abdelkrim Zitouni", "Mehdi Hennequin", "Juba Agoun", "Ryan Horache", "Nadia Kabachi", "Omar Rivasplata"),
)

_COMMON_NOTES = (
    "Reconstructed (the zoo's spec had the abstract only). Certificate (issue 17): training ends with a "
    "certificate phase. At the freeze the policy, the critics' hidden layers and the target critics are fixed; "
    "the priors are the critics' last-layer posterior at the freeze (learned on the training data before it, which "
    "the bound excludes) with its standard deviations scaled by a fixed grid 1, 0.3, 0.1, 0.03 (union bound: "
    "delta / 4 each, ln 4 nats in the bound); 200 episodes of the frozen exploration policy train a posterior "
    "against each prior (KL paid in the bound), the bound is evaluated on them and the smallest of the four is the "
    "certificate (its posterior is the published one). Loss: min(1, (Q - y)^2 / M) with "
    "M = (r_max - r_min)^2 from the task's reward bounds. Dependence: each episode (own reset seed, frozen "
    "policy) is one independent block, so Hoeffding + Donsker-Varadhan + a 20-point lambda grid hold with "
    "n = 200 episodes and no mixing-time estimate (delta = 0.05); the i.i.d. bound over the 40k transitions is "
    "reported beside it and is not valid. Return bound (the paper's Theorem 3.2, reconstructed with the "
    "episodes as blocks): a lower bound on the frozen policy's expected discounted return. Both are checked on "
    "100 held-out episodes (seeds 2e6 + i). The posterior sits on the critics' last layer only (2 x 129 weights). "
    "Trained for 15k environment steps on CPU (one intra-op thread); `zoo eval pbsac` also trains and certifies "
    "MountainCarContinuous-v0 (recipes/pbsac/mountain_car.yaml, the exploration task) with one prior: there "
    "M = 100.1^2 makes every agent's TD loss ~1e-6, so its certificate is the complexity term alone and cannot "
    "separate agents, and no arm reached the hilltop in 15k steps (validation trials of PB-SAC's kappa up to 1e4 "
    "and of SAC's entropy target: zoo/pbsac/tuning.json). The MuJoCo recipes (InvertedPendulum-v5, HalfCheetah-v5) "
    "are provided for longer runs and were only smoke-tested."
)

INPUT_FORMAT = (
    "Pendulum-v1 observations [cos theta, sin theta, angular velocity] as float [B, 3] (gymnasium's units, "
    "unnormalised); forward(obs) gives the deterministic torque in [-2, 2] [B, 1]; model.evaluate_returns(seeds) "
    "runs whole episodes"
)

register_model(
    "pbsac.pendulum",
    module="zoo.pbsac.module:PBSACModule",
    default=True,
    description="PB-SAC (SAC with a PAC-Bayes last-layer critic posterior and optimistic exploration) on Pendulum-v1",
    model_args={},
    requires=("gymnasium",),
    extra="rl",
    arm="pbsac",
    smoke=(
        "--data.init_args.total_steps=64",
        "--data.init_args.steps_per_batch=64",
        "--model.init_args.learning_starts=32",
        "--model.init_args.batch_size=16",
        "--model.init_args.certificate_episodes=2",
        "--model.init_args.certificate_posterior_steps=2",
        "--model.init_args.check_episodes=2",
        "--model.init_args.eval_episodes=1",
    ),
    pretrained_cfg=PretrainedCfg(
        paper=PAPER,
        sha256={
            "config.json": "1fdb9fde9ea5f41ae35600a19a292f77879bfa8c56dff02fd61109fc2f219e27",
            "model.safetensors": "1f14920802639d60c57170fe2b1ec38c3577ff5e7a6d1d495ff26d78410993a8",
        },
        task="reinforcement-learning",
        input_format=INPUT_FORMAT,
        datasets=("Pendulum-v1",),
        headline="return_mean",
        num_params=86665,
        notes=_COMMON_NOTES,
    ),
)

register_model(
    "pbsac.sac_pendulum",
    module="zoo.pbsac.module:PBSACModule",
    description="SAC baseline of PB-SAC (same code, deterministic critics, no bound) on Pendulum-v1",
    model_args={"bayesian": False, "bound_weight": 0.0, "kappa": 0.0, "certificate_episodes": 0},
    requires=("gymnasium",),
    extra="rl",
    arm="sac",
    smoke=(
        "--data.init_args.total_steps=64",
        "--data.init_args.steps_per_batch=64",
        "--model.init_args.learning_starts=32",
        "--model.init_args.batch_size=16",
        "--model.init_args.eval_episodes=1",
    ),
    pretrained_cfg=PretrainedCfg(
        paper=PAPER,
        sha256={
            "config.json": "d983de376408de7942f9efa8413a75807bba918c9eba827cdfa5b3b84111e7c7",
            "model.safetensors": "d90df04c16c77cdffe678163da1ff736424ba204cdd3cf52c10cc4c65935e6b2",
        },
        task="reinforcement-learning",
        input_format=INPUT_FORMAT,
        datasets=("Pendulum-v1",),
        headline="return_mean",
        num_params=86407,
        notes="The SAC baseline of PB-SAC: identical networks, hyper-parameters, seeds and code path "
        "(bayesian=false, bound_weight=0, kappa=0). " + _COMMON_NOTES,
    ),
)
