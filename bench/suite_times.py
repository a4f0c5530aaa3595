"""The test suite's seconds per file, from the `_test_run/times.json` files that tests/conftest.py writes at
the end of every run, side by side (for example one run on a CPU with AVX-512 and one capped at AVX2).

    python bench/suite_times.py LABEL=times.json [LABEL=times.json ...] > bench/SUITE.md
"""

import json
import sys
from pathlib import Path


def table(runs: dict[str, dict]) -> str:
    "A markdown table: a row per test file (slowest first in the first run), a column per run."
    labels = list(runs)
    files = sorted(
        {f for r in runs.values() for f in r["files"]}, key=lambda f: -runs[labels[0]]["files"].get(f, 0)
    )
    head = "| file | " + " | ".join(labels) + " |\n|---|" + "---:|" * len(labels) + "\n"
    rows = "".join(
        f"| {f} | " + " | ".join(f"{runs[k]['files'].get(f, 0):.0f}" for k in labels) + " |\n" for f in files
    )
    total = "| **suite (wall)** | " + " | ".join(f"**{runs[k]['seconds']:.0f}**" for k in labels) + " |\n"
    return head + rows + total


def main(args: list[str]) -> int:
    if not args or any("=" not in a for a in args):
        print(__doc__.strip(), file=sys.stderr)
        return 2
    runs = {a.split("=", 1)[0]: json.loads(Path(a.split("=", 1)[1]).read_text()) for a in args}
    print(table(runs), end="")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
