"""The shape of the code, checked: the floors in docs/architecture.md, no import circles, short
functions, and every package saying what it holds. `nox -s lint` runs this file too."""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
MAX_FUNCTION_LINES = 80


def floors() -> dict[str, int]:
    """Package → floor, read from the ```floors block of docs/architecture.md."""
    text = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    block = re.search(r"```floors\n(.*?)```", text, re.DOTALL)
    assert block, "docs/architecture.md has no ```floors block"
    return {
        name: level
        for level, line in enumerate(block.group(1).splitlines())
        for name in line.split()
    }


def code_files() -> Iterator[Path]:
    """The engine and the runtime; the catalogue's shims (shims/<id>/) are the shop's data."""
    yield from sorted((ROOT / "retire").rglob("*.py"))
    yield from sorted((ROOT / "shims").glob("*.py"))


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def package_of(module: str, known: dict[str, int]) -> str | None:
    """The floor-plan entry a module belongs to: the longest listed prefix."""
    parts = module.split(".")
    for end in range(len(parts), 0, -1):
        candidate = ".".join(parts[:end])
        if candidate in known:
            return candidate
    return None


def _type_checking_only(tree: ast.Module) -> set[int]:
    guarded: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            guarded.update(id(sub) for stmt in node.body for sub in ast.walk(stmt))
    return guarded


def imports(path: Path, modules: set[str]) -> Iterator[tuple[str, int]]:
    """(imported module, line) for every import in the file, function-local ones included."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    guarded = _type_checking_only(tree)
    own = module_name(path)
    package = own if path.name == "__init__.py" else own.rpartition(".")[0]
    for node in ast.walk(tree):
        if id(node) in guarded:
            continue
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name, node.lineno
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                base = ".".join([*anchor, *([base] if base else [])])
            for alias in node.names:
                # `from package import module` imports the module, else the name's module
                candidate = f"{base}.{alias.name}"
                yield (candidate if candidate in modules else base), node.lineno


def graph() -> dict[str, set[str]]:
    files = list(code_files())
    modules = {module_name(f) for f in files}
    edges: dict[str, set[str]] = {module_name(f): set() for f in files}
    for f in files:
        for target, _ in imports(f, modules):
            if target in modules and target != module_name(f):
                edges[module_name(f)].add(target)
    return edges


def test_the_floor_plan_names_every_package():
    known = floors()
    packages = {
        module_name(p.parent / "__init__.py") for p in (ROOT / "retire").rglob("__init__.py")
    }
    packages |= {m for m in (module_name(f) for f in code_files()) if m.count(".") == 1}
    # the top-level `retire` package is only the engine's name: it holds no code of its own
    missing = sorted(p for p in packages - {"retire"} if package_of(p, known) is None)
    assert not missing, f"add these to the floors block of docs/architecture.md: {missing}"


def test_no_import_reaches_a_sibling_or_a_floor_above():
    known = floors()
    modules = {module_name(f) for f in code_files()}
    wrong = []
    for f in code_files():
        source = package_of(module_name(f), known)
        for target, line in imports(f, modules):
            destination = package_of(target, known)
            if source is None or destination is None or destination == source:
                continue
            if known[destination] >= known[source]:
                where = f.relative_to(ROOT)
                wrong.append(f"{where}:{line}: {source} (floor {known[source]}) imports {target}")
    assert not wrong, "imports up or sideways:\n" + "\n".join(wrong)


def test_no_modules_import_each_other_in_a_circle():
    edges = graph()
    circles = [c for c in _strongly_connected(edges) if len(c) > 1]
    assert not circles, "import circles: " + "; ".join(" ↔ ".join(sorted(c)) for c in circles)


def _strongly_connected(edges: dict[str, set[str]]) -> list[set[str]]:
    """Tarjan's algorithm, iterative."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[set[str]] = []
    counter = 0
    for start in edges:
        if start in index:
            continue
        work = [(start, iter(sorted(edges[start])))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(edges.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = set()
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.add(member)
                    if member == node:
                        break
                found.append(component)
    return found


def test_no_function_in_the_engine_or_the_runtime_is_over_80_lines():
    long = []
    for f in code_files():
        for node in ast.walk(ast.parse(f.read_text(encoding="utf-8"))):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                length = (node.end_lineno or node.lineno) - node.lineno + 1
                if length > MAX_FUNCTION_LINES:
                    long.append(f"{f.relative_to(ROOT)}:{node.lineno} {node.name}: {length} lines")
    assert not long, f"functions over {MAX_FUNCTION_LINES} lines:\n" + "\n".join(long)


@pytest.mark.parametrize(
    "init",
    sorted(
        p.relative_to(ROOT).as_posix()
        for p in [*(ROOT / "retire").rglob("__init__.py"), ROOT / "shims" / "__init__.py"]
    ),
)
def test_every_package_says_what_it_holds(init):
    tree = ast.parse((ROOT / init).read_text(encoding="utf-8"))
    assert ast.get_docstring(tree), f"{init} needs a docstring saying what the package holds"
