"""The house's two structural rules, checked on the code as it is.

1. The light/heavy boundary: only ``engine/trainer/`` may import the training stack. Every other module of
   ``engine`` and ``studio`` is imported with no other project module loaded before it (a forked child of an
   interpreter holding only shared third-party packages), which must end with none of the heavy packages loaded;
   and no light module imports anything from ``engine.trainer`` (statically, at any depth).
2. No import circles among the project's modules: every import (module level, inside a function, or under
   ``if TYPE_CHECKING:``, since a type hint that needs a circle names a piece to move down) is an edge, and the
   graph has no strongly connected component with more than one module. The page reaches the engine by plain
   imports only (no module names in strings), so the graph holds the page's arrows too; the page's shared modules
   never import its tabs (the tabs call them).
3. Rooms of a readable size: no module over ``MAX_LINES`` lines, except the ones named in ``OVER_MAX`` with why.
"""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("engine", "studio")
HEAVY = ("torch", "transformers", "peft", "trl", "datasets", "deepspeed", "bitsandbytes", "ray")
TRAINER = "engine.trainer"


def _modules() -> dict[str, Path]:
    found = {}
    for pkg in PACKAGES:
        for path in sorted((ROOT / pkg).rglob("*.py")):
            parts = list(path.relative_to(ROOT).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts = parts[:-1]
            found[".".join(parts)] = path
    return found


MODULES = _modules()


def _imports(name: str, path: Path) -> set[str]:
    """The project modules ``name`` imports, anywhere in its body (``if TYPE_CHECKING:`` blocks included)."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    targets: set[str] = set()

    def resolve(mod: str) -> str | None:
        while mod and mod not in MODULES:
            mod = mod.rpartition(".")[0]
        return mod or None

    def visit(node: ast.AST) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.Import):
                for alias in child.names:
                    if (hit := resolve(alias.name)) is not None:
                        targets.add(hit)
            elif isinstance(child, ast.ImportFrom):
                base = child.module or ""
                if child.level:
                    anchor = package.split(".")
                    anchor = anchor[: len(anchor) - (child.level - 1)]
                    base = ".".join([*anchor, base] if base else anchor)
                for alias in child.names:
                    full = f"{base}.{alias.name}" if base else alias.name
                    hit = full if full in MODULES else resolve(base)
                    if hit is not None:
                        targets.add(hit)
            visit(child)

    visit(tree)
    targets.discard(name)
    return targets


GRAPH = {name: _imports(name, path) for name, path in MODULES.items()}
LIGHT = sorted(n for n in MODULES if not (n == TRAINER or n.startswith(TRAINER + ".")))


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    found: list[list[str]] = []
    counter = 0
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            advanced = False
            for child in children:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.get(child, ())))))
                    advanced = True
                    break
                if child in on_stack:
                    low[node] = min(low[node], index[child])
            if advanced:
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                comp = []
                while True:
                    top = stack.pop()
                    on_stack.discard(top)
                    comp.append(top)
                    if top == node:
                        break
                if len(comp) > 1:
                    found.append(sorted(comp))
    return found


def test_the_cycle_finder_finds_a_cycle():
    """The checker itself: a known circle and a self-free chain."""
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert _cycles({"a": {"b"}, "b": set()}) == []


def test_no_import_circles():
    cycles = _cycles(GRAPH)
    assert not cycles, "import circles (break them by moving the shared piece down):\n" + "\n".join(
        " <-> ".join(c) for c in cycles
    )


def _string_imports(path: Path) -> list[str]:
    """Calls that import a module named in a string (``importlib.import_module("engine.x")``, ``__import__``, or a
    helper of that kind), which no import graph, grep for ``from engine.x`` or "go to definition" follows."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if not (isinstance(node, ast.Call) and node.args):
            continue
        func = node.func
        name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
        if name not in ("import_module", "__import__", "engine_module"):
            continue
        arg = node.args[0]
        text = arg.value if isinstance(arg, ast.Constant) else ast.unparse(arg)
        found.append(f"{path.relative_to(ROOT)}:{node.lineno} {name}({text})")
    return found


def test_the_page_reaches_the_engine_by_plain_imports():
    """studio/ names the engine modules it uses in import statements, so the graph above (and grep) sees them."""
    hidden = [hit for name, path in MODULES.items() if name.startswith("studio") for hit in _string_imports(path)]
    hidden = [h for h in hidden if "engine" in h]
    assert not hidden, "string imports of the engine in studio/ (use `from engine.x import y`):\n" + "\n".join(hidden)
    arrows = {t for name, targets in GRAPH.items() if name.startswith("studio.") for t in targets}
    assert {"engine.runs.registry", "engine.spec.schema", "engine.plan.planner"} <= arrows


# engine's packages from the bottom up: each imports only packages before it in this list (and itself).
LAYERS = [
    "core", "models", "data", "machine", "spec", "lf", "eval", "plan", "watch", "runs", "jobs", "export", "commands",
    "trainer",
]  # fmt: skip


def test_packages_depend_only_on_the_layers_below():
    def package(module: str) -> str | None:
        parts = module.split(".")
        return parts[1] if parts[0] == "engine" and len(parts) > 2 else None

    known = {package(n) for n in MODULES} - {None}
    assert known == set(LAYERS), f"packages missing from LAYERS (or gone): {known ^ set(LAYERS)}"
    upward = sorted(
        f"{source} -> {target}"
        for source, targets in GRAPH.items()
        for target in targets
        if package(source) and package(target) and LAYERS.index(package(target)) > LAYERS.index(package(source))
    )
    assert not upward, "imports that reach up the layers (" + " < ".join(LAYERS) + "):\n" + "\n".join(upward)


def test_engine_has_only_packages_at_top():
    loose = sorted(p.name for p in (ROOT / "engine").glob("*.py") if p.name not in ("__init__.py", "cli.py"))
    assert not loose, f"engine/ holds loose modules {loose}: put each in the package of its part"


def test_no_light_module_imports_the_trainer_package():
    bad = {n: sorted(t for t in GRAPH[n] if t == TRAINER or t.startswith(TRAINER + ".")) for n in LIGHT}
    bad = {n: t for n, t in bad.items() if t}
    # engine.cli dispatches `studio demo` by module name (importlib), which is not an import of the package.
    assert not bad, f"light modules import engine.trainer: {bad}"


# Third-party packages the light modules share, loaded first (checked to load nothing heavy).
PRELOAD = ("yaml", "pydantic", "psutil", "numpy", "jinja2", "httpx", "huggingface_hub", "gradio")
# In a new interpreter: loads PRELOAD, then imports every named module in turn. One JSON line per module: the heavy
# packages its import loaded (a heavy package is named once, at the first module that loaded it) or its import error.
# One interpreter for all: a module that loads nothing heavy with the others loaded loads nothing heavy alone either
# (imports only add), and a module that imports only when imported first (a circle) is the circle test's to find.
_IMPORTS = """
import importlib, json, sys, traceback
heavy, names = json.loads(sys.argv[1]), json.loads(sys.argv[2])
for pre in json.loads(sys.argv[3]):
    importlib.import_module(pre)
    loaded = [m for m in heavy if m in sys.modules]
    assert not loaded, f"the preloaded package {pre} loads {loaded}"
assert not [m for m in sys.modules if m.split(".")[0] in ("engine", "studio")], "a project module was preloaded"
for name in names:
    before = {m for m in heavy if m in sys.modules}
    try:
        importlib.import_module(name)
        out = {"name": name, "heavy": [m for m in heavy if m in sys.modules and m not in before], "error": ""}
    except BaseException:
        out = {"name": name, "heavy": [], "error": traceback.format_exc()[-2000:]}
    print(json.dumps(out), flush=True)
"""


def test_every_light_module_imports_without_the_training_stack():
    """Importing the light modules must not load torch, transformers, peft, trl, datasets, deepspeed or bitsandbytes
    (a module that fails to import fails the test too). All are imported in one interpreter that held only
    ``PRELOAD``'s packages before them; a heavy package is blamed on the module whose import loaded it."""
    names = sorted(LIGHT)
    env = dict(os.environ, GRADIO_ANALYTICS_ENABLED="False", HF_HUB_OFFLINE="1", HF_HUB_DISABLE_TELEMETRY="1")
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH", "")) if p)
    argv = [sys.executable, "-c", _IMPORTS, json.dumps(HEAVY), json.dumps(names), json.dumps(PRELOAD)]
    out = subprocess.run(argv, capture_output=True, text=True, env=env, cwd=ROOT, timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    results = [json.loads(line) for line in out.stdout.splitlines() if line.startswith("{")]
    assert sorted(r["name"] for r in results) == names
    failed = {r["name"]: r["error"] for r in results if r["error"]}
    heavy = {r["name"]: r["heavy"] for r in results if r["heavy"]}
    assert not failed, f"light modules that fail to import: {failed}"
    assert not heavy, f"light modules that load the training stack (each named where it was first loaded): {heavy}"


@pytest.mark.parametrize("name", ["engine.trainer.train", "engine.trainer.model", "engine.trainer.dataset"])
def test_the_heavy_side_is_where_the_stack_is_imported(name):
    """The boundary is real: the trainer modules are the ones that import the stack (so the light test above is
    not passing because nothing anywhere imports torch)."""
    tree = ast.parse(MODULES[name].read_text(encoding="utf-8"))
    imported = {
        (a.name if isinstance(n, ast.Import) else (n.module or "")).split(".")[0]
        for n in ast.walk(tree)
        if isinstance(n, (ast.Import, ast.ImportFrom))
        for a in n.names
    }
    assert imported & set(HEAVY), f"{name} imports none of {HEAVY}"


def test_the_pages_shared_modules_never_call_the_tabs():
    """One direction: a tab (the dashboard, the Train tab) calls studio.monitor / monitor_text / forms / ..., which
    never import a tab back."""
    back = sorted(
        f"{name} -> {target}"
        for name, targets in GRAPH.items()
        if name.startswith("studio.") and not name.startswith(("studio.tabs", "studio.app"))
        for target in targets
        if target.startswith("studio.tabs")
    )
    assert not back, "shared page modules that import a tab:\n" + "\n".join(back)


MAX_LINES = 500
# The size is a hint to look, not a number to cut to (issue 48 item 8): a module past MAX_LINES is split along a
# responsibility a reader can name, or listed here with the one responsibility it holds, when cutting it would
# only move lines (and re-export them). A table of facts says so in its docstring's first lines. Remove an entry once
# its module is under the limit (the test says when).
OVER_MAX = {
    "studio/i18n/page.py": "table of facts: the page's English and Chinese strings",
}


def _lines(path: Path) -> int:
    return len(path.read_text(encoding="utf-8").splitlines())


def test_no_module_grows_past_the_limit():
    over = {str(p.relative_to(ROOT)): _lines(p) for p in MODULES.values() if _lines(p) > MAX_LINES}
    new = {name: n for name, n in over.items() if name not in OVER_MAX}
    assert not new, (
        f"modules over {MAX_LINES} lines: split each along a responsibility a reader can name, or list it in OVER_MAX "
        "with the one responsibility it holds:\n" + "\n".join(f"{name}: {n}" for name, n in sorted(new.items()))
    )
    done = sorted(name for name in OVER_MAX if (ROOT / name).is_file() and name not in over)
    assert not done, f"under {MAX_LINES} lines now: remove them from OVER_MAX: {done}"
    for name, why in OVER_MAX.items():
        if why.startswith("table of facts"):
            head = "\n".join(
                (ast.get_docstring(ast.parse((ROOT / name).read_text(encoding="utf-8"))) or "").split("\n")[:2]
            )
            assert "table of facts" in head.lower(), (
                f"{name}: its docstring's first lines must say it is a table of facts"
            )
