#!/usr/bin/env bash
# The GPU checks of the recorded training step, in one call of about 9 minutes on a machine with an NVIDIA GPU.
# Everything it measures goes under $OUT (default gpu-check/ in the project folder). Run from the project folder:
#   MODEL=path/to/all-minilm-l6-v2 bash tools/gpu_check.sh
#   STAGES="tests bench-minilm" BUDGET=300 OUT=/tmp/gpu-check bash tools/gpu_check.sh
# Its one option is -h/--help (this text; nothing is run or written); its settings are the environment
# variables below (MODEL, DATA, BUDGET, STAGES, OUT), and any argument is refused in one line, as is a setting
# that cannot be (a blank folder, a BUDGET that is no number, an unknown stage, a MODEL without vocab.txt), before
# anything is written.
# MODEL: MiniLM's weights, a folder in HF's layout with its vocab.txt (fp16-rounded weights are upcast to fp32 on
# loading); DATA: the folder of the course CSVs for bench.py (default data/; Part 2 reads data/, the handout's
# paths). Each stage runs under its own time limit, cut to what is left of BUDGET seconds (default 540), so one
# stage that hangs costs its limit and the others still run; the slowest stages come last. $OUT/summary.txt gets
# one line per stage (its exit status and seconds; 124: out of time).
# Stages (STAGES, default the first seven; the --compile ones, which compile for minutes, when named):
#   tests           the CUDA tests of the recorded step, AdamW's paths and the fixed-shape rows
#   bench-minilm    bench.py on MiniLM, SST batch 32: the recorded recipe and plain steps, the eager step, HF's best
#   timing-minilm   bench.py and tools/step_timing.py (the independent timer) on MiniLM, 32 x 64 random ids
#   bench-base      bench.py on the bert-base shape, 32 x 128: recorded, eager, HF's best
#   timing-base     tools/step_timing.py on the same shape
#   part2           Part 2's default recipe for 3 epochs, recorded and then eager, seed 11711
#   inductor        tools/step_timing.py's step with our forward and AdamW's update compiled by Inductor, then
#                   recorded (both shapes): the independent timer of the compile-* stages' recorded step
#   compile-base    bench.py --compile on the bert-base shape: Inductor's forward, backward and AdamW update inside
#                   the recorded step, the compiled eager step, HF's best
#   compile-minilm  the same on MiniLM, SST batch 32 (the plain step: R-Drop off)
#   profile-base    bench.py --profile on the bert-base shape: the eager step's kernel time by kind (the least a
#                   recorded step of those kernels takes) and the floor (its matrix products and AdamW alone)
#   part2-compile   Part 2's default recipe for 3 epochs with --compile, recorded, seed 11711
#   sweep-part2     Part 2's recipe on the card, 3 epochs, seeds 11711, 42 and 7 per point, each point's three runs
#                   before the next: the default, --lr 2e-4, --lr 5e-5, --rdrop_weight 0, --pooling cls (about
#                   40 s a run: a call of its own). Judge on the CPU afterwards: python report.py --compare
#                   --baseline $OUT/sweep/default-*/run --candidate $OUT/sweep/lr2e-4-*/run [...]
# On an H100 the stages took (seconds) 20, 117, 57, 97, 30, 186 (44 recorded, 142 eager), and Inductor's compilation
# alone outlasted the 34 s left of a 540 s budget: give `STAGES=inductor` a call of its own. The --compile stages
# took 68 (tests, with the compiled ones), 198, 197, 22 and 149: run them as a set of their own. What the recorded step
# must keep showing to stay --use_gpu's default: docs/hardware.md.
set -uo pipefail
# The arguments first, before anything is written: --help prints the comment above, anything else is one line.
for arg in "$@"; do
  case $arg in
    -h|--help)
      sed -n '2,/^set -uo pipefail$/p' "$0" | sed -e '$d' -e 's/^# \{0,1\}//'
      exit 0 ;;
    *)
      echo "tools/gpu_check.sh: $arg: not an option (its one option is --help; its settings are environment" \
        "variables, e.g. MODEL=DIR STAGES=\"tests\" OUT=DIR bash tools/gpu_check.sh)" >&2
      exit 2 ;;
  esac
