#!/usr/bin/env bash
# Create or reuse the two environments of the course, each with the versions of the Colab runtime its chapters
# ask for (tools/runtimes/colab-gpu.txt and colab-tpu.txt), and put the first on PATH:
#   .venv      Colab's GPU runtime: Python 3.13, torch 2.11 (constraints.txt); every chapter but 08, the tests
#   .venv-tpu  Colab's TPU runtime: Python 3.13, torch 2.9 with torch_xla 2.9 (constraints-tpu.txt); chapter 08
#              and the tests marked xla (torch_xla 2.9, its last release, needs torch 2.9)
# Sourced by run-course.sh and run-tests.sh; re-installs only when a constraints file, pyproject.toml or the
# interpreter change. uv installs (pinned in the constraints, bootstrapped with pip): several times faster than
# pip, and its cache (~/.cache/uv) makes a rebuild of the same versions take seconds. COURSE_LIB_PIP=1 installs
# with pip instead. PYTHON=/path/to/python3.13 picks the interpreter.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
source tools/find-python.sh
want=3.13  # the "# python:" line of both Colab profiles
PYTHON=${PYTHON:-$(python_for "$want" || true)}
[ -n "$PYTHON" ] || { echo "setup: no Python $want here: pyenv install $want, or uv python install $want" >&2; exit 2; }

setup_venv() {  # FOLDER CONSTRAINTS EXTRAS: create or update one environment
  local venv=$1 constraints=$2 extras=$3 stamp start
  stamp=$(cat "$constraints" pyproject.toml <("$PYTHON" --version) | sha256sum | cut -c1-16)
  [ "$(cat "$venv/.course_lib_stamp" 2>/dev/null)" = "$stamp" ] && return 0
  # built afresh whenever its stamp changes: installing over it would keep packages the constraints dropped
  # (a torch_xla beside a newer torch); uv's cache makes the rebuild take seconds
  echo "setup: creating $venv with $("$PYTHON" --version)"
  rm -rf "$venv"
  "$PYTHON" -m venv "$venv"
  echo "setup: installing course_lib[$extras] into $venv from $constraints (the first time takes a few minutes)"
  start=$(date +%s)
  if [ "${COURSE_LIB_PIP:-0}" = 1 ]; then
    "$venv/bin/python" -m pip install -q --upgrade pip
    "$venv/bin/python" -m pip install -q -c "$constraints" -e ".[$extras]"
  else
    "$venv/bin/python" -m pip install -q "$(grep '^uv==' "$constraints")"
    "$venv/bin/uv" pip install -q -p "$venv/bin/python" -c "$constraints" -e ".[$extras]"
  fi
  echo "$stamp" > "$venv/.course_lib_stamp"
  echo "setup: $venv installed in $(( $(date +%s) - start )) s"
}
setup_venv .venv constraints.txt dev
setup_venv .venv-tpu constraints-tpu.txt dev,tpu
export PATH="$PWD/.venv/bin:$PATH"
export COURSE_LIB_TPU_PYTHON="$PWD/.venv-tpu/bin/python"  # the runner's --python TPU=..., the xla tests' Python
# Inductor's FX graph cache (torch 2.9) leaves ATEN_CPU_CAPABILITY out of its key: kernels compiled under
# ATEN_CPU_CAPABILITY=avx2 and loaded without it computed a GELU off by 1.33, or crashed. One cache per
# capability, in the checkout, so a capped run never feeds an uncapped one (set even when already set).
export TORCHINDUCTOR_CACHE_DIR="$PWD/.cache/inductor-${ATEN_CPU_CAPABILITY:-native}"
export PJRT_DEVICE=${PJRT_DEVICE:-CPU} MPLBACKEND=${MPLBACKEND:-Agg} WANDB_MODE=${WANDB_MODE:-offline}
