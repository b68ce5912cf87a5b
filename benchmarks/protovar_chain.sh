#!/usr/bin/env bash
# ProtoVAR (issue 22): republish on the tokenizer whose dead-code restart fires (recipes/protovar/tokenizer.yaml).
# A new tokenizer changes the VAR's codes, so everything downstream is redone: the VAR, the tuning record, the
# distilled IPC-1/10 sets, the 3-seed evaluation and the three cards. Run it under the CPU lock, from anywhere:
#
#   flock /tmp/zoo-cpu.lock bash benchmarks/protovar_chain.sh 2>&1 | tee /tmp/protovar_chain.log
#
# Steps, in order (default: all of them; name some to run only those, e.g. after a failure
# `... protovar_chain.sh eval card summary`):
#   tokenizer  zoo fit tokenizer.yaml; gate on validation (MSE < 0.02, usage >= 50%: else stop, nothing replaced);
#              copy into hub_cards/protovar.tokenizer, re-pin _PINS["tokenizer"]             (recorded  90 s fit)
#   var        zoo fit var.yaml (tokenizer_from: protovar.tokenizer = the new one, offline mirror, sha-checked);
#              copy into hub_cards/protovar.fmnist, re-pin _PINS["fmnist"]                   (recorded 147 s fit)
#   tune       python -m zoo.protovar.tune -> zoo/protovar/tuning.json (validation only)   (recorded 236 s)
#   distilled  seed-0 protovar IPC 1/10 sets into hub_cards/protovar.fmnist, re-pin         (~30 s, not recorded)
#   eval       benchmarks/protovar_eval_pieces.py, seeds 0 1 2, two 1-thread workers        (recorded ~375 s)
#   card       zoo eval protovar --json runs/protovar-chain/eval.json --card (every piece cached) + README table
#   summary    the card's numbers, the issue's thresholds, a draft of _RESULTS for zoo/protovar/__init__.py
# Not in the default list:
#   cards      re-render the three cards and README's table (after _RESULTS is rewritten; seconds)
# Expected locked total: ~17 min (fits 4 min, tune 4-5, eval 6-7, the rest ~2), well under the 60 min target.
#
# SMOKE=1 ROOT=<a scratch copy of the tree> runs every step at toy size (a check of this script, never a publish).
set -euo pipefail

ROOT=${ROOT:-/work/main}
SMOKE=${SMOKE:-0}
PY=${PY:-/work/main/.venv/bin/python}
cd "$ROOT"
export PYTHONPATH="$ROOT"   # this tree's zoo/, also when ROOT is a scratch copy (the venv's editable install is main's)
export HF_HUB_OFFLINE=1     # published files come from hub_cards/ (the mirror), checked against the new pins
export ZOO_QUIET=1 HF_HUB_DISABLE_PROGRESS_BARS=1   # no progress bars in the log
ZOO=("$PY" -m zoo.cli --quiet)
NICE=()
if [[ $SMOKE == 1 ]]; then
  [[ $(realpath "$ROOT") != /work/main ]] || { echo "SMOKE=1 needs ROOT=<scratch copy>, not the real tree" >&2; exit 2; }
  export OMP_NUM_THREADS=1 MKL_NUM_THREADS=1
  NICE=(nice -n 19)
  SMALL=(--data.init_args.subset=640 --data.init_args.val_limit=64)
  TOK_ARGS=(--trainer.max_steps=5 "${SMALL[@]}")
  VAR_ARGS=(--trainer.max_steps=5 --trainer.val_check_interval=5 --model.init_args.proto_per_class=40 "${SMALL[@]}")
  TUNE_ARGS=(--dry-run --workers 1)
  GATE_ARGS=(--report-only)
  EVAL_SET=(student_steps=2 test_limit=200 ipcs=1)
  PIECE_ARGS=(--workers 1 --set "${EVAL_SET[@]}")
else
  TOK_ARGS=() VAR_ARGS=() TUNE_ARGS=() GATE_ARGS=() EVAL_SET=() PIECE_ARGS=()
fi
mkdir -p runs/protovar-chain
TIMES=runs/protovar-chain/times.txt

step_tokenizer() {
  "${NICE[@]}" "${ZOO[@]}" fit -c recipes/protovar/tokenizer.yaml "${TOK_ARGS[@]}"
  "${NICE[@]}" "$PY" benchmarks/protovar_publish.py gate runs/protovar.tokenizer/pretrained "${GATE_ARGS[@]}"
  "${NICE[@]}" "$PY" benchmarks/protovar_publish.py pin protovar.tokenizer --from runs/protovar.tokenizer/pretrained
}

step_var() {
  "${NICE[@]}" "${ZOO[@]}" fit -c recipes/protovar/var.yaml "${VAR_ARGS[@]}"
  "${NICE[@]}" "$PY" benchmarks/protovar_publish.py pin protovar.fmnist --from runs/protovar.fmnist/pretrained
}

step_tune() {
  "${NICE[@]}" "$PY" -m zoo.protovar.tune "${TUNE_ARGS[@]}"
}

step_distilled() {
  "${NICE[@]}" "$PY" benchmarks/protovar_publish.py distilled
}

step_eval() {
  "${NICE[@]}" "$PY" benchmarks/protovar_eval_pieces.py --seeds 0 1 2 "${PIECE_ARGS[@]}"
}

step_card() {
  if [[ $SMOKE == 1 ]]; then  # --card refuses --set: write the toy cards from the JSON instead
    "${NICE[@]}" "${ZOO[@]}" eval protovar --json runs/protovar-chain/eval.json --set "${EVAL_SET[@]}"
    "${NICE[@]}" "$PY" -c 'import json, sys; from zoo._eval import write_cards
print(*write_cards(json.load(open(sys.argv[1]))), sep="\n")' runs/protovar-chain/eval.json
  else
    "${NICE[@]}" "${ZOO[@]}" eval protovar --json runs/protovar-chain/eval.json --card
  fi
  "${NICE[@]}" "$PY" tools/readme_table.py
}

step_summary() {
  "$PY" benchmarks/protovar_publish.py summary --metrics runs/protovar-chain/eval.json
  echo
  echo "NEXT (unlocked, seconds): rewrite _RESULTS in zoo/protovar/__init__.py from the draft above (the reading"
  echo "of the numbers too: the generator / headroom sentences), then: bash $0 cards; then the protovar tests:"
  echo "  OMP_NUM_THREADS=1 .venv/bin/python -m pytest -q tests/protovar tests/test_models.py -k protovar -m 'slow or not slow'"
}

step_cards() {
  local entry
  for entry in protovar.fmnist protovar.tokenizer protovar.teacher; do "${ZOO[@]}" card "$entry"; done
  "$PY" tools/readme_table.py
}

STEPS=("$@")
[[ ${#STEPS[@]} -gt 0 ]] || STEPS=(tokenizer var tune distilled eval card summary)
source "$ROOT/benchmarks/chain_steps.sh"
run_steps "protovar chain in $ROOT (SMOKE=$SMOKE), zoo from $("$PY" -c 'import zoo; print(zoo.__file__)')" "${STEPS[@]}"
