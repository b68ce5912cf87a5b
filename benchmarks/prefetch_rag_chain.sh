#!/usr/bin/env bash
# prefetch_rag (issue 20): from the recipe fit to the first registered checkpoint and its 3-seed card.
#
# Run it under the CPU lock (the script takes no lock itself: a nested flock on the same file would deadlock):
#     flock /tmp/zoo-cpu.lock bash benchmarks/prefetch_rag_chain.sh               # every step in order
#     flock /tmp/zoo-cpu.lock bash benchmarks/prefetch_rag_chain.sh fit headroom  # or a few steps per locked slot
# Steps (each prints its wall time; logs in $LOGS/<step>.log):
#   fit        zoo fit -c recipes/prefetch_rag/countries.yaml, seed 0 (the published checkpoint)   est. 10 min
#   headroom   validation headroom gates on the declared 120 + 180 set; STOPS the chain if one fails est. 6 min
#   register   copy the export into hub_cards/prefetch_rag.countries/, write pins + num_params into
#              zoo/prefetch_rag/__init__.py (the entry registers), load it back offline             est. 0.5 min
#   tune       python -m zoo.prefetch_rag.tune: tuning.json (8 trials x 3 arms on validation)          est. 25-30 min
#   overhead   benchmarks/prefetch_rag_overhead.py on the published checkpoint                        est. 0.5 min
#   fits       recipe fits of seeds 1 and 2 into $ZOO_PREFETCH_RAG_FITS (PAR=1: both at once,
#              one thread each; PAR=0: one after the other)                            est. 12 min (PAR=1) / 20
#   pieces     eval pieces of seeds 0 1 2 (every arm; one at a time: the wall-clock arm must not
#              share the cores) into $ZOO_PREFETCH_RAG_EVAL_CACHE                                     est. 27 min
#   card       zoo eval prefetch_rag --card from the pieces: metrics.json, README.md, results.png      est. 1 min
#   tests      tests/prefetch_rag (+ the slow golden test), registry/card/usage tests for the entry    est. 4 min
# register must precede tune, overhead, fits and pieces (they need the registered entry); tune must precede pieces
# (a piece is keyed on tuning.json, the pins and the recipe text, so a later change re-decodes instead of reading it).
# The first fit also embeds the knowledge base with MiniLM (cold cache: ~4.7 min more, cached after).
# Measured 2026-12-03 (locked): fit 806 s (279 s of it the cold MiniLM embedding), headroom ~60 s, register 22 s,
# tune 346 s, overhead 12 s, fits 561 s (PAR=1), pieces 453 / 582 / 518 s, card 10 s, tests 62 s: ~62 min in all.
set -euo pipefail

REPO=${REPO:-/work/main}
LOGS=${LOGS:-/tmp/prefetch_chain}
PAR=${PAR:-1}
export ZOO_PREFETCH_RAG_FITS=${ZOO_PREFETCH_RAG_FITS:-/tmp/prefetch_rag_fits}
export ZOO_PREFETCH_RAG_EVAL_CACHE=${ZOO_PREFETCH_RAG_EVAL_CACHE:-/tmp/prefetch_rag_eval}
export HF_HUB_OFFLINE=1 # no network here: the published weights come from the hub_cards mirror
NAME=prefetch_rag.countries
EXPORT=runs/$NAME/pretrained
PY=.venv/bin/python
cd "$REPO"
mkdir -p "$LOGS"

step() { # step NAME COMMAND...: run, log, print the wall time; a failure stops the chain
	local name=$1 start=$SECONDS
	shift
	echo "== $name: $(date -u +%H:%M:%S) UTC: $*"
	if ! "$@" 2>&1 | tee "$LOGS/$name.log"; then
		echo "== $name FAILED after $((SECONDS - start)) s (log: $LOGS/$name.log); chain stopped"
		exit 1
	fi
	echo "== $name: $((SECONDS - start)) s"
}

do_fit() {
	step fit .venv/bin/zoo fit -c recipes/prefetch_rag/countries.yaml
	$PY - "$EXPORT" <<'EOF'
import json, sys
config = json.load(open(f"{sys.argv[1]}/config.json"))
meta = config["metadata"]
choice = meta["stage2"].get("theta_choice", {})
print("fit_time_s", meta["training"]["fit_time_s"], "| stage 2 s", meta["stage2"]["seconds"],
      "| theta", choice.get("theta"), "keep_blocks", choice.get("keep_blocks"), "(10:07 run: 3.0, 2)")
print("heads: auroc", meta["stage2"]["heldout_auroc"], "cosine", meta["stage2"]["head_cosine"])
for trial in choice.get("trials", []):
    print("stage 2 trial", trial)
EOF
}

do_headroom() { # exit status 1 when a gate fails: `step` then stops the chain with the numbers printed above
	step headroom $PY -m zoo.prefetch_rag.tune "$EXPORT" --headroom
}

