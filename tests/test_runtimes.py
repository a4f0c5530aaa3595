"""Where learners run the course: Colab's GPU and TPU runtimes, rebuilt here by tools/check-runtime.sh (their
Python and package versions), with course_lib installed as the notebooks' first cell installs it, and chapters
run in smoke mode there. Every chapter runs in the course command on CI's versions; a profile's `# run:` line
names the chapters it runs again on the runtime's versions, those whose code depends most on them: the GPU
profile runs 07 (torch.compile, whose internals change with every torch release), 09 (both engines, the data
stack, the dataset and W&B) and 99, the TPU profile chapter 08. Chapter 04 runs in test_lowest.py (02 too
with --deep) on the oldest versions course_lib allows. Per push, only conftest.PER_PUSH runs (the GPU
profile's 08 and 09); the deeper suite (--deep) runs both profiles and every chapter they name."""

import json
import pytest
from course_lib.book.runner import find_notebooks
from conftest import PER_PUSH, REPO, RUNTIMES


def _profile_field(runtime: str, key: str) -> list[str]:
    "The values of a runtime profile's `# KEY:` lines (tools/runtimes/RUNTIME.txt)."
    lines = (REPO / "tools" / "runtimes" / f"{runtime}.txt").read_text().splitlines()
    return [line.split(":", 1)[1].strip() for line in lines if line.startswith(f"# {key}:")]


def _chapters(only: str) -> set[str]:
    "The notebooks a run-notebooks --only pattern picks."
    return {p.name for p in find_notebooks(REPO / "nbs", only)}


def _profile_chapters() -> list[str]:
    "The chapters that the runtime profiles CI runs name on their `# run:` lines."
    return sorted(set().union(*(_chapters(_profile_field(rt, "run")[0]) for rt in RUNTIMES)))


# the chapters the per-push profiles run to their end (08 stops on the GPU profile: it runs in the TPU one)
PER_PUSH_CHAPTERS = set().union(*(_chapters(only) for only in PER_PUSH.values())) - {
    expect.split()[0] for rt in PER_PUSH for expect in _profile_field(rt, "expect")
}
NOTEBOOKS = [
    n if n in PER_PUSH_CHAPTERS else pytest.param(n, marks=pytest.mark.deep) for n in _profile_chapters()
]
RUNTIME_PARAMS = [r if r in PER_PUSH else pytest.param(r, marks=pytest.mark.deep) for r in RUNTIMES]


@pytest.mark.slow
@pytest.mark.parametrize("name", RUNTIME_PARAMS)
def test_runtime_check_passes(name, runtime_runs):
    code, summary, output = runtime_runs[name]
    assert code == 0 and summary.get("ok"), output
    python, torch = RUNTIMES[name]
    assert summary["python"].startswith(python + "."), summary["python"]
    assert summary["packages_after"]["torch"].split("+")[0] == torch, (
        "installing course_lib kept the runtime's torch"
    )
    assert all(summary["runtime_packages_kept"].values()), summary["runtime_packages_kept"]
    pip_check = summary["pip_check"]  # recorded, not judged: a runtime's image can ship a conflict of its own
    assert pip_check == ["No broken requirements found."] or all(
        " has requirement " in line or " requires " in line for line in pip_check
    ), pip_check


@pytest.mark.slow
@pytest.mark.parametrize("name", NOTEBOOKS)
def test_notebook_runs_in_smoke_mode(name, runtime_runs):
    """Each chapter runs top to bottom in a runtime that can run it, records its results, and shows no
    error output."""
    rows = {
        rt: {r["notebook"]: r for r in summary.get("notebooks", [])}
        for rt, (_, summary, _) in runtime_runs.items()
    }
    ran = {rt: r[name] for rt, r in rows.items() if name in r and r[name]["status"] == "ok"}
    assert ran, f"{name} ran in none of {list(RUNTIMES)}: {[r.get(name) for r in rows.values()]}"
    for runtime, row in ran.items():
        assert row["results"], f"{name} recorded no results in {runtime}"
        executed = json.loads((REPO / "_runtimes" / runtime / "run" / name).read_text())
        outputs = [o for c in executed["cells"] for o in c.get("outputs", [])]
        errors = [o for o in outputs if o.get("output_type") == "error"]
        assert not errors, (runtime, errors[:1])
        if (
            name == "08_tpu.ipynb"
        ):  # the chapter teaches today's torch_xla API: nothing it runs warns of deprecation
            text = "".join("".join(o.get("text", "")) for o in outputs)
            assert "deprecat" not in text.lower(), (
                runtime,
                [line for line in text.splitlines() if "deprecat" in line.lower()],
            )


def test_chapter_07_stops_clearly_on_a_gpu_runtime_profile():
    "A GPU runtime has no torch_xla: the profile records chapter 08's one-line stop as the expected result."
    profile = (REPO / "tools" / "runtimes" / "colab-gpu.txt").read_text()
    assert "# expect: 08_tpu.ipynb this chapter needs torch_xla" in profile


# The Colab runtime whose versions each kind of chapter runs in: its metadata's accelerator (what Colab opens)
RUNTIME_OF = {"GPU": "colab-gpu", "TPU": "colab-tpu"}


def _pins(runtime: str) -> dict:
    "{package: version} of a runtime profile's pinned lines."
    lines = (REPO / "tools" / "runtimes" / f"{runtime}.txt").read_text().splitlines()
    return dict(line.split("==") for line in lines if "==" in line and not line.startswith("#"))


def _matches(env: dict, runtime: str) -> list[str]:
    "How `env` (python, torch, torch_xla versions) differs from `runtime`'s profile; [] when it does not."
    pins, python = _pins(runtime), _profile_field(runtime, "python")[0]
    found = dict(
        python=env["python"].rsplit(".", 1)[0],
        torch=env["torch"].split("+")[0],
        torch_xla=(env.get("torch_xla") or "").split("+")[0] or None,
    )
    want = dict(python=python, torch=pins["torch"], torch_xla=pins.get("torch_xla"))
    return [f"{k} {found[k]} (the profile: {want[k]})" for k in want if found[k] != want[k]]


def test_each_chapter_ran_in_the_versions_of_the_runtime_it_asks_for():
    """The recorded course run that the index shows: every notebook ran with the Python, torch and torch_xla
    of the Colab runtime its metadata opens (chapter 08: the TPU runtime's; the others: the GPU runtime's)."""
    from course_lib.book.docs_sync import RESULTS_FILE
    from course_lib.book.runner import accelerator

    record = json.loads((REPO / RESULTS_FILE).read_text())
    wrong = {
        row["notebook"]: diff
        for row in record["notebooks"]
        if (diff := _matches(row["environment"], RUNTIME_OF[accelerator(REPO / "nbs" / row["notebook"])]))
    }
    assert not wrong, f"record a new run (course-book run-notebooks --record): {wrong}"
    assert {accelerator(REPO / "nbs" / row["notebook"]) for row in record["notebooks"]} == set(RUNTIME_OF)


@pytest.mark.parametrize("runtime", ["colab-gpu", pytest.param("colab-tpu", marks=pytest.mark.xla)], ids=str)
def test_the_tests_run_in_the_versions_of_the_runtime_they_are_about(runtime):
    """The test command's two parts: everything in .venv, the GPU runtime's versions; the tests marked xla in
    .venv-tpu, the TPU runtime's."""
    import sys

    from course_lib.book.runner import environment

    env = environment(sys.executable)  # what the runner records for a notebook this interpreter runs
    assert not _matches(env, runtime), _matches(env, runtime)
