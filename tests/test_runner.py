"The notebook runner: success, failure, timeout, summary, selection."

import json
import os
import re
from pathlib import Path
import nbformat
import pytest
from course_lib.book.runner import find_notebooks, run_notebooks
from course_lib.support.errors import CourseLibError
from conftest import run_main


def _write_nb(path, *sources):
    cells = [
        nbformat.v4.new_code_cell("SMOKE = False\nRESULTS_PATH = None", metadata={"tags": ["parameters"]})
    ]
    cells += [nbformat.v4.new_code_cell(s) for s in sources]
    nb = nbformat.v4.new_notebook(cells=cells)
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "python3", "language": "python"}
    nbformat.write(nb, path)


@pytest.fixture
def nbs(tmp_path):
    d = tmp_path / "nbs"
    d.mkdir()
    _write_nb(
        d / "01_ok.ipynb",
        "from course_lib.support.results import record_results\n"
        "record_results({'smoke': SMOKE, 'answer': 42}, RESULTS_PATH)",
    )
    _write_nb(d / "02_fails.ipynb", "raise RuntimeError('chapter two is broken')")
    _write_nb(d / "03_slow.ipynb", "import time; time.sleep(120)")
    return d


@pytest.fixture
def runner_main(capsys):
    """`course-book ARGS` in this process (conftest.run_main); the SIGTERM and SIGHUP handlers that
    run-notebooks installs are put back afterwards."""
    import signal

    sigs = [s for s in (signal.SIGTERM, getattr(signal, "SIGHUP", None)) if s is not None]
    saved = {s: signal.getsignal(s) for s in sigs}
    yield lambda *args: run_main(capsys, *args, book=True)
    for s, handler in saved.items():
        signal.signal(s, handler)


def test_runner_reports_failure_and_exits_nonzero(nbs, tmp_path, runner_main):
    code, out, err = runner_main(
        "run-notebooks", "--smoke", "--nbs", nbs, "--out", tmp_path / "out", "--only", "0[12]_*"
    )
    assert code == 1
    assert "[1/2] 01_ok.ipynb ... ok" in out and "[2/2] 02_fails.ipynb ... failed" in out
    assert "1 notebook(s) failed: 02_fails.ipynb" in err
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert [(s["notebook"], s["status"]) for s in summary] == [
        ("01_ok.ipynb", "ok"),
        ("02_fails.ipynb", "failed"),
    ]
    assert summary[0]["results"] == {"smoke": True, "answer": 42}, (
        "smoke parameter injected, results collected"
    )
    assert "chapter two is broken" in summary[1]["error"]
    md = (tmp_path / "out" / "summary.md").read_text()
    assert "| 02_fails.ipynb | failed |" in md and "1 of 2 notebooks ran without error" in md
    assert (tmp_path / "out" / "02_fails.ipynb").exists(), "the executed copy shows where it broke"


# what papermill printed for a cell whose function re-raised an assertion (torch 2.9, papermill 2.6)
CHAINED = """papermill.exceptions.PapermillExecutionError:
---------------------------------------------------------------------------
Exception encountered at "In [2]":
AssertionError                            Traceback (most recent call last)
Cell In[2], line 5, in f()
      3         assert False
----> 5         raise RuntimeError('outer') from e

AssertionError:

The above exception was the direct cause of the following exception:

RuntimeError                              Traceback (most recent call last)
Cell In[2], line 6
      5         raise RuntimeError('outer') from e
----> 6 f()

Cell In[2], line 5, in f()
----> 5         raise RuntimeError('outer') from e

\x1b[0;31mRuntimeError\x1b[0m: outer
"""


def test_the_error_line_names_the_exception_and_the_cells_line():
    from course_lib.book.runner import error_line

    assert error_line(CHAINED) == "RuntimeError: outer (In [2], line 6: f())"
    bare = "Cell In[7], line 3\n      2 x = 1\n----> 3 assert x == 2\n\nAssertionError: \n"
    assert error_line(bare) == "AssertionError: (In [7], line 3: assert x == 2)"
    assert error_line("") == "no output" and error_line("killed\n") == "killed"


