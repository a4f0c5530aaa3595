#!/usr/bin/env bash
# Create or reuse .venv in the repository root and install course_lib with the versions CI runs on.
# Sourced by run-course.sh and run-tests.sh; re-installs only when constraints.txt or pyproject.toml change.
# uv installs (pinned in constraints.txt, bootstrapped with pip): several times faster than pip, and its cache
# (~/.cache/uv) makes a rebuild of the same versions take seconds. COURSE_LIB_PIP=1 installs with pip instead.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
PYTHON=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  echo "setup: creating .venv with $($PYTHON --version)"
  "$PYTHON" -m venv .venv
fi
stamp=$(cat constraints.txt pyproject.toml | sha256sum | cut -c1-16)
if [ "$(cat .venv/.course_lib_stamp 2>/dev/null)" != "$stamp" ]; then
  echo "setup: installing course_lib[dev,tpu] from constraints.txt (the first time takes a few minutes)"
  setup_start=$(date +%s)
  if [ "${COURSE_LIB_PIP:-0}" = 1 ]; then
    .venv/bin/python -m pip install -q --upgrade pip
    .venv/bin/python -m pip install -q -c constraints.txt -e ".[dev,tpu]"
  else
    .venv/bin/python -m pip install -q "$(grep '^uv==' constraints.txt)"
    .venv/bin/uv pip install -q -p .venv/bin/python -c constraints.txt -e ".[dev,tpu]"
  fi
  echo "$stamp" > .venv/.course_lib_stamp
  echo "setup: .venv installed in $(( $(date +%s) - setup_start )) s"
fi
export PATH="$PWD/.venv/bin:$PATH"
# Inductor's FX graph cache (torch 2.9) leaves ATEN_CPU_CAPABILITY out of its key: kernels compiled under
# ATEN_CPU_CAPABILITY=avx2 and loaded without it computed a GELU off by 1.33, or crashed. One cache per
# capability, in the checkout, so a capped run never feeds an uncapped one (set even when already set).
export TORCHINDUCTOR_CACHE_DIR="$PWD/.cache/inductor-${ATEN_CPU_CAPABILITY:-native}"
export PJRT_DEVICE=${PJRT_DEVICE:-CPU} MPLBACKEND=${MPLBACKEND:-Agg} WANDB_MODE=${WANDB_MODE:-offline}
