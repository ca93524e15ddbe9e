"""The import layers of docs/architecture.md, read from the source with ``ast``.

Every module of ``src/faasml`` is parsed; its imports (at module level, inside functions,
under ``if TYPE_CHECKING:``, relative ones resolved) and its ``"faasml.module:attr"``
strings (entry points imported on first use) are checked against four rules:

1. no import runs up a layer, nor across to a peer package of the same layer;
2. no import circle among modules (module- and function-level imports; see ``cycles``);
3. no production module names ``faasml.testing``;
4. no module imports another package's private module (``pkg._name``).
"""

from __future__ import annotations

import ast
import functools
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src" / "faasml"

LAYERS: tuple[tuple[str, ...], ...] = (
    ("base",),
    ("catalog",),
    ("workload",),
    ("models",),
    ("planners", "search"),
    ("workloads",),
    ("sync",),
    ("loop",),
    ("job",),
    ("runtime",),
    ("sim",),
    ("reports", "cluster", "tracking"),
    ("dashboard",),
    ("api", "cli", "testing"),
    ("faasml",),
)
"""Bottom to top; an import goes to a lower layer or stays in its own package. The units of
one layer are peers: none imports another. A unit is a top-level package, a root module or
a group of root modules (``ROOT_UNITS``); ``faasml`` is the package's own ``__init__``."""

ROOT_UNITS = {
    "exceptions": "base",
    "types": "base",
    "units": "base",
    "registry": "base",
    "_validate": "base",
    "_imports": "base",
    "_files": "base",
    "_ray_config": "base",
    "_signing": "base",
    "_version": "base",
    "_gzip": "base",
    "searchspace": "job",
    "api_restore": "api",
    "api_train": "api",
    "api_checks": "api",
    "api_function": "api",
    "results": "api",
    "samplers": "job",
}
"""Root modules that belong to a unit of another name (the rest are units of their own)."""

ALLOWED_CYCLES: set[frozenset[str]] = set()

ENTRY_POINT = re.compile(r"(faasml(?:\.\w+)*):[A-Za-z_][\w.]*")


@dataclass(frozen=True)
class Import:
    """One module's reference to another: where, and how it is reached."""

    source: str
    target: str
    line: int
    kind: str
    """``module``, ``function`` (inside a def), ``typing`` (under TYPE_CHECKING), ``string``."""


def modules(root: Path) -> dict[str, Path]:
    """Dotted module name -> file, for every ``.py`` under ``root`` (the package)."""
    found = {}
    for path in sorted(root.rglob("*.py")):
        parts = [root.name, *path.relative_to(root).with_suffix("").parts]
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


def _known(name: str, known: dict[str, Path]) -> str:
    """The longest prefix of ``name`` that is a module here."""
    while name not in known and "." in name:
        name = name.rsplit(".", 1)[0]
    return name


class _Visitor(ast.NodeVisitor):
    """Collects a module's imports, noting whether each is in a def or under TYPE_CHECKING."""

    def __init__(self, module: str, is_package: bool, known: dict[str, Path]) -> None:
        self.module, self.is_package, self.known = module, is_package, known
        self.kind = "module"
        self.found: list[Import] = []

    def _add(self, target: str, line: int, kind: str | None = None) -> None:
        top = self.module.split(".")[0]
        if target == top or target.startswith(f"{top}."):
            target = _known(target, self.known)
            self.found.append(Import(self.module, target, line, kind or self.kind))

    def _nested(self, node: ast.AST, kind: str) -> None:
        outer, self.kind = self.kind, kind if self.kind == "module" else self.kind
        self.generic_visit(node)
        self.kind = outer

    def visit_FunctionDef(self, node: ast.FunctionDef) -> None:
        self._nested(node, "function")

    def visit_AsyncFunctionDef(self, node: ast.AsyncFunctionDef) -> None:
        self._nested(node, "function")

    def visit_If(self, node: ast.If) -> None:
        test = ast.unparse(node.test)
        if test in ("TYPE_CHECKING", "typing.TYPE_CHECKING"):
            self._nested(ast.Module(body=node.body, type_ignores=[]), "typing")
            for child in node.orelse:
                self.visit(child)
        else:
            self.generic_visit(node)

    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            self._add(alias.name, node.lineno)

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        base = node.module or ""
        if node.level:
            package = self.module.split(".")
            if not self.is_package:
                package.pop()
            package = package[: len(package) - (node.level - 1)]
            base = ".".join([*package, *([node.module] if node.module else [])])
        for alias in node.names:
            name = f"{base}.{alias.name}"
            self._add(name if name in self.known else base, node.lineno)

    def visit_Constant(self, node: ast.Constant) -> None:
        if isinstance(node.value, str):
            match = ENTRY_POINT.fullmatch(node.value)
            if match:
                self._add(match.group(1), node.lineno, "string")


