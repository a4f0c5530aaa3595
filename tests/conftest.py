import atexit
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
import pytest

REPO = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent

os.environ.setdefault("MPLBACKEND", "Agg")
os.environ.setdefault("WANDB_MODE", "disabled")  # tracking tests ask for offline explicitly
# W&B copies every logged artifact into its data folder (default: under the home folder) and keeps
# offline runs' copies: the tests' copies go to a folder removed when the session ends
WANDB_DATA_DIR = tempfile.mkdtemp(prefix="course-lib-wandb-data-")
os.environ["WANDB_DATA_DIR"] = WANDB_DATA_DIR
atexit.register(shutil.rmtree, WANDB_DATA_DIR, ignore_errors=True)


def run_cli(*args, env=None, cwd=None, timeout=600, unset=(), program="course-lib"):
    """Run the installed `course-lib` program (or `program`, e.g. the book's `course-book`) with this
    environment, less `unset`, plus `env`; returns the CompletedProcess (text mode)."""
    return subprocess.run(
        [str(BIN / program), *map(str, args)],
        capture_output=True,
        text=True,
        env={**{k: v for k, v in os.environ.items() if k not in unset}, **(env or {})},
        cwd=cwd or REPO,
        timeout=timeout,
        stdin=subprocess.DEVNULL,
    )


def run_book(*args, **kw):
    "Run the installed `course-book` program (the book's tooling) as `run_cli` does."
    return run_cli(*args, program="course-book", **kw)


def run_main(capsys, *args, book: bool = False) -> tuple[int, str, str]:
    """Run `course-lib ARGS` (or `course-book ARGS` when `book`) in this process; returns (exit status,
    stdout, stderr). For argument and input errors, which stop before any training: no Python start-up per
    case."""
    from course_lib.book.cli import main as book_main
    from course_lib.support.cli import main as learner_main

    main = book_main if book else learner_main
    capsys.readouterr()  # drop what earlier steps printed
    code = main([str(a) for a in args])
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture(scope="session")
def sample_dir(tmp_path_factory):
    "A small generated sample set in the Kaggle layout, shared by the session's tests."
    from course_lib.support.sample import make_sample_dataset

    return make_sample_dataset(tmp_path_factory.mktemp("sample") / "melanoma", n=120, img_size=48, seed=7)


def train_offline(engine, data, out, home, *args, timeout=900):
    """`course-lib train --wandb offline` as a learner without a W&B key runs it: no WANDB_API_KEY or
    WANDB_MODE, an empty home (no ~/.netrc), no stdin. Returns the CompletedProcess."""
    env = dict(HOME=str(home), NETRC=str(Path(home) / ".netrc"), PJRT_DEVICE="CPU")
    cmd = ["train", "--engine", engine, "--data", data, *args, "--wandb", "offline", "--out", out]
    return run_cli(*cmd, env=env, timeout=timeout, unset=("WANDB_API_KEY", "WANDB_MODE"))


# 32 steps per epoch on the 96 training images of sample_dir: long enough to be killed mid-epoch (test_resume)
OFFLINE_RUN = ["--arch", "resnet18", "--img-size", 32, "--batch-size", 3, "--epochs", 3, "--lr", 0.001]
OFFLINE_RUN += ["--seed", 42]
# XLA at batch 16 (each step is an XLA program); three epochs, as check_no_recompilation warms up for two;
# simple-cnn, which XLA:CPU compiles in seconds where ResNet-18 takes a minute
XLA_RUN = ["--arch", "simple-cnn", "--img-size", 32, "--batch-size", 16, "--epochs", 3, "--lr", 0.001]


@pytest.fixture(scope="session")
def offline_run(sample_dir, tmp_path_factory):
    """engine -> the output folder of one `train --wandb offline` run (OFFLINE_RUN; XLA_RUN for xla), trained
    on first use and shared: test_tracking reads its W&B log, test_resume compares a killed and resumed run
    with it, test_engine compares the engines' runs, test_bad_input resumes a copy, test_xla reads the XLA
    run's metrics and checkpoint."""
    runs = {}

    def run(engine):
        if engine not in runs:
            out, home = tmp_path_factory.mktemp(f"run-{engine}") / engine, tmp_path_factory.mktemp("home")
            args = XLA_RUN if engine == "xla" else OFFLINE_RUN
            r = train_offline(engine, sample_dir, out, home, *args)
            assert r.returncode == 0, r.stderr[-3000:]
            runs[engine] = out
        return runs[engine]

    return run


