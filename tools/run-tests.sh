#!/usr/bin/env bash
# The test suite: library, command line, notebooks in smoke mode, the website in a browser, packaging and
# repository checks.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/setup-venv.sh"
source "$(dirname "${BASH_SOURCE[0]}")/setup-browser.sh"
# Two test processes (pytest-xdist) where there are two cores or more: most of a test's time is one core's
# (imports, subprocesses, compilers). tests/conftest.py gives each worker its share of the cores, as the course
# runner does, and keeps each file on one worker. COURSE_LIB_TEST_WORKERS=1 runs the tests in one process.
workers=${COURSE_LIB_TEST_WORKERS:-$(( $(nproc) >= 2 ? 2 : 1 ))}
if [ "$workers" -gt 1 ]; then
  set -- -n "$workers" "$@"
fi
python -m pytest -q --durations=25 "$@"  # the slowest tests listed at the end: where CI time goes