def test_runner_kills_a_notebook_at_its_timeout(nbs, tmp_path):
    rows = run_notebooks(nbs, tmp_path / "out", smoke=True, only="03_*", timeout=15, log=lambda *a, **k: None)
    assert rows[0]["status"] == "timeout" and rows[0]["seconds"] < 60
    assert "timed out after 15 s" in rows[0]["error"]


def test_runner_all_ok_exits_zero(nbs, tmp_path, runner_main):
    code, _, err = runner_main("run-notebooks", "--nbs", nbs, "--out", tmp_path / "out", "--only", "01_ok")
    assert code == 0, err
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert summary[0]["results"]["smoke"] is False, "without --smoke the notebook's own default stays"


def test_only_that_matches_nothing_is_an_error(nbs):
    with pytest.raises(CourseLibError, match="no notebooks in .* match 'zz'"):
        find_notebooks(nbs, only="zz")


def _kernel_pid_notebook(nbs, pid_file):
    """A notebook whose kernel writes its process id, starts a child (like a DataLoader worker), then works
    for minutes."""
    _write_nb(
        nbs / "04_busy.ipynb",
        f"import os, subprocess, sys, time\n"
        f"child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(300)'])\n"
        f"open({str(pid_file)!r}, 'w').write(f'{{os.getpid()}} {{child.pid}}')\n"
        f"time.sleep(300)",
    )


def _alive(pid):
    import psutil

    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def test_timeout_kills_the_kernel_and_its_children(nbs, tmp_path):
    pid_file = tmp_path / "pids"
    _kernel_pid_notebook(nbs, pid_file)
    rows = run_notebooks(nbs, tmp_path / "out", smoke=True, only="04_*", timeout=20, log=lambda *a, **k: None)
    assert rows[0]["status"] == "timeout"
    pids = [int(p) for p in pid_file.read_text().split()]
    assert not any(_alive(p) for p in pids), f"left running: {[p for p in pids if _alive(p)]}"


@pytest.mark.parametrize("name", ["SIGINT", "SIGTERM", "SIGHUP"])
def test_a_signal_stops_the_runner_and_the_kernel(name, nbs, tmp_path):
    """Ctrl-C (SIGINT), and SIGTERM or SIGHUP (what `timeout`, `kill`, a stopped container or a closed
    terminal send) end the runner, the kernel and the kernel's children."""
    import signal
    import subprocess
    import time
    from conftest import BIN, REPO

    pid_file = tmp_path / "pids"
    _kernel_pid_notebook(nbs, pid_file)

    def terminal_like():
        "Restore SIGINT: a script's background job inherits it ignored; a terminal's foreground job does not."
        signal.signal(signal.SIGINT, signal.SIG_DFL)

    runner = subprocess.Popen(
        [
            str(BIN / "course-book"),
            "run-notebooks",
            "--nbs",
            str(nbs),
            "--out",
            str(tmp_path / "out"),
            "--only",
            "04_*",
        ],
        cwd=REPO,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=terminal_like,
    )
    deadline = time.time() + 120
    while not (pid_file.exists() and len(pid_file.read_text().split()) == 2) and time.time() < deadline:
        time.sleep(0.5)
    pids = [int(p) for p in pid_file.read_text().split()]
    runner.send_signal(getattr(signal, name))
    _, err = runner.communicate(timeout=60)
    assert runner.returncode == 130 and "course-book: interrupted" in err, err[-1000:]
    assert not any(_alive(p) for p in pids), f"left running after {name}: {[p for p in pids if _alive(p)]}"


def test_runner_keeps_every_figure_in_the_executed_notebook(tmp_path, monkeypatch):
    "Even when the caller chose Agg, which draws nowhere, the executed notebook holds the figure."
    monkeypatch.setenv("MPLBACKEND", "Agg")
    d = tmp_path / "nbs"
    d.mkdir()
    _write_nb(d / "01_plot.ipynb", "import matplotlib.pyplot as plt\nplt.plot([0, 1], [1, 0])\nplt.show()")
    rows = run_notebooks(d, tmp_path / "out", smoke=True, timeout=300, log=lambda *a, **k: None)
    assert rows[0]["status"] == "ok", rows
    cells = nbformat.read(tmp_path / "out" / "01_plot.ipynb", as_version=4).cells
    outputs = [o for c in cells if c.cell_type == "code" for o in c.outputs]
    assert any("image/png" in o.get("data", {}) for o in outputs), outputs