@pytest.fixture
def no_kaggle_env(tmp_path, monkeypatch):
    """An environment with no Kaggle data or token anywhere: home, config folder, kagglehub's cache and the
    notebook mount point (/kaggle/input) point into an empty tmp dir, and it is not a Kaggle notebook."""
    for k in ("KAGGLE_API_TOKEN", "KAGGLE_USERNAME", "KAGGLE_KEY", "KAGGLE_KERNEL_RUN_TYPE"):
        monkeypatch.delenv(k, raising=False)
    env = {"HOME": str(tmp_path), "KAGGLE_CONFIG_DIR": str(tmp_path / ".kaggle")}
    env |= {
        "KAGGLEHUB_CACHE": str(tmp_path / "kagglehub"),
        "KAGGLE_CACHE_MOUNT_FOLDER": str(tmp_path / "input"),
    }
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    return env


RUNTIMES = {"colab-gpu": ("3.13", "2.11.0"), "colab-tpu": ("3.13", "2.9.0")}  # Python, torch
# What the per-push suite runs in each profile (the deeper suite: the profile's own `# run:` line). Chapter 09
# runs both engines, the data stack and W&B on the runtime's versions, with keys in the environment
# (test_site.py); 08 stops in one line on a GPU runtime, as its `# expect:` line says. The TPU profile runs
# in the deeper suite only.
PER_PUSH = {"colab-gpu": "08,09"}
FAKE_SECRETS = {"WANDB_API_KEY": "f" * 40, "KAGGLE_USERNAME": "learner-fake", "KAGGLE_KEY": "k" * 32}


@pytest.fixture(scope="session")
def runtime_runs(request):
    """Run tools/check-runtime.sh for the Colab runtimes once per session (per push: PER_PUSH; with --deep:
    both, every chapter their profiles name), with FAKE_SECRETS in the environment (tests/test_site.py looks
    for them in what chapter 09 wrote); returns name -> (exit status, summary, output)."""
    deep = request.config.getoption("--deep")
    runs = {}
    for name in RUNTIMES if deep else PER_PUSH:
        only = () if deep else ("--only", PER_PUSH[name])
        r = subprocess.run(
            ["bash", str(REPO / "tools" / "check-runtime.sh"), name, *only],
            cwd=REPO,
            text=True,
            capture_output=True,
            stdin=subprocess.DEVNULL,
            env={**os.environ, **FAKE_SECRETS},
            timeout=2400,
        )
        print(r.stdout[-3000:])
        summary_path = REPO / "_runtimes" / name / "summary.json"
        summary = json.loads(summary_path.read_text()) if summary_path.exists() else {}
        runs[name] = (r.returncode, summary, r.stdout[-3000:] + r.stderr[-3000:])
    return runs


# --- the per-push suite and the deeper suite -------------------------------------------------------------
# `bash tools/run-tests.sh` (CI on every push) deselects the tests marked `deep`; `bash tools/run-tests.sh
# --deep` (the scheduled workflow, .github/workflows/deep.yaml) runs them too. A deep test proves something
# the per-push suite proves more cheaply or only in part (a second runtime profile, every chapter a profile
# names, the GPU script's tiny run, the real-size compile runs); CONTRIBUTING.md lists them.
# The suite's budget, COURSE_LIB_TEST_BUDGET_S seconds (default 1200 s: the per-push suite's target on a
# 2-core CPU without AVX-512, which keeps .ci/run within 40 minutes with the course; the deep run 3600 s), is
# reported, never enforced: wall time depends on the
# machine, and a timed test fails a correct suite on a slow CPU. The report names the slowest files when over.
# Each file's seconds (setup + call + teardown) go to _test_run/times.json; bench/suite_times.py tabulates
# them in bench/SUITE.md.
_SUITE = {"start": time.monotonic(), "files": {}}


def pytest_addoption(parser):
    parser.addoption("--deep", action="store_true", help="also run the tests marked deep (the deeper suite)")


