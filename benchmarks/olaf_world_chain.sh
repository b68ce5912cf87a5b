#!/usr/bin/env bash
# Olaf-World / SeqDelta-REPA (issue 28): tune on validation, fit the two recipes, evaluate 3 seeds. Prepared for the
# lead; nothing here registers, pins or writes hub_cards/ (that stays with the lead, between `fit` and `eval`).
# Run each step under the core-1 lock (every step stays under ~13 minutes of one core; re-run a step to resume):
#
#   flock /tmp/zoo-core1.lock bash benchmarks/olaf_world_chain.sh tune 2>&1 | tee -a runs/olaf_world-chain/log
#
# Steps (default: all, in order; name some to run only those):
#   data     render the Crafter clips (terrain split) and the EfficientNet-Lite0 features of their frames into
#            ~/.cache/icml26-zoo/olaf_world                                               (~40 s clips + ~2 min tau)
#   tune     benchmarks/olaf_world_tune.py: 4 configurations x 3 step counts per arm (lam_vae: beta x lr;
#            lam_align: lambda x lr), validation worlds 40-49 / 90-99, selected by val probe_acc_cross;
#            pieces of at most TUNE_LIMIT s (default 700), resumable; then zoo/olaf_world/tuning.json
#            (8 trials x ~4 min at 1600 steps on 1 core, 0.12-0.14 s a step measured = ~33 min: run `tune` 3 times)
#   --> by hand: put the winners (tuning.json "best") into recipes/olaf_world/{align,vae}.yaml
#   fit      zoo fit -c recipes/olaf_world/align.yaml, then vae.yaml          (~4-5 min each on 1 core, 1600 steps)
#   --> by hand (the lead): copy runs/olaf_world.{align,vae}/pretrained to hub_cards/, zoo pin, register
#   eval     benchmarks/eval_pieces.py olaf_world, seeds 0 1 2, every arm, pieces under EVAL_LIMIT s; results kept in
#            $ZOO_OLAF_WORLD_EVAL_CACHE (default runs/olaf_world-chain/eval_cache)
#            (10 trainings x ~4 min + IDM 2 x ~40 s + scoring ~15 s x 15 = ~45 min on 1 core; run `eval` 4-5 times)
#   card     zoo eval olaf_world --json runs/olaf_world-chain/eval.json --card (every piece cached: ~1 min)
# Expected locked total: ~1 h 30 min of one core (data 3, tune 33, fits 9, eval 45, card 1), in pieces <= 13 min.
# `zoo eval olaf_world` on 2 cores with no cache: ~30-40 min (2 threads a fit), at the edge of the 45 min target:
# time one piece first (eval_pieces prints seconds per piece).
set -euo pipefail

ROOT=${ROOT:-/work/main}
PY=${PY:-$ROOT/.venv/bin/python}
cd "$ROOT"
export PYTHONPATH="$ROOT"
export HF_HUB_OFFLINE=1 ZOO_QUIET=1 HF_HUB_DISABLE_PROGRESS_BARS=1
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1} MKL_NUM_THREADS=${MKL_NUM_THREADS:-1}
export ZOO_OLAF_WORLD_EVAL_CACHE=${ZOO_OLAF_WORLD_EVAL_CACHE:-$ROOT/runs/olaf_world-chain/eval_cache}
TUNE_LIMIT=${TUNE_LIMIT:-700}
EVAL_LIMIT=${EVAL_LIMIT:-600}
PIN=(taskset -c "${CORE:-1}")
mkdir -p runs/olaf_world-chain
TIMES=runs/olaf_world-chain/times.txt

step_data() {
  "${PIN[@]}" "$PY" -c 'from zoo.olaf_world.data import LatentActionVideoDataModule as D
dm = D(split="terrain"); dm.tau(dm.clips("train")); dm.clips("val"); dm.clips("test")
dm2 = D(split="terrain", teacher="random_efficientnet_lite0"); dm2.tau(dm2.clips("train"))
dm3 = D(split="terrain", target="static"); dm3.tau(dm3.clips("train"))'
}

step_tune() {
  "${PIN[@]}" "$PY" benchmarks/olaf_world_tune.py --out runs/olaf_world-chain/tune_trials.json --time-limit "$TUNE_LIMIT"
  "$PY" benchmarks/olaf_world_tune.py --out runs/olaf_world-chain/tune_trials.json --write-tuning \
    || echo "tune: not every trial is done yet; run the step again"
}

step_fit() {
  "${PIN[@]}" "$PY" -m zoo.cli fit -c recipes/olaf_world/align.yaml
  "${PIN[@]}" "$PY" -m zoo.cli fit -c recipes/olaf_world/vae.yaml
}

step_eval() {
  "${PIN[@]}" "$PY" benchmarks/eval_pieces.py olaf_world --seeds 0 1 2 --time-limit "$EVAL_LIMIT"
}

step_card() {
  "${PIN[@]}" "$PY" -m zoo.cli eval olaf_world --json runs/olaf_world-chain/eval.json --card
}

steps=("$@")
[[ ${#steps[@]} -gt 0 ]] || steps=(data tune fit eval card)
source "$ROOT/benchmarks/chain_steps.sh"
run_steps "olaf_world chain in $ROOT" "${steps[@]}"
