#!/usr/bin/env bash
# Reproduce a learner's runtime (Colab or Kaggle) on this machine and run the smoke course in it.
#   bash tools/check-runtime.sh NAME [--only PATTERN]
#   NAME: colab-gpu, colab-tpu, kaggle-gpu or kaggle-tpu (tools/runtimes/NAME.txt); --only overrides the profile's
#   "# run:" line (run-notebooks --only syntax: 08,09).
# Builds .venv-NAME with the runtime's Python minor version and package versions, installs course_lib the way the
# notebooks' first cell does, checks that this changed none of the runtime's torch, torchvision or torch_xla, runs
# every notebook in smoke mode, and writes _runtimes/NAME/summary.json. A notebook listed as "# expect:" in the
# profile must stop with that message (chapter 08 on a GPU runtime); a "# run:" line limits the run to the notebooks
# matching it (run-notebooks --only). Exit status 0 when everything is as expected.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
root=$PWD
name=${1:?usage: bash tools/check-runtime.sh NAME (one of: $(ls tools/runtimes | sed 's/\.txt$//' | tr '\n' ' '))}
profile=tools/runtimes/$name.txt
[ -f "$profile" ] || { echo "check-runtime: no profile $profile; choose one of: $(ls tools/runtimes | sed 's/\.txt$//' | tr '\n' ' ')" >&2; exit 2; }
shift
only_arg=
if [ "${1:-}" = --only ]; then only_arg=${2:?--only needs a pattern, e.g. 08,09}; shift 2; fi
[ $# = 0 ] || { echo "check-runtime: unexpected arguments: $*" >&2; exit 2; }
start=$(date +%s)

# uv builds the environments (its cache makes the second build of the same versions take seconds)
if ! command -v uv >/dev/null; then
  if [ -x .venv/bin/uv ]; then export PATH="$root/.venv/bin:$PATH"; else python3 -m pip install -q --user uv; export PATH="$HOME/.local/bin:$PATH"; fi
fi

want=$(sed -n 's/^# python: *//p' "$profile")
source tools/find-python.sh
python=$(python_for "$want") || { echo "check-runtime: no Python $want here (pyenv install $want, or uv python install $want)" >&2; exit 2; }

venv=.venv-$name
out=_runtimes/$name
rm -rf "$out"
mkdir -p "$out"
echo "check-runtime $name: Python $("$python" -c 'import platform; print(platform.python_version())') from $python"
grep -v '^\s*#' "$profile" | grep -v '^\s*$' > "$out/runtime-requirements.txt"
versions() {  # the versions that must survive installing course_lib
  "$venv/bin/python" - <<'PY'
import importlib.metadata as md, json
found = {}
for name in ("torch", "torchvision", "torch_xla", "pytorch-lightning", "numpy"):
    try:
        found[name] = md.version(name)
    except md.PackageNotFoundError:
        found[name] = None
print(json.dumps(found))
PY
}
stamp=$(cat "$profile" pyproject.toml <(echo "$python") | sha256sum | cut -c1-16)
if [ "$(cat "$venv/.runtime_stamp" 2>/dev/null)" = "$stamp" ] && [ -f "$venv/.runtime_before.json" ]; then
  echo "check-runtime $name: reusing $venv (same profile, pyproject.toml and Python); reinstalling course_lib"
  "$venv/bin/python" -m pip uninstall -q -y course_lib
else
  rm -rf "$venv"
  uv venv -q --seed -p "$python" "$venv"
  echo "check-runtime $name: installing the runtime's packages"
  uv pip install -q -p "$venv/bin/python" -r "$out/runtime-requirements.txt"
  versions > "$venv/.runtime_before.json"
fi
cp "$venv/.runtime_before.json" "$out/before.json"

echo "check-runtime $name: installing course_lib[wandb] as the notebooks' first cells do (pip, keeping the runtime's torch)"
"$venv/bin/python" -m pip install -q --disable-pip-version-check "course_lib[wandb] @ file://$root"
versions > "$out/after-install.json"
# the runner's own tools (papermill, a kernel), if the runtime lacks them; never torch
uv pip install -q -p "$venv/bin/python" papermill ipykernel nbformat
versions > "$out/after.json"
echo "$stamp" > "$venv/.runtime_stamp"
# whether the runtime's packages and course_lib's agree on their requirements: recorded, not a failure (a
# runtime image can ship a conflict of its own)
"$venv/bin/python" -m pip check > "$out/pip-check.txt" 2>&1 || true

only=${only_arg:-$(sed -n 's/^# run: *//p' "$profile")}
echo "check-runtime $name: running the course in smoke mode${only:+ (only $only)}"
set +e
PJRT_DEVICE=CPU MPLBACKEND=Agg WANDB_MODE=offline "$venv/bin/course-book" run-notebooks --smoke --out "$out/run" --timeout 1500 \
  ${only:+--only "$only"}
set -e

"$venv/bin/python" - "$name" "$profile" "$out" "$start" <<'PY'
import json, platform, sys, time
from pathlib import Path
name, profile, out, start = sys.argv[1], Path(sys.argv[2]), Path(sys.argv[3]), float(sys.argv[4])
expect = {}
for line in profile.read_text().splitlines():
    if line.startswith("# expect:"):
        notebook, message = line.split(":", 1)[1].strip().split(" ", 1)
        expect[notebook] = message
before, after = (json.loads((out / f).read_text()) for f in ("before.json", "after.json"))
kept = {k: before[k] == after[k] for k in ("torch", "torchvision", "torch_xla")}
rows = json.loads((out / "run" / "summary.json").read_text()) if (out / "run" / "summary.json").exists() else []
for r in rows:
    if r["notebook"] in expect:
        r["expected"] = f"stops with: {expect[r['notebook']]}"
        r["as_expected"] = r["status"] == "failed" and expect[r["notebook"]] in r["error"]
    else:
        r["as_expected"] = r["status"] == "ok"
ok = bool(rows) and all(kept.values()) and all(r["as_expected"] for r in rows)
pip_check = (out / "pip-check.txt").read_text().strip().splitlines()
summary = dict(runtime=name, date=time.strftime("%Y-%m-%d"), python=platform.python_version(),
               packages_before=before, packages_after=after, runtime_packages_kept=kept, pip_check=pip_check,
               notebooks=rows, ok=ok, seconds=round(time.time() - start, 1))
(out / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
for r in rows:
    note = "" if r["as_expected"] and r["status"] == "ok" else f"  ({r.get('expected') or r['error']})"
    print(f"  {r['notebook']:<34} {r['status']:<8} {r['seconds']:>7} s  {'as expected' if r['as_expected'] else 'NOT AS EXPECTED'}{note}")
changed = [k for k, same in kept.items() if not same]
if changed:
    print(f"  installing course_lib changed the runtime's {', '.join(changed)}: {before} -> {after}")
print(f"  pip check: {' / '.join(pip_check)}")
print(f"check-runtime {name}: {'ok' if ok else 'FAILED'}; Python {platform.python_version()}, torch {after['torch']}; "
      f"{summary['seconds']:.0f} s; {out / 'summary.json'}")
sys.exit(0 if ok else 1)
PY
