#!/usr/bin/env bash
# The course, end to end: every notebook in smoke mode on the built-in sample data (two at a time, each on its
# share of the cores), each in the environment of the Colab runtime it asks for (chapter 08, a TPU chapter, in
# .venv-tpu), then the website built from what it executed. Executed copies and summary.md /
# summary.json land in _course_run/, the site in _site/.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/setup-venv.sh"
course-book run-notebooks --smoke --out _course_run --python TPU="$COURSE_LIB_TPU_PYTHON" "$@"
cat _course_run/summary.md
course-book site --run _course_run --out _site
