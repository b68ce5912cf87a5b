#!/usr/bin/env bash
# DeepHA (issue 26): validation tuning, the two published recipe fits and the 3-seed evaluation. Run it under the
# CPU lock (it uses both cores), from anywhere:
#
#   flock /tmp/zoo-cpu.lock bash benchmarks/deepha_chain.sh 2>&1 | tee /tmp/deepha_chain.log
#
# Steps, in order (default: tune apply fit_coa fit_flat; name some to run only those, e.g. `... deepha_chain.sh eval`):
#   tune      python -m zoo.deepha.tune: 4 trials x 5 arms (18 fits; flat's and decoupled's drop trial is their recipe
#             trial), seed 100, 50 validation episodes per training level, two 1-thread workers
#             -> zoo/deepha/tuning.json; trials kept in runs/deepha-tune/ (resumes)   (expected ~75-85 min: ~150
#             core-min, e.g. a coa trial = 10 min fit + 1 min rollouts; SMOKE version measured 105 s)
#   apply     python -m zoo.deepha.tune --apply: the chosen values of coa_compressed / flat into babyai.yaml /
#             flat.yaml (review the diff)                                                            (seconds)
#   fit_coa   zoo fit -c recipes/deepha/babyai.yaml  -> runs/deepha.babyai/pretrained  (measured 606 s on 1 core, 8 ep, MLP encoder; 658 s with FiLM)
#   fit_flat  zoo fit -c recipes/deepha/flat.yaml    -> runs/deepha.flat/pretrained    (measured 194 s on 1 core, 8 ep, MLP encoder; 277 s with FiLM)
# Then (lead): copy the two exports into hub_cards/, register deepha + deepha.flat, `zoo pin`, and:
#   eval      zoo eval deepha, seeds 0 1 2 (seed 0 on the published weights), pieces in runs/deepha-eval/
#             (resumable: a rerun reads every finished (arm, seed) piece)  -> runs/deepha-chain/eval.json
#             (expected ~60-65 min on 2 cores at 8 epochs: 13 fits ~88 core-min + 21 rollout pieces ~35 core-min;
#             ~45 min only with seed-0 checkpoints of all five trained arms AND 6 epochs; SMOKE measured 145 s)
#   card      zoo eval deepha --card with the same piece folder (every piece cached: seconds)
#
# SMOKE=1 ROOT=<a scratch copy of the tree> runs tune / fits at toy size (a check of this script, never a publish).
set -euo pipefail

ROOT=${ROOT:-/work/main}
SMOKE=${SMOKE:-0}
PY=${PY:-/work/main/.venv/bin/python}
cd "$ROOT"
export PYTHONPATH="$ROOT"
export HF_HUB_OFFLINE=1 ZOO_QUIET=1 HF_HUB_DISABLE_PROGRESS_BARS=1
export ZOO_DEEPHA_EVAL_CACHE="$ROOT/runs/deepha-eval"
ZOO=("$PY" -m zoo.cli --quiet)
if [[ $SMOKE == 1 ]]; then
  [[ $(realpath "$ROOT") != /work/main ]] || { echo "SMOKE=1 needs ROOT=<scratch copy>, not the real tree" >&2; exit 2; }
  TUNE_ARGS=(--dry-run)
  FIT_ARGS=(--trainer.max_steps=3 --data.init_args.episodes_per_level=4 --data.init_args.val_episodes_per_level=1)
  EVAL_SET=(--set split=validation test_episodes=2 boss_episodes=1 latency_episodes=1 horizon=16 fit_max_steps=3 train_demos=4)
else
  TUNE_ARGS=() FIT_ARGS=() EVAL_SET=()
fi
mkdir -p runs/deepha-chain
TIMES=runs/deepha-chain/times.txt

step_tune() { "$PY" -m zoo.deepha.tune "${TUNE_ARGS[@]}"; }

step_apply() {
  if [[ $SMOKE == 1 ]]; then echo "(SMOKE: the dry-run record is not applied)"; return; fi
  "$PY" -m zoo.deepha.tune --apply
  git -C "$ROOT" diff --stat -- recipes/deepha || true
}

step_fit_coa() { OMP_NUM_THREADS=1 "${ZOO[@]}" fit -c recipes/deepha/babyai.yaml "${FIT_ARGS[@]}"; }

step_fit_flat() { OMP_NUM_THREADS=1 "${ZOO[@]}" fit -c recipes/deepha/flat.yaml "${FIT_ARGS[@]}"; }

step_eval() { "${ZOO[@]}" eval deepha --json runs/deepha-chain/eval.json "${EVAL_SET[@]}"; }

step_card() { "${ZOO[@]}" eval deepha --json runs/deepha-chain/eval.json --card; }

STEPS=("$@")
[[ ${#STEPS[@]} -gt 0 ]] || STEPS=(tune apply fit_coa fit_flat)
source "$ROOT/benchmarks/chain_steps.sh"
run_steps "deepha chain in $ROOT (SMOKE=$SMOKE)" "${STEPS[@]}"
