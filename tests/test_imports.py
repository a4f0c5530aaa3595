"""How course_lib's modules import each other, read from their code: no module takes another's `_` names,
there is no cycle (imports inside functions count), and the learner's library never loads the book's own
tooling, `course_lib.book` (running the notebooks, syncing the docs and translations, building the site)."""

import ast
import subprocess
import sys
from conftest import REPO

PKG = REPO / "course_lib"
BOOK = "course_lib.book"  # the book's machinery, not the learner's: a subpackage with its own command


def _is_book(module: str) -> bool:
    return module == BOOK or module.startswith(BOOK + ".")


def _module(path) -> str:
    return ".".join(path.relative_to(REPO).with_suffix("").parts).removesuffix(".__init__")


def _imports(path):
    """(imported module, name or None, at module level) for every `course_lib` import in `path`; a name is
    resolved to a submodule when one of that name exists."""
    me = _module(path)
    package = me if path.name == "__init__.py" else me.rpartition(".")[0]
    tree = ast.parse(path.read_text())
    top = set(map(id, tree.body))
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            base = package.split(".")[: len(package.split(".")) - node.level + 1] if node.level else []
            target = ".".join(base + ([node.module] if node.module else []))
            if target.split(".")[0] == "course_lib":
                found += [(target, a.name, id(node) in top) for a in node.names]
        elif isinstance(node, ast.Import):
            found += [(a.name, None, id(node) in top) for a in node.names if a.name.startswith("course_lib")]
    return found


def _graph() -> dict:
    "module -> [(imported module, name, at module level)] for every module of the package but nbdev's index."
    modules = {_module(p): p for p in PKG.rglob("*.py") if p.name != "_modidx.py"}
    graph = {}
    for name, path in modules.items():
        graph[name] = []
        for target, what, top in _imports(path):
            sub = f"{target}.{what}"
            graph[name].append((sub, None, top) if sub in modules else (target, what, top))
    return graph


def test_no_module_imports_another_modules_private_names():
    crossing = [
        f"{m} imports {what} from {target}"
        for m, edges in _graph().items()
        for target, what, _ in edges
        if what and what.startswith("_") and not what.startswith("__") and target != m
    ]
    assert not crossing, crossing


def _cycle(graph):
    "One import cycle as a list of modules, or None."
    state = {}  # module -> "open" while on the path, "done" after

    def visit(m, path):
        state[m] = "open"
        for target, _, _ in graph.get(m, []):
            if target == m or target not in graph:
                continue
            if state.get(target) == "open":
                return path[path.index(target) :] + [target]
            if target not in state and (found := visit(target, path + [target])):
                return found
        state[m] = "done"

    for m in graph:
        if m not in state and (found := visit(m, [m])):
            return found


def test_the_modules_import_each_other_without_a_cycle():
    cycle = _cycle(_graph())
    assert cycle is None, " -> ".join(cycle)


def test_the_cycle_finder_finds_a_cycle():
    "The control: two modules that import each other, one of them inside a function."
    graph = {"a": [("b", None, True)], "b": [("c", None, True)], "c": [("a", "f", False)]}
    assert _cycle(graph) == ["a", "b", "c", "a"]


def test_the_learners_library_never_imports_the_tooling():
    "No learner module imports `course_lib.book`, at module level or inside a function."
    graph = _graph()
    assert any(_is_book(m) for m in graph) and any(not _is_book(m) for m in graph), sorted(graph)
    wrong = [
        f"{m} imports {target}"
        for m, edges in graph.items()
        if not _is_book(m)
        for target, what, _ in edges
        if _is_book(target) or (target == "course_lib" and what == "book")
    ]
    assert not wrong, wrong


def test_importing_the_command_line_loads_none_of_the_tooling():
    "What `course-lib train` pays for at start-up: no papermill, Sphinx, Babel or the site builder."
    code = "import sys, course_lib.support.cli; print(' '.join(sorted(sys.modules)))"
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    loaded = set(r.stdout.split())
    assert "course_lib.support.cli" in loaded and not {m for m in loaded if _is_book(m)}, sorted(loaded)
    assert not {"papermill", "sphinx", "babel", "markdown_it"} & loaded


def test_no_module_holds_more_than_a_sixth_of_the_library():
    "One job per module: no file over 15% of the package's lines (nbdev's index aside)."
    sizes = {p: len(p.read_text().splitlines()) for p in PKG.rglob("*.py") if p.name != "_modidx.py"}
    total = sum(sizes.values())
    big = {str(p.relative_to(REPO)): f"{n / total:.0%}" for p, n in sizes.items() if n > 0.15 * total}
    assert total > 5000 and not big, big
