#!/usr/bin/env bash
# The test suite: library, command line, notebooks in smoke mode, the website in a browser, packaging and
# repository checks.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/setup-venv.sh"
source "$(dirname "${BASH_SOURCE[0]}")/setup-browser.sh"
python -m pytest -q --durations=25 "$@"  # the slowest tests listed at the end: where CI time goes