done
cd "$(dirname "$0")/.."
OUT="${OUT-gpu-check}"
MODEL="${MODEL-pretrained/all-minilm-l6-v2}"
DATA="${DATA-data}"
BUDGET="${BUDGET-540}"
STAGES="${STAGES-tests bench-minilm timing-minilm bench-base timing-base part2 inductor}"
KNOWN="tests bench-minilm timing-minilm bench-base timing-base part2 inductor compile-base compile-minilm
       profile-base part2-compile sweep-part2"
# The settings next, each a line of its own when wrong, still before anything is written or run.
refuse() { echo "tools/gpu_check.sh: $1" >&2; exit 2; }
for name in OUT MODEL DATA; do
  [ -n "${!name// /}" ] || refuse "$name='${!name}': empty or blank; give a folder, or leave $name unset"
done
[[ "$BUDGET" =~ ^[0-9]+$ ]] && [ "$BUDGET" -gt 0 ] ||
  refuse "BUDGET=$BUDGET: not a whole number of seconds above 0 (default 540)"
[ -n "${STAGES// /}" ] || refuse "STAGES='$STAGES': no stage; name some of: $(echo $KNOWN)"
seen=" "
for stage in $STAGES; do
  [[ " $(echo $KNOWN) " == *" $stage "* ]] || refuse "STAGES: $stage is not a stage; choose from: $(echo $KNOWN)"
  [[ "$seen" != *" $stage "* ]] || refuse "STAGES: $stage is named twice; each stage runs once"
  seen="$seen$stage "
