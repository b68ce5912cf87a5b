# Sourced by the paper chain scripts (benchmarks/<paper>_chain.sh): runs their step_<name> functions in order.
#
#   run_steps HEADER STEP...
#
# Checks that every step exists before running any, times each one, appends
# "<date> SMOKE=<0|1> step <name>: <seconds> s" to $TIMES (relative to $ROOT) and prints the total.
run_steps() {
  local header=$1 step start line chain_start
  shift
  for step in "$@"; do
    declare -F "step_$step" >/dev/null || { echo "unknown step $step" >&2; exit 2; }
  done
  echo "$header: $*"
  chain_start=$(date +%s)
  for step in "$@"; do
    echo "=== $(date -u +%T) step $step"
    start=$(date +%s)
    "step_$step"
    line="step $step: $(($(date +%s) - start)) s"
    echo "=== $(date -u +%T) $line"
    echo "$(date -u +%F' '%T) SMOKE=${SMOKE:-0} $line" >>"$TIMES"
  done
  echo "=== total $(($(date +%s) - chain_start)) s (per-step times also in $ROOT/$TIMES)"
}