def test_runner_keeps_wandb_copies_with_the_run_not_in_the_home_folder(tmp_path, monkeypatch):
    "W&B stages artifact copies in WANDB_DATA_DIR; the runner points it into its output folder."
    monkeypatch.delenv("WANDB_DATA_DIR", raising=False)
    d = tmp_path / "nbs"
    d.mkdir()
    _write_nb(d / "01_env.ipynb", "import os\nprint(os.environ['WANDB_DATA_DIR'])")
    rows = run_notebooks(d, tmp_path / "out", smoke=True, timeout=300, log=lambda *a, **k: None)
    assert rows[0]["status"] == "ok", rows
    cells = nbformat.read(tmp_path / "out" / "01_env.ipynb", as_version=4).cells
    printed = "".join(o.get("text", "") for c in cells if c.cell_type == "code" for o in c.outputs)
    assert printed.strip() == str((tmp_path / "out" / "wandb-data").resolve()), printed


def test_what_a_notebook_leaves_in_its_temporary_folder_is_removed(tmp_path):
    "Each kernel gets a temporary folder of its own (TMPDIR); the runner removes it and what is left in it."
    d = tmp_path / "nbs"
    d.mkdir()
    _write_nb(
        d / "01_litter.ipynb",
        "import tempfile, pathlib\nleft = pathlib.Path(tempfile.mkdtemp()) / 'weights.pt'\n"
        "left.write_bytes(b'0' * 1000)\nprint(left)",
    )
    rows = run_notebooks(d, tmp_path / "out", smoke=True, timeout=300, log=lambda *a, **k: None)
    assert rows[0]["status"] == "ok", rows
    cells = nbformat.read(tmp_path / "out" / "01_litter.ipynb", as_version=4).cells
    left = "".join(o.get("text", "") for c in cells if c.cell_type == "code" for o in c.outputs).strip()
    assert "01_litter-" in left, left
    assert not Path(left).exists() and not Path(left).parent.parent.exists()


def test_runner_leaves_the_callers_environment_as_it_was(nbs, tmp_path, monkeypatch):
    import os

    monkeypatch.delenv("WANDB_MODE", raising=False)
    monkeypatch.delenv("MPLBACKEND", raising=False)
    before = dict(os.environ)
    rows = run_notebooks(
        nbs, tmp_path / "out", smoke=True, only="01_*", timeout=300, log=lambda *a, **k: None
    )
    assert rows[0]["status"] == "ok", rows
    assert dict(os.environ) == before


def test_record_writes_the_run_with_its_machine(nbs, tmp_path, runner_main):
    record = tmp_path / "rec.json"
    code, _, err = runner_main(
        "run-notebooks",
        "--smoke",
        "--nbs",
        nbs,
        "--out",
        tmp_path / "out",
        "--only",
        "01_*",
        "--record",
        record,
    )
    assert code == 0, err
    rec = json.loads(record.read_text())
    assert rec["command"] == "course-book run-notebooks --smoke" and rec["cores"] >= 1 and rec["cpu"]
    assert [n["notebook"] for n in rec["notebooks"]] == ["01_ok.ipynb"]
    assert rec["notebooks"][0]["results"] == {"smoke": True, "answer": 42}