def imports(root: Path) -> list[Import]:
    """Every reference from a module of ``root`` to a module of ``root``."""
    known = modules(root)
    found: list[Import] = []
    for name, path in known.items():
        visitor = _Visitor(name, path.name == "__init__.py", known)
        visitor.visit(ast.parse(path.read_text(encoding="utf-8"), str(path)))
        found.extend(visitor.found)
    return found


def unit(module: str) -> str:
    """The layer unit of a module: its top-level package, or its root module's unit."""
    parts = module.split(".")
    if len(parts) == 1:
        return parts[0]
    return ROOT_UNITS.get(parts[1], parts[1])


def layer(name: str) -> int:
    """The index of a unit's layer (0 is the bottom); a unit in no layer fails the test."""
    for index, units in enumerate(LAYERS):
        if name in units:
            return index
    raise AssertionError(f"{name} is in no layer: add it to LAYERS (and docs/architecture.md)")


def _shown(imp: Import) -> str:
    a, b = unit(imp.source), unit(imp.target)
    return f"{imp.source} -> {imp.target} ({a} -> {b}; line {imp.line}, {imp.kind})"


def upward(found: list[Import]) -> list[str]:
    """Imports that run up a layer or across to a peer unit."""
    bad = []
    for imp in found:
        a, b = unit(imp.source), unit(imp.target)
        if a != b and layer(b) >= layer(a):
            bad.append(_shown(imp))
    return bad


def cycles(found: list[Import]) -> list[frozenset[str]]:
    """Import circles: strongly connected components of more than one module.

    Edges are imports that run (module- and function-level); ``TYPE_CHECKING`` imports and
    entry-point strings are left out. So is an import of one of the importer's own ancestor
    packages (``from faasml.sync import X`` inside ``faasml.sync.harness``): Python runs a
    package's ``__init__`` before any of its submodules in any case, so that edge orders
    nothing, and an ``__init__`` that re-exports its submodules must not read as a circle.
    """
    graph: dict[str, set[str]] = {}
    for imp in found:
        graph.setdefault(imp.source, set())
        ancestor = imp.source.startswith(f"{imp.target}.")
        if imp.kind in ("module", "function") and not ancestor and imp.target != imp.source:
            graph[imp.source].add(imp.target)
    return [c for c in _components(graph) if len(c) > 1]


