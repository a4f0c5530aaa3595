"""GitHub Actions hardening: least-privilege permissions, actions pinned by commit, releases only of tested
commits. Reads .github/workflows/*.yaml; no network."""

import re

import pytest
import yaml
from conftest import REPO

WORKFLOWS = REPO / ".github" / "workflows"
FILES = sorted(WORKFLOWS.glob("*.y*ml"))
# the only jobs that may hold a write permission, and which ones
WRITERS = {
    ("site.yaml", "deploy"): {"pages", "id-token"},
    ("release.yaml", "publish"): {"id-token"},
}
USES = re.compile(r"^\s*(?:-\s+)?uses:\s*(?P<ref>\S+)(?P<rest>.*)$", re.M)
PINNED = re.compile(r"^[\w.-]+/[\w.-]+(?:/[\w./-]+)?@[0-9a-f]{40}$")
TAG_COMMENT = re.compile(r"^\s+#\s*v\d+(?:\.\d+)*\b")


def _load(path):
    wf = yaml.safe_load(path.read_text())
    if True in wf:  # PyYAML reads the key `on` as the boolean True (YAML 1.1)
        wf["on"] = wf.pop(True)
    return wf


def _triggers(wf):
    on = wf["on"]
    return {on} if isinstance(on, str) else set(on)


def test_the_workflows_are_there():
    assert {p.name for p in FILES} >= {"test.yaml", "site.yaml", "release.yaml"}


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_workflow_top_level_permissions_are_read_only(path):
    assert _load(path).get("permissions") == {"contents": "read"}


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_workflow_write_permissions_only_on_deploy_and_publish(path):
    for name, job in _load(path)["jobs"].items():
        perms = job.get("permissions") or {}
        assert isinstance(perms, dict), f"{path.name}:{name} permissions must be a mapping, not {perms!r}"
        writes = {scope for scope, level in perms.items() if level == "write"}
        allowed = WRITERS.get((path.name, name), set())
        assert writes <= allowed, f"{path.name}:{name} may not write {sorted(writes - allowed)}"
    for (file, job), scopes in WRITERS.items():
        if file == path.name:
            perms = _load(path)["jobs"][job]["permissions"]
            assert {s: "write" for s in scopes}.items() <= perms.items()


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_workflow_actions_pinned_by_commit_sha(path):
    uses = list(USES.finditer(path.read_text()))
    assert uses
    for m in uses:
        ref, rest = m["ref"].strip("\"'"), m["rest"]
        if ref.startswith("./"):  # a workflow or action in this repository
            continue
        assert PINNED.match(ref), f"{path.name}: {ref} is not pinned by a 40-hex commit SHA"
        assert TAG_COMMENT.match(rest), f"{path.name}: {ref} has no '# vX.Y.Z' comment naming its tag"


def test_workflow_release_runs_the_tests_first():
    jobs = _load(WORKFLOWS / "release.yaml")["jobs"]
    tests = [name for name, job in jobs.items() if job.get("uses") == "./.github/workflows/test.yaml"]
    assert tests == ["test"]
    assert jobs["test"].get("permissions") == {"contents": "read"}

    def needs(job):
        n = jobs[job].get("needs", [])
        return {n} if isinstance(n, str) else set(n)

    assert "test" in needs("build")
    assert "build" in needs("publish")


def test_workflow_test_is_callable():
    wf = _load(WORKFLOWS / "test.yaml")
    assert {"workflow_call", "push", "pull_request"} <= _triggers(wf)
    assert "bash .ci/run" in [step.get("run") for step in wf["jobs"]["test"]["steps"]]