def test_two_jobs_run_side_by_side_each_on_its_share_of_the_cores(tmp_path, monkeypatch):
    """--jobs 2: both notebooks run at once, each kernel told its share of the cores and given an Inductor
    cache for that thread count; the rows and the summary keep the notebooks' order."""
    import os
    from course_lib.book.runner import available_cores

    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    d = tmp_path / "nbs"
    d.mkdir()
    for name in ("01_a", "02_b"):
        _write_nb(
            d / f"{name}.ipynb",
            "import os, time\nfrom course_lib.support.results import record_results\n"
            "start = time.time()\ntime.sleep(8)\n"
            "env = {k: os.environ[k] for k in ('OMP_NUM_THREADS', 'TORCHINDUCTOR_CACHE_DIR')}\n"
            "record_results({'start': start, 'end': time.time(), **env}, RESULTS_PATH)",
        )
    lines = []
    log = lambda *a, **k: lines.append(a)  # noqa: E731
    rows = run_notebooks(d, tmp_path / "out", smoke=True, timeout=300, jobs=2, log=log)
    assert [(r["notebook"], r["status"]) for r in rows] == [("01_a.ipynb", "ok"), ("02_b.ipynb", "ok")], rows
    a, b = (r["results"] for r in rows)
    assert a["start"] < b["end"] and b["start"] < a["end"], "the two notebooks did not overlap"
    threads = max(1, available_cores() // 2)
    assert a["OMP_NUM_THREADS"] == b["OMP_NUM_THREADS"] == str(threads)
    assert a["TORCHINDUCTOR_CACHE_DIR"].endswith(f"-{threads}-threads")
    assert sum("01_a.ipynb ... ok" in line[0] for line in lines) == 1, lines
    summary = (tmp_path / "out" / "summary.md").read_text()
    assert "2 of 2 notebooks ran without error" in summary, summary
    assert re.search(r"; \d+ s in all \(\d+ s of notebook time, as they overlapped\)", summary), summary
    assert "OMP_NUM_THREADS" not in os.environ, "the caller's environment stays as it was"


def test_jobs_below_one_is_one_line_before_anything_runs(nbs, tmp_path, runner_main):
    code, _, err = runner_main("run-notebooks", "--nbs", nbs, "--out", tmp_path / "out", "--jobs", "0")
    assert code == 1 and "--jobs must be at least 1, got 0" in err, err
    assert not (tmp_path / "out").exists(), "nothing ran"


def _tpu_python() -> str:
    "The interpreter of .venv-tpu, which tools/setup-venv.sh names in COURSE_LIB_TPU_PYTHON."
    python = os.environ.get("COURSE_LIB_TPU_PYTHON")
    assert python, "COURSE_LIB_TPU_PYTHON is not set: run the tests with bash tools/run-tests.sh"
    return python


def test_a_notebook_asking_for_a_tpu_runs_in_the_tpu_environment(tmp_path, runner_main):
    """--python TPU=...: the notebook whose metadata asks Colab for a TPU runs with that interpreter's kernel
    (torch_xla there), the others with this one; every summary row names its environment."""
    d = tmp_path / "nbs"
    d.mkdir()
    probe = (
        "import importlib.util, shutil, sys\n"
        "from course_lib.support.results import record_results\n"
        "xla = importlib.util.find_spec('torch_xla') is not None\n"
        "record_results({'xla': xla, 'python_on_path': shutil.which('python')}, RESULTS_PATH)"
    )
    for name, hardware in (("01_gpu.ipynb", "GPU"), ("02_tpu.ipynb", "TPU")):
        _write_nb(d / name, probe)
        nb = nbformat.read(d / name, as_version=4)
        nb.metadata["accelerator"] = hardware
        nbformat.write(nb, d / name)
    out = tmp_path / "out"
    code, _, err = runner_main(
        "run-notebooks", "--smoke", "--nbs", d, "--out", out, "--python", f"TPU={_tpu_python()}"
    )
    assert code == 0, err
    gpu, tpu = json.loads((out / "summary.json").read_text())
    assert gpu["results"]["xla"] is False and gpu["environment"]["torch_xla"] is None
    assert tpu["results"]["xla"] is True and tpu["environment"]["torch_xla"], tpu
    # a `!python ...` in the TPU notebook runs the TPU environment's Python too
    assert Path(tpu["results"]["python_on_path"]).parent == Path(_tpu_python()).parent, tpu["results"]
    summary = (out / "summary.md").read_text()
    assert f"torch_xla {tpu['environment']['torch_xla']}" in summary


@pytest.mark.parametrize(
    "value, message",
    [
        ("TPU", "write HARDWARE=PYTHON"),
        ("XPU=/usr/bin/python3", "write HARDWARE=PYTHON"),
        ("TPU=/no/such/python", "not an interpreter with papermill and ipykernel"),
    ],
)
def test_a_wrong_python_is_one_line_before_anything_runs(value, message, nbs, tmp_path, runner_main):
    code, out, err = runner_main(
        "run-notebooks", "--smoke", "--nbs", nbs, "--out", tmp_path / "o", "--python", value
    )
    assert code != 0 and message in err and len(err.strip().splitlines()) == 1, err
    assert not (tmp_path / "o").exists()
