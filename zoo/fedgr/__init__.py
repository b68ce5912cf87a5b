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
    "U[0.4, 0.7]; 80 rounds, 5 clients per round, 5 local epochs of SGD (momentum 0.5, batch 32; lr 0.05 for FedGR, "
    "0.02 for Co-teaching, 0.01 for FedAvg and FedProx, each baseline's chosen on the clients' own validation split "
    "at 80 rounds) (the spec: 30 x 2; longer so that FedAvg memorises the noisy labels, issue 31); CNN "
    "Conv16-Conv32-FC128 (0.2 M parameters). The published checkpoints are the seed-0 fits of `zoo eval fedgr` on "
    "these recipes (exported with ZOO_FEDGR_EXPORT). The card's accuracy is the mean over the seeds listed in "
    "metrics.json."
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
        "config.json": "375ef785a147c4829a8b91ff70fe787d082b63126899325a186055a49713ad80",
        "model.safetensors": "c9bc1493aabfc0b5e0bd697810524e78094cfb92d202e7c31e729be2c0e36210",
    },
    "fedgr.fedavg": {
        "config.json": "e450c618ae94a8d150b396580f92d26c699e91e33b71e70319f7320ac758a978",
        "model.safetensors": "af86c30ad46c7a51018ca7e6101b0899f07e430030413e1757af0a70ef3e4eeb",
    },
    "fedgr.fedprox": {
        "config.json": "fb2806af5c7b07097c8493bd89ac95e653fc36d5e9d229725143432579ae4415",
        "model.safetensors": "0563849c8270e010d70e47687ddb2e37cc7593d408f1a8115dc88d3bb26e5247",
    },
    "fedgr.coteaching": {
        "config.json": "e1c3767d4b870c7798d3e061ef216bbccfc61c1e3ed15d485430c178ed877faa",
        "model.safetensors": "12f31fa0b2895631af119761301f232d285494b31b4e6c048f92c73f8d52367f",
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
            "Deviations: scaled schedule (10 sniffing + 5 warm-up rounds of 80, soft silent round 10), small CNN "
            "instead of ResNet-18, Fashion-MNIST instead of CIFAR/Clothing1M, L_ema weight 0.3 after round 10 (not in "
            "the seen code; chosen on the clients' validation split at 80 rounds from {1.0, 0.3}), SGD lr 0.05 (paper "
            "0.01 over 500 x 10 epochs). Issue 31 fixes: the supervised loss trains on the weak view as the baselines "
            "do (the strong view feeds L_ema and L_reg only); the GMM's split is used only if its two components are "
            "separated (Ashman's D >= 2, noisy component >= 5% of the samples), so clean clients are left untouched; "
            "refining never relabels a sample the sieve calls clean. The full list is in zoo/fedgr/module.py. STATUS "
            "(issue 31 open): the card is `zoo eval fedgr` on 3 seeds (2026-12-02) of every arm but the four "
            "ablations, which are not run yet (the card lists them as missing). Final test accuracy: FedGR 0.817 +- "
            "0.009 against the tuned FedAvg 0.800 +- 0.011 (+1.8 points; the claimed 5 do not hold), FedProx 0.803, "
            "Co-teaching with oracle forget rates 0.822; detection F1 0.93, noise-rate error 0.018; with clean labels "
            "FedGR 0.883 against FedAvg 0.864, estimated noise 0.000. At its tuned lr (0.02) FedAvg does not memorise "
            "within 40 rounds (best round 0.804, final 0.800), so this setting does not yet show the failure FedGR is "
            "built to fix. The cards' recipe times are those seed-0 fits: one thread, beside a second fit, and for "
            "fedgr and fedavg also beside other jobs (16.7 and 12.4 min); seed 2 ran cleaner (586 and 392 s), and "
            "since 0f8a8fe a fit is ~1.5x faster with identical numbers. "
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
