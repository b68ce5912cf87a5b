"""FedGR (arXiv:2412.00452): federated learning with noisy labels, and its baselines, on Fashion-MNIST.

This file only registers the entries (it runs whenever the zoo is listed): it imports nothing but the
registry. The code lives in ``zoo.fedgr.{net,augment,federation,sieve,revise,client,server}`` (plain
torch/numpy), ``zoo.fedgr.module`` / ``zoo.fedgr.data`` (Lightning) and ``zoo.fedgr.flower`` (Flower).
"""

from zoo._registry import PaperRef, PretrainedCfg, register_model
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
    # The paper names it (arXiv 2412.00452v3 abstract: "Code: https://github.com/cs-yuxintian/FedGR-ICML26");
    # no snapshot of it could be read here (2026-12-01), so no constant of ours comes from it.
    code="https://github.com/cs-yuxintian/FedGR-ICML26",
)

_SETTING = (
    "Setting: Fashion-MNIST, 10 IID clients x 600 images, each client with its own symmetric label-noise rate ~ "
    "U[0.4, 0.7]; 40 rounds, 5 clients per round, 5 local epochs of SGD (momentum 0.5, batch 32; lr 0.05 for FedGR "
    "and Co-teaching, 0.02 for FedAvg and FedProx, each chosen on the clients' own validation split) (the spec: 30 x "
    "2; longer so that FedAvg at lr 0.05 memorises the noisy labels, issue 31); CNN Conv16-Conv32-FC128 (0.2 M "
    "parameters). Once `zoo eval fedgr --card` has run on this recipe, the checkpoint is the seed-0 fit of the "
    "evaluation; until then (issue 31 open) the published weights and card come from the previous recipe (30 rounds x"
    " 2 local epochs). The card's accuracy is the mean over the seeds listed in metrics.json."
)
_SMOKE = (
    "--data.init_args.samples_per_client=24",
    "--model.init_args.samples_per_client=24",
    "--data.init_args.val_size=50",
    "--data.init_args.test_limit=50",
    "--model.init_args.local.epochs=1",
)

# From `zoo pin NAME --from runs/NAME/pretrained`; metrics: hub_cards/NAME/metrics.json (`zoo eval fedgr --card`).
# fmt: off
_PINS: dict[str, dict[str, str]] = {
    "fedgr.fashion_mnist": {
        "config.json": "95c569d555bffe45e777c6c73299f8c9acf86e74b17b13ed6f890e2f09562800",
        "model.safetensors": "44be62db25e6c22a5a33f17220feabe5d3a8769ee02d1d7f482ba17c32f0e5c6",
    },
    "fedgr.fedavg": {
        "config.json": "8504901f0780a74805a8965483d1d22a51e58c5f6567febdd80227b448915298",
        "model.safetensors": "538f8179925444c4088d8a7799e6d26c247d00acecc12d714300018bfa9e1a52",
    },
    "fedgr.fedprox": {
        "config.json": "7b5109de528185c9b66cf687f925d83635fde784c1a84a24f55ad0c8298161eb",
        "model.safetensors": "5ffa9804dd2c02e636398545e2c3b4caeba31c1cd94330985f37ff6dfecf2e17",
    },
    "fedgr.coteaching": {
        "config.json": "40b5ba2ce5abe3792b92c6bff1f208c1fa9762da32e82353bc52c3084dd8f249",
        "model.safetensors": "abb39908b7c8531a737d15df4b8dfbd0e577bf1e8a6cfbdf519484412895af67",
    },
}
# fmt: on

