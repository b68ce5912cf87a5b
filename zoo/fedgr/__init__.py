"""FedGR (arXiv:2412.00452): federated learning with noisy labels, and its baselines, on Fashion-MNIST.

This file only registers the entries (it runs whenever the zoo is listed). The code lives in
``zoo.fedgr.{net,augment,federation,sieve,revise,client,server}`` (plain torch/numpy), ``zoo.fedgr.module`` /
``zoo.fedgr.data`` (Lightning) and ``zoo.fedgr.flower`` (Flower); the card's text in ``card.md``.
"""

from zoo._registry import Entry, PaperRef, register_paper
from zoo.common.labels import FASHION_MNIST_INPUT

PAPER = PaperRef(
    title="Learning Locally, Revising Globally: Global Reviser for Federated Learning with Noisy Labels",
    arxiv="2412.00452",
    authors=(
        "Yuxin Tian",
        "Mouxing Yang",
        "Yuhao Zhou",
        "Jian Wang",
        "Qing Ye",
        "Tongliang Liu",
        "Gang Niu",
        "Jiancheng Lv",
    ),
    # The paper names it (arXiv 2412.00452v3 abstract); no snapshot of it could be read here (2026-12-01), so no
    # constant of ours comes from it.
    code="https://github.com/cs-yuxintian/FedGR-ICML26",
)

# What the weights take (config.json["pretrained_cfg"]; FedGRModule.transform/predict apply it).
INPUT = dict(FASHION_MNIST_INPUT)

ENTRIES = {
    "fashion_mnist": Entry(
        arm="fedgr",
        model_args={"method": "fedgr"},
        default=True,
        description="FedGR global model: 10 clients with 40-70% symmetric label noise on Fashion-MNIST",
        notes="FedGR: server-side GMM sieving of the global model's per-sample losses, label refining with the "
        "global model's pseudo-labels, globally revised EMA distillation and global representation regularisation.",
    ),
    "fedavg": Entry(
        arm="fedavg",
        model_args={"method": "fedavg"},
        description="FedAvg baseline of FedGR: global model on the same noisy Fashion-MNIST clients",
        notes="FedAvg (McMahan et al., 2017), trained on the weak view with the observed (noisy) labels.",
    ),
    "fedprox": Entry(
        arm="fedprox",
        model_args={"method": "fedprox"},
        description="FedProx (mu=0.01) baseline of FedGR on the same noisy Fashion-MNIST clients",
        notes="FedProx (Li et al., 2020) with mu = 0.01, otherwise as FedAvg.",
    ),
    "coteaching": Entry(
        arm="coteaching",
        model_args={"method": "coteaching"},
        description="FedAvg + local Co-teaching baseline of FedGR on the same noisy Fashion-MNIST clients",
        notes="FedAvg of two networks trained by local Co-teaching (Han et al., 2018), simplified: each client keeps "
        "the small-loss fraction 1 - forget of every mini-batch for the peer network, with forget ramped over 5 "
        "rounds to the client's TRUE noise rate (an oracle co-teaching assumes; it favours the baseline). The "
        "published model is the first network.",
    ),
}

register_paper(
    "fedgr",
    PAPER,
    ENTRIES,
    module="zoo.fedgr.module:FedGRModule",
    extra="fl",  # only the Flower engine (zoo.fedgr.flower) needs it; loading and the in-process loop do not
    smoke=(
        "--data.init_args.samples_per_client=24",
        "--model.init_args.samples_per_client=24",
        "--data.init_args.val_size=50",
        "--data.init_args.test_limit=50",
        "--model.init_args.local.epochs=1",
    ),
    task="image-classification",
    datasets=("fashion_mnist",),
    headline="accuracy",
    num_params=206922,
    **INPUT,
)