done
[ -f "$MODEL/vocab.txt" ] || refuse "MODEL=$MODEL: no vocab.txt there; give MiniLM's folder (HF's layout)"
[ ! -e "$OUT" ] || [ -d "$OUT" ] || refuse "OUT=$OUT: is a file, not a folder; give a folder to write into"
# The rule for every output: never among the project's code, docs or data; a folder this script did not make (its
# mark, .gpu-check) is written into only when empty, so that no file of the user's is replaced.
out_abs="$(realpath -m "$OUT")"
for part in . .git .ci minbert gpt2 tests tools docs benchmarks data; do
  here="$(realpath -m "$part")"
  [ "$out_abs" != "$here" ] && { [ "$part" = . ] || [[ "$out_abs" != "$here"/* ]]; } ||
    refuse "OUT=$OUT: among the project's own code, docs or data; give a folder outside them (default gpu-check)"
done
[ ! -d "$OUT" ] || [ -f "$OUT/.gpu-check" ] || [ -z "$(ls -A "$OUT")" ] ||
  refuse "OUT=$OUT: holds files this script did not write; give a new or empty folder"
mkdir -p "$OUT"
touch "$OUT/.gpu-check"
START=$SECONDS
export PYTHONUNBUFFERED=1
{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv
  python -c "import torch, transformers; print(torch.__version__, torch.version.cuda, transformers.__version__)"
} > "$OUT/gpu.txt" 2>&1
run() {  # run NAME LIMIT CMD...: output in $OUT/NAME.log; exit status and seconds in $OUT/summary.txt
  local name=$1 limit=$2; shift 2
  local left=$((BUDGET - (SECONDS - START)))
  if [ "$left" -lt 15 ]; then
    echo "$name skipped (budget spent)" | tee -a "$OUT/summary.txt"
    return
  fi
  [ "$limit" -gt "$left" ] && limit=$left
  local t0=$SECONDS
  timeout -k 5 "$limit" "$@" > "$OUT/$name.log" 2>&1
  local rc=$?
  echo "$name rc=$rc $((SECONDS - t0))s (limit ${limit}s)" | tee -a "$OUT/summary.txt"
}
gpu="--use_gpu"
for stage in $STAGES; do
  case $stage in
    tests)
      run tests 120 python -m pytest -q -p no:cacheprovider tests/minbert/training/test_recorded.py \
        tests/test_optimizer.py tests/minbert/objectives/test_rows.py -k "cuda or bf16 or replays" ;;
    bench-minilm)
      run bench-minilm 120 python bench.py $gpu --pretrained "$MODEL" --data sst --data_dir "$DATA" \
        --batch_size 32 --hf best --steps 100 --repeats 1 --json "$OUT/bench-minilm-sst-b32.json" ;;
    timing-minilm)
      run bench-minilm-64 45 python bench.py $gpu --pretrained "$MODEL" --data synthetic --seq_len 64 \
        --batch_size 32 --rdrop_weight 0 --smart_weight 0 --steps 100 --json "$OUT/bench-minilm-synthetic-64.json"
      run timing-minilm-64 45 python tools/step_timing.py $gpu --pretrained "$MODEL" --seq_len 64 --batch_size 32 \
        --rows ours,ours-graph --steps 100 --json "$OUT/timing-minilm-64.json" ;;
    bench-base)
      run bench-base 120 python bench.py $gpu --config base --data synthetic --seq_len 128 \
        --batch_size 32 --hf best --steps 50 --repeats 1 --json "$OUT/bench-base-synthetic-128.json" ;;
    timing-base)
      run timing-base-128 45 python tools/step_timing.py $gpu --config base --seq_len 128 --batch_size 32 \
        --rows ours,ours-graph --steps 50 --json "$OUT/timing-base-128.json" ;;
    part2)
      for path in recorded eager; do
        flag=""; [ $path = eager ] && flag="--no_record_step"
        outs=""
        for t in sst para sts; do for s in dev test; do
          outs="$outs --${t}_${s}_out $OUT/part2-$path/$t-$s-output.csv"; done; done
        mkdir -p "$OUT/part2-$path"
        run "part2-$path" $([ $path = recorded ] && echo 100 || echo 150) python multitask_classifier.py $gpu \
          --pretrained "$MODEL" --epochs 3 --seed 11711 --run_dir "$OUT/part2-$path/run" \
          --results "$OUT/part2-$path/results.csv" $outs $flag
      done ;;
    inductor)
      run inductor-minilm-64 180 python tools/step_timing.py $gpu --pretrained "$MODEL" --seq_len 64 --batch_size 32 \
        --rows ours-inductor-graph --steps 100 --json "$OUT/inductor-minilm-64.json"
      run inductor-base-128 180 python tools/step_timing.py $gpu --config base --seq_len 128 --batch_size 32 \
        --rows ours-inductor-graph --steps 50 --json "$OUT/inductor-base-128.json" ;;
    compile-base)
      run compile-base 260 python bench.py $gpu --compile --config base --data synthetic --seq_len 128 \
        --batch_size 32 --hf best --steps 50 --repeats 1 --json "$OUT/compile-base-synthetic-128.json" ;;
    compile-minilm)
      run compile-minilm 260 python bench.py $gpu --compile --pretrained "$MODEL" --data sst --data_dir "$DATA" \
        --batch_size 32 --rdrop_weight 0 --smart_weight 0 --hf best --steps 100 --repeats 1 \
        --json "$OUT/compile-minilm-sst-b32.json" ;;
    profile-base)
      run profile-base 90 python bench.py $gpu --no_record_step --config base --data synthetic --seq_len 128 \
        --batch_size 32 --steps 20 --repeats 1 --profile 5 --json "$OUT/profile-base-synthetic-128.json" ;;
    part2-compile)
      outs=""
      for t in sst para sts; do for s in dev test; do
        outs="$outs --${t}_${s}_out $OUT/part2-compile/$t-$s-output.csv"; done; done
      mkdir -p "$OUT/part2-compile"
      run part2-compile 200 python multitask_classifier.py $gpu --compile --pretrained "$MODEL" --epochs 3 \
        --seed 11711 --run_dir "$OUT/part2-compile/run" --results "$OUT/part2-compile/results.csv" $outs ;;
    sweep-part2)
      for point in "default:" "lr2e-4:--lr 2e-4" "lr5e-5:--lr 5e-5" "no-rdrop:--rdrop_weight 0" "cls:--pooling cls"
      do
        name=${point%%:*}
        for seed in 11711 42 7; do
          dir="$OUT/sweep/$name-$seed"
          outs=""
          for t in sst para sts; do for s in dev test; do outs="$outs --${t}_${s}_out $dir/$t-$s-output.csv"; done; done
          mkdir -p "$dir"
          # (word splitting of the point's flags is meant)
          run "sweep-$name-$seed" 75 python multitask_classifier.py $gpu --pretrained "$MODEL" --epochs 3 \
            --seed $seed --run_dir "$dir/run" --results "$OUT/sweep/results.csv" $outs ${point#*:}
        done
      done ;;
  esac
done
cat "$OUT/summary.txt"