def pytest_configure(config):
    config.addinivalue_line("markers", "deep: the deeper suite only (bash tools/run-tests.sh --deep)")
    config.addinivalue_line(
        "markers",
        "xla: needs torch_xla, so torch 2.9: runs in .venv-tpu, Colab's TPU runtime's versions "
        "(tools/run-tests.sh runs `-m 'not xla'` in .venv, then `-m xla` there)",
    )
    workers = getattr(config.option, "numprocesses", None)  # pytest-xdist's -n, resolved to a number
    if workers and not _worker(config):  # before the workers start: they inherit the environment
        from course_lib.book.runner import share_cores

        share_cores(os.environ, workers)  # as the course runner shares the cores out among notebooks


# With pytest-xdist (tools/run-tests.sh runs two workers) the tests of one file stay on one worker, so a
# module-scoped fixture is made once; files that share a costly session fixture share a worker, so it is made
# once too (runtime_runs: the Colab runtime check, which deletes and rewrites _runtimes/). xdist's own
# `--dist loadgroup` cannot do this under pytest 9 (it renames test ids through an attribute pytest 9 no
# longer reads), so this scheduler groups by file name.
SHARED_WORKER = {"test_runtimes.py": "runtimes", "test_site.py": "runtimes"}


@pytest.hookimpl(optionalhook=True)  # a hook of pytest-xdist: unused, and no error, without it
def pytest_xdist_make_scheduler(config, log):
    from xdist.scheduler import LoadScopeScheduling

    class ByFile(LoadScopeScheduling):
        "Each test file's tests on one worker; the files in SHARED_WORKER on the same one."

        def _split_scope(self, nodeid: str) -> str:
            name = nodeid.split("::")[0].rsplit("/", 1)[-1]
            return SHARED_WORKER.get(name, name)

    return ByFile(config, log)


def pytest_collection_modifyitems(config, items):
    if config.getoption("--deep"):
        return
    kept, deep = [], []
    for item in items:
        (deep if item.get_closest_marker("deep") else kept).append(item)
    if deep:
        config.hook.pytest_deselected(items=deep)
        items[:] = kept


def pytest_runtest_logreport(report):
    name = report.nodeid.split("::")[0]
    _SUITE["files"][name] = _SUITE["files"].get(name, 0.0) + report.duration


def _budget(config) -> float:
    default = 3600 if config.getoption("--deep") else 1200
    return float(os.environ.get("COURSE_LIB_TEST_BUDGET_S", default))


def _whole_suite(config) -> bool:
    "True when pytest runs the whole test folder (no file, -k or -m chosen): only then is the budget checked."
    chosen = [a for a in config.args if (config.invocation_params.dir / a).resolve() != REPO / "tests"]
    return not chosen and not config.option.keyword and config.option.markexpr in ("", *PARTS)


# tools/run-tests.sh runs the suite in two parts, one per environment; each writes its own times
PARTS = {"not xla": "times.json", "xla": "times-xla.json"}


def _worker(config) -> bool:
    "True in a pytest-xdist worker: the controller, which receives every report, writes the times."
    return hasattr(config, "workerinput")


def pytest_sessionfinish(session, exitstatus):
    if _worker(session.config):
        return
    _SUITE["seconds"] = total = time.monotonic() - _SUITE["start"]
    out = REPO / "_test_run"
    out.mkdir(exist_ok=True)
    from torch.backends.cpu import get_cpu_capability

    record = dict(
        deep=session.config.getoption("--deep"),
        seconds=round(total, 1),
        cpu_capability=get_cpu_capability(),
        aten_cpu_capability=os.environ.get("ATEN_CPU_CAPABILITY"),
        files={k: round(v, 1) for k, v in sorted(_SUITE["files"].items(), key=lambda kv: -kv[1])},
    )
    (out / PARTS.get(session.config.option.markexpr, "times.json")).write_text(
        json.dumps(record, indent=2) + "\n"
    )
    _SUITE["over"] = _whole_suite(session.config) and total > _budget(session.config)
    _SUITE["slowest"] = list(record["files"].items())[:3]


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    "Runs inside pytest_sessionfinish (the terminal reporter's wrapper), after the total is taken above."
    if _worker(config):
        return
    slowest = ", ".join(f"{name} {s:.0f} s" for name, s in _SUITE["slowest"])
    verdict = f"OVER BUDGET, slowest: {slowest}" if _SUITE["over"] else "within budget"
    terminalreporter.write_line(
        f"suite: {_SUITE['seconds']:.0f} s, budget {_budget(config):.0f} s ({verdict}; "
        "per-file times in _test_run/times.json)"
    )
