#!/usr/bin/env bash
# The GPU checks of the recorded training step, in one call on a machine with an NVIDIA GPU; everything it
# measures goes under $OUT (default ./gpu-check). Run from the project folder, with MiniLM's weights at
# pretrained/all-minilm-l6-v2 (a folder in HF's layout; fp16-rounded weights are upcast to fp32 on loading) and the
# course CSVs in data/.
#   bash tools/gpu_check.sh              # every stage below
#   STAGES="tests bench" bash tools/gpu_check.sh
# Stages: tests (the CUDA tests of the recorded step and the device paths), bench (bench.py --record_step and
# tools/step_timing.py on MiniLM/SST and the bert-base shape), part2 (Part 2's default recipe, 3 epochs, recorded
# and eager, one seed). What they must show before --use_gpu records by default: docs/hardware.md.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT="${OUT:-gpu-check}"
mkdir -p "$OUT"
MODEL="${MODEL:-pretrained/all-minilm-l6-v2}"
STAGES="${STAGES:-tests bench part2}"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv > "$OUT/gpu.txt" 2>&1
python -c "import torch, transformers; print(torch.__version__, torch.version.cuda, transformers.__version__)" \
  >> "$OUT/gpu.txt" 2>&1
run() {  # run NAME CMD...: its output in $OUT/NAME.log, its wall time and exit status in $OUT/summary.txt
  local name=$1; shift
  local t0=$SECONDS
  "$@" > "$OUT/$name.log" 2>&1
  local rc=$?
  echo "$name rc=$rc $((SECONDS - t0))s" | tee -a "$OUT/summary.txt"
}
for stage in $STAGES; do
  case $stage in
    tests)
      run tests python -m pytest -q -x -p no:cacheprovider tests/minbert/training/test_recorded.py \
        tests/minbert/objectives/test_rows.py -k "cuda or recorded or replays" ;;
    bench)
      run bench-minilm python bench.py --use_gpu --record_step --pretrained "$MODEL" --data sst --batch_size 32 \
        --hf --json "$OUT/bench-minilm-sst-b32.json"
      run bench-base python bench.py --use_gpu --record_step --config base --data synthetic --seq_len 128 \
        --batch_size 32 --hf --json "$OUT/bench-base-synthetic-b32.json"
      run timing-minilm python tools/step_timing.py --use_gpu --pretrained "$MODEL" --seq_len 64 --batch_size 32 \
        --json "$OUT/timing-minilm-64.json"
      run bench-minilm-64 python bench.py --use_gpu --record_step --pretrained "$MODEL" --data synthetic \
        --seq_len 64 --batch_size 32 --hf --json "$OUT/bench-minilm-synthetic-64.json"
      run timing-base python tools/step_timing.py --use_gpu --config base --seq_len 128 --batch_size 32 \
        --json "$OUT/timing-base-128.json" ;;
    part2)
      for path in recorded eager; do
        flag=""; [ $path = recorded ] && flag="--record_step"
        outs=""
        for t in sst para sts; do for s in dev test; do outs="$outs --${t}_${s}_out $OUT/part2-$path-out/$t-$s-output.csv"; done; done
        mkdir -p "$OUT/part2-$path-out"
        run "part2-$path" python multitask_classifier.py --use_gpu --pretrained "$MODEL" --epochs 3 --seed 11711 \
          --run_dir "$OUT/part2-$path" --results "$OUT/part2-$path-out/results.csv" $outs $flag
      done ;;
    *) echo "unknown stage $stage" | tee -a "$OUT/summary.txt" ;;
  esac
done
cat "$OUT/summary.txt"
