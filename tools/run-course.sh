#!/usr/bin/env bash
# The course, end to end: every notebook in smoke mode on the built-in sample data (two at a time, each on its
# share of the cores), then the website built from what it executed. Executed copies and summary.md /
# summary.json land in _course_run/, the site in _site/.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/setup-venv.sh"
course-book run-notebooks --smoke --out _course_run "$@"
cat _course_run/summary.md
course-book site --run _course_run --out _site
