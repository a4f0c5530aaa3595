#!/usr/bin/env bash
# The test suite: library, command line, notebooks in smoke mode, packaging and repository checks.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/setup-venv.sh"
python -m pytest -q "$@"