do_register() {
	local start=$SECONDS
	echo "== register: $(date -u +%H:%M:%S) UTC"
	mkdir -p "hub_cards/$NAME"
	cp -L "$EXPORT"/config.json "$EXPORT"/model.safetensors "$EXPORT"/tokenizer.json "hub_cards/$NAME/"
	$PY - "$NAME" <<'EOF'
import re, sys
from pathlib import Path
from zoo._hub import pinned_files
import zoo

folder = Path("hub_cards") / sys.argv[1]
pins = pinned_files(folder)
assert set(pins) == {"config.json", "model.safetensors", "tokenizer.json"}, pins
assert all(p.stat().st_size < 10_000_000 for p in folder.iterdir()), "a mirror file is over 10 MB"
num_params = sum(p.numel() for p in zoo.load_folder(folder).parameters())
init = Path("zoo/prefetch_rag/__init__.py")
text = init.read_text()
body = "".join(f'    "{k}": "{v}",\n' for k, v in pins.items())
text, n1 = re.subn(r"_SHA256: dict\[str, str\] = \{[^}]*\}", "_SHA256: dict[str, str] = {\n" + body + "}", text)
text, n2 = re.subn(r"_NUM_PARAMS = [\d_]+", f"_NUM_PARAMS = {num_params:_}", text)
assert n1 == n2 == 1, (n1, n2)
init.write_text(text)
print("pinned", pins, "num_params", num_params)
EOF
	.venv/bin/ruff format zoo/prefetch_rag/__init__.py
	.venv/bin/zoo pin "$NAME" # prints the pins from the registered entry: must equal the ones written
	$PY -c "import zoo; m = zoo.load('prefetch_rag', pretrained=True); print('loads offline; theta', float(m.theta), 'keep', int(m.keep_blocks))"
	echo "== register: $((SECONDS - start)) s"
}

do_tune() {
	step tune $PY -m zoo.prefetch_rag.tune
	git diff --stat -- zoo/prefetch_rag/tuning.json || true
}

do_overhead() {
	step overhead $PY benchmarks/prefetch_rag_overhead.py
}

do_fits() {
	if [ "$PAR" = 1 ]; then # two 1-thread workers on the 2 locked cores
		local start=$SECONDS
		echo "== fits (seeds 1 and 2 at once): $(date -u +%H:%M:%S) UTC"
		OMP_NUM_THREADS=1 $PY benchmarks/prefetch_rag_fit_seed.py 1 >"$LOGS/fit_seed1.log" 2>&1 &
		local p1=$!
		OMP_NUM_THREADS=1 $PY benchmarks/prefetch_rag_fit_seed.py 2 >"$LOGS/fit_seed2.log" 2>&1 &
		local p2=$!
		local rc=0
		wait $p1 || rc=1
		wait $p2 || rc=1
		tail -n 2 "$LOGS/fit_seed1.log" "$LOGS/fit_seed2.log"
		[ $rc = 0 ] || {
			echo "== fits FAILED (logs: $LOGS/fit_seed1.log, $LOGS/fit_seed2.log); chain stopped"
			exit 1
		}
		echo "== fits: $((SECONDS - start)) s"
	else
		step fit_seed1 $PY benchmarks/prefetch_rag_fit_seed.py 1
		step fit_seed2 $PY benchmarks/prefetch_rag_fit_seed.py 2
	fi
}

do_pieces() {
	for seed in 0 1 2; do # one piece decodes every arm of the seed (seeds 1 2 load their stored fits)
		step "piece_seed$seed" $PY benchmarks/eval_pieces.py prefetch_rag --arms prefetch --seeds "$seed"
	done
}

do_card() {
	step card .venv/bin/zoo eval prefetch_rag --json "$LOGS/eval.json" --card
	$PY - "$LOGS/eval.json" <<'EOF'
import json, sys
result = json.load(open(sys.argv[1]))
for claim in result["claims"]:
    print(("HOLDS " if claim["holds"] else "FAILS ") + f"{claim['id']}: {claim['value']} vs {claim['threshold']}")
EOF
}

do_tests() {
	# the tests start their own Hub server: no HF_HUB_OFFLINE there
	step tests env -u HF_HUB_OFFLINE $PY -m pytest -q tests/prefetch_rag -m "slow or not slow" \
		tests/test_models.py tests/test_cards.py tests/test_usage.py -k "prefetch" -x
}

STEPS=("$@")
[ ${#STEPS[@]} -gt 0 ] || STEPS=(fit headroom register tune overhead fits pieces card tests)
TOTAL=$SECONDS
for s in "${STEPS[@]}"; do
	case $s in
	fit | headroom | register | tune | overhead | fits | pieces | card | tests) "do_$s" ;;
	*)
		echo "unknown step $s"
		exit 2
		;;
	esac
done
echo "== chain done (${STEPS[*]}): $((SECONDS - TOTAL)) s; then: the card notes (_NOTES) with the measured numbers," \
	"tools/readme_table.py (shared README), commit"
