"""Run library and book notebooks top to bottom in this one process, each in a fresh IPython shell in its own
folder (nbdev's `test_nb`, as `nbdev_test` runs notebooks): torch and the course are imported once, not once
per kernel. Usage: python tests/library_notebooks.py OUT.json NOTEBOOK...; OUT.json gets
{notebook: {"ok": bool, "seconds": float}}, written after each notebook."""

import json
import sys
from pathlib import Path

from nbdev.test import test_nb


def main(out: str, *notebooks: str) -> None:
    results = {}
    for nb in notebooks:
        print(f"=== {nb}", file=sys.stderr, flush=True)  # a traceback below belongs to this notebook
        ok, seconds = test_nb(Path(nb).resolve(), skip_flags=["notest"], showerr=True)
        results[nb] = dict(ok=bool(ok), seconds=round(seconds, 1))
        Path(out).write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main(*sys.argv[1:])
