"""Chapter 08's TorchTPU script, checked as far as a machine without a TPU allows. Nothing here pretends
to train.

The script is the notebook's own `%%writefile` cell. Here it must compile and teach the calls the chapter
names. In a separate environment with torch-tpu 0.2.0 and torch 2.11 (torch-tpu cannot share one with
torch_xla 2.9), every module-level name it uses must exist, none may be one of TorchTPU's internal or
deprecated APIs, and run for real it must stop at its hardware check with its one-line message: TorchTPU
registers no "tpu" device without TPU hardware."""

import json
import os
import shutil
import subprocess
import sys
import pytest
from conftest import REPO

PINS = ["torch==2.11.0", "torch-tpu==0.2.0"]  # torch-tpu 0.2.0 requires torch >=2.11,<=2.15
VENV = REPO / ".venv-torchtpu"
NO_TPU = "TorchTPU found no TPU: this script runs only on a TPU VM"

# Runs in the torch-tpu environment: imports the script as a module (main() does not run), then resolves every
# dotted name rooted at an imported module and reads TorchTPU's API stage of each (Internal ones raise when
# called).
CHECKER = r"""
import ast, importlib, importlib.metadata as md, importlib.util, json, sys
import torch
from torch_tpu._internal.utils import annotations
path = sys.argv[1]
spec = importlib.util.spec_from_file_location("train_torchtpu", path)
spec.loader.exec_module(importlib.util.module_from_spec(spec))
tree = ast.parse(open(path).read())
aliases = {}
for node in ast.walk(tree):
    if isinstance(node, ast.Import):
        for a in node.names:
            root = a.name.split(".")[0]
            aliases[a.asname or root] = a.name if a.asname else root
    elif isinstance(node, ast.ImportFrom):
        for a in node.names:
            aliases[a.asname or a.name] = f"{node.module}.{a.name}"
def dotted(node):
    parts = []
    while isinstance(node, ast.Attribute): parts.append(node.attr); node = node.value
    return [node.id] + parts[::-1] if isinstance(node, ast.Name) else None
def resolve(name):
    parts = name.split(".")
    for i in range(len(parts), 0, -1):
        try: obj = importlib.import_module(".".join(parts[:i]))
        except ImportError: continue
        for p in parts[i:]: obj = getattr(obj, p)
        return obj
    raise ImportError(name)
names = {}
for node in ast.walk(tree):
    chain = dotted(node) if isinstance(node, ast.Attribute) else None
    if chain and chain[0] in aliases:
        name = ".".join([aliases[chain[0]]] + chain[1:])
        names[name] = getattr(resolve(name), annotations.TT_API_STAGE, None)
for a in aliases.values(): names.setdefault(a, getattr(resolve(a), annotations.TT_API_STAGE, None))
print(json.dumps(dict(names=names, torch=torch.__version__, torch_tpu=md.version("torch_tpu"),
                      tpu_attribute=hasattr(torch, "tpu"))))
"""


def script_source() -> str:
    "The TorchTPU script as chapter 08 writes it: its %%writefile cell without the magic line."
    cells = json.loads((REPO / "nbs" / "08_tpu.ipynb").read_text())["cells"]
    sources = ["".join(c["source"]) for c in cells if c["cell_type"] == "code"]
    script = [s for s in sources if s.startswith("%%writefile $TORCHTPU_SCRIPT")]
    assert len(script) == 1, "chapter 08 writes the TorchTPU script in exactly one cell"
    return script[0].split("\n", 1)[1]


def test_torchtpu_script_compiles_and_teaches_the_chapters_calls():
    source = script_source()
    compile(source, "train_torchtpu.py", "exec")
    for call in (
        'init_process_group("tpu_dist"',
        "DistributedDataParallel(model)",
        "model.compile()",
        'torch.autocast("tpu"',
        'torch.device("tpu")',
        "set_tpu_launch_env()",
        "torch.multiprocessing.spawn",
    ):
        assert call in source, call
    assert f'sys.exit("{NO_TPU}")' in source


def _uv():
    uv = shutil.which("uv", path=str(REPO / ".venv" / "bin") + os.pathsep + os.environ["PATH"])
    assert uv, "uv is part of course_lib[dev]"
    return uv


@pytest.fixture(scope="module")
def torchtpu_python():
    """A Python with torch-tpu 0.2.0 and torch 2.11.0 (.venv-torchtpu, built with uv when missing or
    different)."""
    py = VENV / "bin" / "python"
    want = "0.2.0 2.11.0"
    probe = "import importlib.metadata as m; print(m.version('torch_tpu'), m.version('torch'))"
    if py.exists():
        have = subprocess.run([py, "-c", probe], capture_output=True, text=True).stdout.strip()
        if have != want:
            shutil.rmtree(VENV)
    if not py.exists():
        r = subprocess.run(
            [_uv(), "venv", "-q", "-p", sys.executable, str(VENV)], capture_output=True, text=True
        )
        assert r.returncode == 0, r.stderr
        r = subprocess.run(
            [_uv(), "pip", "install", "-q", "-p", str(py), *PINS],
            capture_output=True,
            text=True,
            timeout=1800,
        )
        assert r.returncode == 0, r.stderr[-3000:]
    have = subprocess.run([py, "-c", probe], capture_output=True, text=True).stdout.strip()
    assert have == want, have
    return py


@pytest.mark.slow
def test_torchtpu_script_imports_and_uses_public_torch_tpu_names(torchtpu_python, tmp_path):
    script = tmp_path / "train_torchtpu.py"
    script.write_text(script_source())
    checker = tmp_path / "checker.py"
    checker.write_text(CHECKER)
    r = subprocess.run(
        [torchtpu_python, checker, script],
        capture_output=True,
        text=True,
        timeout=600,
        stdin=subprocess.DEVNULL,
    )
    assert r.returncode == 0, r.stderr[-3000:]
    found = json.loads(r.stdout.strip().splitlines()[-1])
    assert found["torch_tpu"] == "0.2.0" and found["torch"].startswith("2.11.0") and found["tpu_attribute"]
    names = found["names"]
    for name in (
        "torch.tpu.distributed.set_tpu_launch_env",
        "torch.accelerator.current_accelerator",
        "torch.accelerator.device_count",
        "torch.distributed.init_process_group",
        "torch.nn.parallel.DistributedDataParallel",
        "torch.multiprocessing.spawn",
        "torch.autocast",
    ):
        assert name in names, (name, sorted(names))
    assert not {n: s for n, s in names.items() if s in ("Internal", "Deprecated")}, names
    assert names["torch.tpu.distributed.set_tpu_launch_env"] == "Experimental"


@pytest.mark.slow
def test_torchtpu_script_stops_with_one_line_without_a_tpu(torchtpu_python, tmp_path):
    "Run for real: the script imports torch (which loads torch_tpu), finds no TPU, and says so in one line."
    script = tmp_path / "train_torchtpu.py"
    script.write_text(script_source())
    r = subprocess.run(
        [torchtpu_python, script], capture_output=True, text=True, timeout=600, stdin=subprocess.DEVNULL
    )
    assert r.returncode == 1, r.stdout + r.stderr[-3000:]
    assert r.stderr.strip().splitlines()[-1] == NO_TPU, r.stderr[-3000:]
