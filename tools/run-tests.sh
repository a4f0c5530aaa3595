#!/usr/bin/env bash
# The test suite: library, command line, notebooks in smoke mode, the website in a browser, packaging and
# repository checks.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/setup-venv.sh"
source "$(dirname "${BASH_SOURCE[0]}")/setup-browser.sh"
# Two test processes (pytest-xdist) where there are two cores or more, each with its share of them, as the
# course runner does: most of a test's time is one core's (imports, subprocesses, compilers). Each file stays
# on one worker (tests/conftest.py). COURSE_LIB_TEST_WORKERS=1 runs the tests in one process.
workers=${COURSE_LIB_TEST_WORKERS:-$(( $(nproc) >= 2 ? 2 : 1 ))}
if [ "$workers" -gt 1 ]; then
  export OMP_NUM_THREADS=${OMP_NUM_THREADS:-$(( $(nproc) / workers > 0 ? $(nproc) / workers : 1 ))}
  # Inductor bakes the thread count into the code it caches and leaves it out of the key (torch 2.9)
  export TORCHINDUCTOR_CACHE_DIR="$TORCHINDUCTOR_CACHE_DIR-$OMP_NUM_THREADS-threads"
  set -- -n "$workers" "$@"
fi
python -m pytest -q --durations=25 "$@"  # the slowest tests listed at the end: where CI time goes
