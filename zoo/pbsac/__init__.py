"""PB-SAC: PAC-Bayes certificates for RL under Markov dependence (arXiv 2510.10544). Registry entries only.

The reconstruction choices are listed in ``zoo/pbsac/module.py``; the cards' text is ``zoo/pbsac/card.md``.
"""

from zoo._registry import Entry, PaperRef, register_paper

# The zoo's spec (02-pbsac.md) gives no paper title: only the descriptive heading "PAC-Bayesian RL with Markov
# dependence", the arXiv id 2510.10544 and the authors. The title and author names below are those printed on the
# arXiv paper itself (arxiv.org/abs/2510.10544, checked against the v1 and v2 HTML); the author list and order
# agree with the spec's.
PAPER = PaperRef(
    title="PAC-Bayesian Reinforcement Learning Trains Generalizable Policies",
    arxiv="2510.10544",
    authors=("Abdelkrim Zitouni", "Mehdi Hennequin", "Juba Agoun", "Ryan Horache", "Nadia Kabachi", "Omar Rivasplata"),
)

INPUT_FORMAT = (
    "Pendulum-v1 observations [cos theta, sin theta, angular velocity] as float [B, 3] (gymnasium's units, "
    "unnormalised); forward(obs) gives the deterministic torque in [-2, 2] [B, 1]; model.evaluate_returns(seeds) "
    "runs whole episodes"
)

_SMOKE = (
    "--data.init_args.total_steps=64",
    "--data.init_args.steps_per_batch=64",
    "--model.init_args.learning_starts=32",
    "--model.init_args.batch_size=16",
    "--model.init_args.eval_episodes=1",
)

ENTRIES = {
    "pendulum": Entry(
        arm="pbsac",
        default=True,
        model_args={},
        description="PB-SAC (SAC with a PAC-Bayes last-layer critic posterior and optimistic exploration) on "
        "Pendulum-v1",
        smoke=(
            *_SMOKE,
            "--model.init_args.certificate_episodes=2",
            "--model.init_args.certificate_posterior_steps=2",
            "--model.init_args.check_episodes=2",
        ),
        num_params=86665,
        notes="PB-SAC on Pendulum-v1 after 15k environment steps: SAC whose twin critics carry a Gaussian "
        "last-layer posterior trained against a PAC-Bayes bound, with optimistic exploration. Its config.json "
        "holds the certificate history of the final certificate phase.",
    ),
    "sac_pendulum": Entry(
        arm="sac",
        model_args={"bayesian": False, "bound_weight": 0.0, "kappa": 0.0, "certificate_episodes": 0},
        description="SAC baseline of PB-SAC (same code, deterministic critics, no bound) on Pendulum-v1",
        smoke=_SMOKE,
        num_params=86407,
        notes="The SAC baseline of PB-SAC on Pendulum-v1: identical networks, hyper-parameters, seeds and code path "
        "(bayesian=false, bound_weight=0, kappa=0), without certificates.",
    ),
}

register_paper(
    "pbsac",
    PAPER,
    ENTRIES,
    module="zoo.pbsac.module:PBSACModule",
    requires=("gymnasium",),
    extra="rl",
    task="reinforcement-learning",
    input_format=INPUT_FORMAT,
    datasets=("Pendulum-v1",),
    headline="return_mean",
)
