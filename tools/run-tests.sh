#!/usr/bin/env bash
# The test suite: library, command line, notebooks in smoke mode, the website in a browser, packaging and
# repository checks. In two parts, each in the environment of the Colab runtime it is about: everything in .venv
# (the GPU runtime's versions), then the tests marked xla (torch_xla needs torch 2.9) in .venv-tpu (the TPU
# runtime's). Both parts run; the command fails when either does.
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
# pytest's exit status 5 means "no test selected": a part that a chosen file or -k leaves empty is not a failure,
# both parts empty is
main=0 xla=0
python -m pytest -q --durations=25 -m "not xla" "$@" || main=$?  # the slowest tests listed: where CI time goes
echo "tests marked xla, in .venv-tpu ($("$COURSE_LIB_TPU_PYTHON" --version), torch_xla):"
PATH="$(dirname "$COURSE_LIB_TPU_PYTHON"):$PATH" "$COURSE_LIB_TPU_PYTHON" -m pytest -q --durations=10 -m xla "$@" || xla=$?
for part in $main $xla; do
  [ "$part" = 0 ] || [ "$part" = 5 ] || exit "$part"
done
[ "$main$xla" != 55 ] || { echo "run-tests: no test selected in either part" >&2; exit 5; }