_ENTRIES = {
    "fashion_mnist": dict(
        arm="fedgr",
        default=True,
        description="FedGR global model: 10 clients with 40-70% symmetric label noise on Fashion-MNIST",
        notes=(
            "FedGR: server-side GMM sieving of the global model's per-sample losses, label refining with the global "
            "model's pseudo-labels, globally revised EMA distillation and global representation regularisation. "
            "Deviations: scaled schedule (10 sniffing + 5 warm-up rounds of 40, soft silent round 10), small CNN "
            "instead of ResNet-18, Fashion-MNIST instead of CIFAR/Clothing1M, L_ema weight 0.3 after round 10 (not in "
            "the seen code; chosen on the clients' validation split from {1.0, 0.3}), SGD lr 0.05 (paper 0.01 over 500"
            " x 10 epochs). Issue 31 fixes: the supervised loss trains on the weak view as the baselines do (the "
            "strong view feeds L_ema and L_reg only); the GMM's split is used only if its two components are separated"
            " (Ashman's D >= 2, noisy component >= 5% of the samples), so clean clients are left untouched; refining "
            "never relabels a sample the sieve calls clean. The full list is in zoo/fedgr/module.py. STATUS (issue 31 "
            "open): the published checkpoints and the card's numbers are still those of the previous recipe (30 rounds"
            " x 2 local epochs, strong-view supervision, unchecked sieve: FedGR 0.701 vs FedAvg 0.774). The fixed and "
            "tuned recipe's evaluation has run in part (benchmarks/fedgr_eval_cache/, "
            "benchmarks/fedgr_eval_partial.json): final test accuracy on seeds 0 and 1, FedGR 0.811 / 0.828 against "
            "the tuned FedAvg 0.792 / 0.795 (lr 0.02, which no longer memorises within 40 rounds), FedProx 0.796 / "
            "0.797, Co-teaching 0.809 / 0.820; detection F1 0.94, noise-rate error 0.013 / 0.019; with clean labels "
            "FedGR 0.885 / 0.883 against FedAvg 0.867 / 0.864, estimated noise 0.000. "
        )
        + _SETTING,
    ),
    "fedavg": dict(
        arm="fedavg",
        description="FedAvg baseline of FedGR: global model on the same noisy Fashion-MNIST clients",
        notes="FedAvg (McMahan et al., 2017), trained on the weak view with the observed (noisy) labels. " + _SETTING,
    ),
    "fedprox": dict(
        arm="fedprox",
        description="FedProx (mu=0.01) baseline of FedGR on the same noisy Fashion-MNIST clients",
        notes="FedProx (Li et al., 2020) with mu = 0.01, otherwise as FedAvg. " + _SETTING,
    ),
    "coteaching": dict(
        arm="coteaching",
        description="FedAvg + local Co-teaching baseline of FedGR on the same noisy Fashion-MNIST clients",
        notes=(
            "FedAvg of two networks trained by local Co-teaching (Han et al., 2018), a label-noise baseline of the "
            "F-LN literature, simplified: each client keeps the small-loss fraction 1 - forget of every mini-batch "
            "for the peer network, with forget ramped over 5 rounds to the client's TRUE noise rate (an oracle "
            "co-teaching assumes; it favours the baseline). The published model is the first network. "
        )
        + _SETTING,
    ),
}

# What the weights take (config.json["pretrained_cfg"]; FedGRModule.transform/predict apply it).
INPUT = dict(FASHION_MNIST_INPUT)

for _tag, _entry in _ENTRIES.items():
    _name = f"fedgr.{_tag}"
    register_model(
        _name,
        module="zoo.fedgr.module:FedGRModule",
        default=_entry.get("default", False),
        description=_entry["description"],
        model_args={"method": _entry["arm"]},
        extra="fl",  # only the Flower engine (zoo.fedgr.flower) needs it; loading and the in-process loop do not
        arm=_entry["arm"],
        smoke=_SMOKE,
        pretrained_cfg=PretrainedCfg(
            paper=PAPER,
            sha256=_PINS.get(_name, {}),
            task="image-classification",
            datasets=("fashion_mnist",),
            headline="accuracy",
            num_params=206922,
            notes=_entry["notes"],
            **INPUT,
        ),
    )