def _components(graph: dict[str, set[str]]) -> Iterator[frozenset[str]]:
    """Tarjan's strongly connected components, iteratively (no recursion limit)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph.get(start, ()))))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is None:
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
                    yield frozenset(component)
            elif child not in index:
                index[child] = low[child] = len(index)
                stack.append(child)
                on_stack.add(child)
                work.append((child, iter(sorted(graph.get(child, ())))))
            elif child in on_stack:
                low[node] = min(low[node], index[child])


def faasml_testing_uses(found: list[Import]) -> list[str]:
    """References to ``faasml.testing`` from outside it."""
    inside = ("faasml.testing", "faasml.testing.")
    return [
        _shown(imp)
        for imp in found
        if imp.target.startswith(inside) and not imp.source.startswith(inside)
    ]


def private_reaches(found: list[Import]) -> list[str]:
    """Imports of a private module (a name starting ``_``) of another top-level package.

    A private module inside ``faasml.x`` is for ``faasml.x`` alone; a private root module
    (``faasml._validate``) is the whole package's shared helper.
    """
    bad = []
    for imp in found:
        parts = imp.target.split(".")
        private = [p for p in parts[2:] if p.startswith("_") and not p.startswith("__")]
        if private and imp.source.split(".")[1:2] != parts[1:2]:
            bad.append(_shown(imp))
    return bad


@functools.cache
def _source_imports() -> list[Import]:
    """The imports of ``src/faasml``, read once for the tests below."""
    return imports(SRC)


def _report(title: str, bad: list[str]) -> str:
    return f"{len(bad)} {title}:\n  " + "\n  ".join(sorted(set(bad)))


def test_no_import_runs_up_a_layer() -> None:
    bad = upward(_source_imports())
    assert not bad, _report("imports up a layer or across to a peer", bad)


def test_no_import_circle() -> None:
    found = cycles(_source_imports())
    bad = [" <-> ".join(sorted(c)) for c in found if c not in ALLOWED_CYCLES]
    assert not bad, _report("import circles", bad)


def test_production_code_never_names_faasml_testing() -> None:
    bad = faasml_testing_uses(_source_imports())
    assert not bad, _report("references to faasml.testing", bad)


def test_no_import_of_another_packages_private_module() -> None:
    bad = private_reaches(_source_imports())
    assert not bad, _report("imports of another package's private module", bad)


def test_every_module_is_in_a_layer() -> None:
    for name in modules(SRC):
        layer(unit(name))


def test_a_job_names_the_platforms_the_runtime_implements() -> None:
    """The job layer knows the platform names without importing the runtime above it."""
    from faasml.job.checks import PLATFORM_NAMES
    from faasml.runtime.platforms.contract import PLATFORMS

    assert list(PLATFORM_NAMES) == PLATFORMS.names()


def _tree(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return root / "faasml"


def test_the_checks_see_every_kind_of_import(tmp_path: Path) -> None:
    """The reader on a small tree: relative, function-level, TYPE_CHECKING and string
    references count; an ``__init__`` re-exporting its submodule is no circle."""
    root = _tree(
        tmp_path,
        {
            "faasml/__init__.py": "",
            "faasml/catalog/__init__.py": "from .core import X\n",
            "faasml/catalog/core.py": "from faasml.catalog import _rows\nX = 1\n",
            "faasml/catalog/_rows.py": "",
            "faasml/models/__init__.py": "",
            "faasml/models/a.py": (
                "from typing import TYPE_CHECKING\n"
                "if TYPE_CHECKING:\n    from faasml.sync import S\n"
                "def f():\n    from . import b\n"
                "from faasml.catalog._rows import R\n"
            ),
            "faasml/models/b.py": "from .a import f\nE = 'faasml.testing.fns:echo'\n",
            "faasml/sync/__init__.py": "",
            "faasml/testing/__init__.py": "",
            "faasml/testing/fns.py": "",
        },
    )
    found = imports(root)
    assert [i.kind for i in found if i.source == "faasml.models.a"] == [
        "typing",
        "function",
        "module",
    ]
    assert upward(found) == [
        "faasml.models.a -> faasml.sync (models -> sync; line 3, typing)",
        "faasml.models.b -> faasml.testing.fns (models -> testing; line 2, string)",
    ]
    assert cycles(found) == [frozenset({"faasml.models.a", "faasml.models.b"})]
    assert faasml_testing_uses(found) == [
        "faasml.models.b -> faasml.testing.fns (models -> testing; line 2, string)"
    ]
    assert private_reaches(found) == [
        "faasml.models.a -> faasml.catalog._rows (models -> catalog; line 6, module)"
    ]
