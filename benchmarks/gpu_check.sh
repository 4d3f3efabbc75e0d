#!/usr/bin/env bash
# The GPU path checked in one prepared run, each step writing its results under OUT before the next starts:
#   benchmarks/gpu_check.sh OUT [mfu] [variants] [dag] [inference]   the steps named (mfu dag inference when none is)
#   SMALL=1 benchmarks/gpu_check.sh OUT                      a CPU check of the same steps (a tiny training shape)
# mfu        benchmarks/train_mfu.py at config/thesis.yaml's shape: bytes/s, TFLOP/s and MFU, eager and compiled.
# variants   the same for the narrowest k compiled, beside a step that reads its loss once and 4x larger
#            micro-batches, and where a compiled step's time goes (torch.profiler).
# dag        config/smoke.yaml + benchmarks/gpu_check.yaml end to end with Snakemake in runs/gpu-check: the ground
#            truth's training is killed (SIGTERM to its job) mid-run, the run goes on (--keep-going), and a second
#            `snakemake all` resumes it from its resume state; then nothing is left to do. Every rule runs but the
#            quality stage and what reads it (`--omit-from quality`: CPU rules whose packages, MAUVE's faiss, the
#            MiniLM embedder and wordfreq, ~210 MB, cannot travel to a GPU machine without network); the run's
#            tables, logs and training logs go to OUT/gpu-check-results.tar.gz, to compare with a CPU run
#            (benchmarks/compare_runs.py).
# inference  benchmarks/inference_speed.py: sampling bytes/s and SmolLM2's byte marginal positions/s, GPU vs CPU,
#            and where the sampler's time goes on each.
# PYTHON (default python3) must import the packages of pyproject.toml but the quality stage's; on a GPU machine
# without network, benchmarks/gpu_wheels.sh lists the wheels to carry.
set -uo pipefail
OUT=${1:?usage: benchmarks/gpu_check.sh OUT [mfu] [variants] [dag] [inference]}
shift
STEPS=${*:-mfu dag inference}
PY=${PYTHON:-python3}
REPO=$(cd "$(dirname "$0")/.." && pwd)
RUN=runs/gpu-check
CONFIGS=(config/smoke.yaml benchmarks/gpu_check.yaml)
KILLED=gt-nanogpt
export PYTHONPATH=$REPO/src${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1
mkdir -p "$OUT"
cd "$REPO" || exit 1

say() { echo "[$(date +%T)] $*" | tee -a "$OUT/steps.log"; }
smk() { "$PY" -m snakemake "$@" --cores all --directory "$RUN" --configfile "${CONFIGS[@]}"; }  # it takes every word after it

environment() {
  { date -u; uname -a; "$PY" --version; nvidia-smi 2>&1 | head -20
    "$PY" -c 'import torch; print("torch", torch.__version__, "cuda", torch.cuda.is_available(), torch.version.cuda)'
    "$PY" -m pip list 2>/dev/null | grep -iE '^(torch|transformers|numpy|pandas|pyarrow|snakemake|highspy) '
  } > "$OUT/environment.txt" 2>&1
  say "environment: $(grep -m1 -E 'H100|H200|A100|NVIDIA' "$OUT/environment.txt" || echo 'no GPU')"
}

step_mfu() {
  local small=()
  [[ -n ${SMALL:-} ]] && small=(--small --steps 2 --warmup 1)
  say "mfu: start"
  timeout 420 "$PY" benchmarks/train_mfu.py --out "$OUT/mfu.json" "${small[@]}" > "$OUT/mfu.log" 2>&1
  say "mfu: exit $? ($(tail -1 "$OUT/mfu.log"))"
}

step_variants() {
  local small=()
  [[ -n ${SMALL:-} ]] && small=(--small --steps 2 --warmup 1)
  say "variants: start"
  timeout 300 "$PY" benchmarks/train_mfu.py --variants --profile --out "$OUT/variants.json" "${small[@]}" \
    > "$OUT/variants.log" 2>&1
  say "variants: exit $? ($(tail -1 "$OUT/variants.log"))"
}

# The PID of the process that holds `file` open (a training job holds its log).
holder_of() {
  local file fd
  file=$(realpath "$1")
  for fd in /proc/[0-9]*/fd/*; do
    [[ $(readlink "$fd" 2>/dev/null) == "$file" ]] && { echo "$fd" | cut -d/ -f3; return 0; }
  done
  return 1
}

step_dag() {
  local log=$RUN/results/logs/train/$KILLED.log pid started
  local omit=(--omit-from quality)
  "$PY" -c 'from oversmooth.models.causallm import SMOLLM2_GGUF, smollm2_dir; assert (smollm2_dir() / SMOLLM2_GGUF).is_file()' \
    2> /dev/null || { omit+=(convert_smollm2); say "dag: no SmolLM2 GGUF: its conversion and what reads it omitted"; }
  say "dag: start (${CONFIGS[*]}; ${omit[*]})"
  started=$(date +%s)
  smk all --keep-going "${omit[@]}" > "$OUT/dag-1.log" 2>&1 &
  local first=$!
  for _ in $(seq 1 3000); do  # until the training passed iteration 100 of 600 (an evaluation every 10)
    grep -qE "$KILLED it [1-9][0-9]{2}/" "$log" 2>/dev/null && break
    sleep 0.1
  done
  pid=$(holder_of "$log") && kill -TERM "$pid" && say "dag: SIGTERM to $KILLED's job (pid $pid) at: $(grep -oE "$KILLED it [0-9]+" "$log" | tail -1)"
  wait "$first"
  say "dag: first run exit $? after $(( $(date +%s) - started )) s; $(grep -c 'Finished job' "$OUT/dag-1.log") jobs finished"
  smk all --keep-going "${omit[@]}" > "$OUT/dag-2.log" 2>&1
  say "dag: second run exit $? after $(( $(date +%s) - started )) s; $(grep -c 'Finished job' "$OUT/dag-2.log") jobs finished"
  say "dag: $(grep -h -m1 'resumed' "$log" || echo "NOT RESUMED: no 'resumed' line in $log")"
  smk all "${omit[@]}" -n > "$OUT/dag-3.log" 2>&1
  say "dag: afterwards: $(grep -m1 -E 'Nothing to be done|Job stats' "$OUT/dag-3.log")"
  cp "$OUT"/dag-[123].log "$RUN/results/logs/"  # into the archive: OUT brings back few files
  tar -czf "$OUT/gpu-check-results.tar.gz" -C "$RUN" --exclude=results/data/smollm2 --exclude='*.pt' \
    --exclude=results/tokens results && rm "$OUT"/dag-[123].log
  say "dag: results packed ($(du -h "$OUT/gpu-check-results.tar.gz" | cut -f1))"
}

step_inference() {
  local small=() folder=$RUN/results/data/smollm2
  [[ -n ${SMALL:-} ]] && small=(--small)
  [[ -d $folder ]] || folder=""
  say "inference: start (SmolLM2 folder: ${folder:-none})"
  timeout 200 "$PY" benchmarks/inference_speed.py ${folder:+--smollm2 "$folder"} --profile --out "$OUT/inference.json" \
    "${small[@]}" > "$OUT/inference.log" 2>&1
  say "inference: exit $?"
}

environment
for step in $STEPS; do "step_$step"; done
say "done: $STEPS"
