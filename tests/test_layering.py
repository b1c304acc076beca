"""The import structure docs/architecture.md draws: no cycle at load time, the only import circle is the value
kinds, and the layers below the translator import nothing above them. Read from the source with `ast`."""

import ast
import pathlib
import subprocess
import sys

import framejit

ROOT = pathlib.Path(framejit.__file__).parent
# the value kinds may call each other (the double dispatch TorchDynamo has too); the builder that wraps real
# values and the base every kind derives from stay out of that circle
OUTSIDE_THE_CIRCLE = {"framejit.variables", "framejit.variables.base", "framejit.variables.builder"}
# what each low layer may never import (directly or inside functions)
ABOVE = {
    "framejit.variables": (
        "framejit.trace",
        "framejit.output_graph",
        "framejit.codegen",
        "framejit.break_resume",
        "framejit.side_effects",
        "framejit.convert",
        "framejit.eval_frame",
        "framejit.api",
    ),
    "framejit.sources": ("framejit.variables", "framejit.trace", "framejit.guards", "framejit.codegen"),
    "framejit.contracts": ("framejit.variables", "framejit.sources", "framejit.trace", "framejit.guards"),
    "framejit.exc": ("framejit.",),
    "framejit.capture_policy": ("framejit.",),  # which code is captured or inlined: by file, before any trace
    "framejit.guard_program": (
        "framejit.variables",
        "framejit.trace",
        "framejit.output_graph",
        "framejit.codegen",
        "framejit.convert",
        "framejit.eval_frame",
    ),
    "framejit.op_effects": ("framejit.",),  # what an op does besides its result: asked by every layer
    "framejit.fate": ("framejit.",),
    "framejit.numpy_graph_ops": (
        "framejit.",
    ),  # graphs hold its callables: torch and numpy only  # each graph's record: reported by the backends and the as-eager layer
    "framejit.codeobj": ("framejit.variables", "framejit.trace", "framejit.output_graph", "framejit.codegen"),
    "framejit.trace": (
        "framejit.output_graph",
        "framejit.codegen",
        "framejit.break_resume",
        "framejit.convert",
        "framejit.eval_frame",
        "framejit.side_effects",
    ),
    # the backends see a graph, its example inputs and the as-eager layer; never the trace that made the graph
    "framejit.backends": (
        "framejit.variables",
        "framejit.trace",
        "framejit.output_graph",
        "framejit.codegen",
        "framejit.break_resume",
        "framejit.side_effects",
        "framejit.convert",
        "framejit.eval_frame",
        "framejit.api",
    ),
    # the as-eager layer sits below the backends and the output graph that call it
    "framejit.as_eager": (
        "framejit.variables",
        "framejit.trace",
        "framejit.output_graph",
        "framejit.codegen",
        "framejit.break_resume",
        "framejit.side_effects",
        "framejit.convert",
        "framejit.eval_frame",
        "framejit.api",
        "framejit.backends",
    ),
}


def module_name(path: pathlib.Path) -> str:
    parts = path.relative_to(ROOT.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def import_graph() -> tuple[dict[str, set[str]], dict[str, set[str]]]:
    """(load-time edges, all edges) between framejit's modules; TYPE_CHECKING imports count as edges."""
    modules = {module_name(p): p for p in ROOT.rglob("*.py")}

    def resolve(current: str, node: ast.AST, is_package: bool) -> list[str]:
        names = []
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        else:
            base = node.module or ""
            if node.level:
                parts = current.split(".")[: None if is_package else -1]
                parts = parts[: len(parts) - node.level + 1]
                base = ".".join(parts + ([base] if base else []))
            names = [f"{base}.{a.name}" if f"{base}.{a.name}" in modules else base for a in node.names]
        out = []
        for name in names:
            while name and name not in modules:
                name = name.rpartition(".")[0]
            if name and name != current:
                out.append(name)
        return out

    load: dict[str, set[str]] = {m: set() for m in modules}
    every: dict[str, set[str]] = {m: set() for m in modules}
    for name, path in modules.items():

        def visit(node: ast.AST, top_level: bool) -> None:
            for child in ast.iter_child_nodes(node):
                if isinstance(child, (ast.Import, ast.ImportFrom)):
                    for target in resolve(name, child, path.name == "__init__.py"):
                        every[name].add(target)
                        if top_level:
                            load[name].add(target)
                elif isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    visit(child, False)
                elif isinstance(child, ast.If) and "TYPE_CHECKING" in ast.unparse(child.test):
                    visit(child, False)
                else:
                    visit(child, top_level)

        visit(ast.parse(path.read_text()), True)
    return load, every


def circles(graph: dict[str, set[str]]) -> list[set[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[set[str]] = []

    def connect(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in graph[v]:
            if w not in index:
                connect(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = set()
            while True:
                w = stack.pop()
                component.add(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(component)

    for v in graph:
        if v not in index:
            connect(v)
    return found


def test_no_import_cycle_at_load_time():
    load, _ = import_graph()
    assert circles(load) == []


def test_the_only_import_circle_is_the_value_kinds():
    _, every = import_graph()
    kinds = {m for m in every if m.startswith("framejit.variables.")} - OUTSIDE_THE_CIRCLE
    assert [c for c in circles(every) if not c <= kinds] == []


def test_lower_layers_import_nothing_above_them():
    _, every = import_graph()
    wrong = [
        (m, t)
        for m, targets in every.items()
        for layer, banned in ABOVE.items()
        if m == layer or m.startswith(layer + ".")
        for t in targets
        if t.startswith(banned)
    ]
    assert wrong == []


def test_op_effects_imports_torch_and_the_standard_library_only():
    """A leaf every layer may ask: no import of framejit (checked above), nor of anything but torch."""
    tree = ast.parse((ROOT / "op_effects.py").read_text())
    names = [a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names]
    names += [n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module]
    roots = {name.split(".")[0] for name in names}
    assert roots - {"torch", "__future__"} <= set(sys.stdlib_module_names), roots


def test_the_graph_sees_a_planted_cycle():
    """The checks above can fail: a two-module cycle is found as one circle."""
    assert circles({"a": {"b"}, "b": {"a"}, "c": {"a"}}) == [{"a", "b"}]


def test_every_package_is_a_regular_package_importable_on_its_own():
    for package in ("trace", "variables", "codeobj", "backends", "as_eager", "bench"):
        assert (ROOT / package / "__init__.py").exists(), package
    packages = ["framejit.trace", "framejit.variables", "framejit.codeobj", "framejit.sources", "framejit.as_eager"]
    # importing any of them runs framejit/__init__ first, so one fresh interpreter covers them all
    code = "import importlib; " + "; ".join(
        f"importlib.import_module({p!r})" for p in packages + ["framejit.op_effects"]
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr


def test_no_file_of_the_package_tests_or_benchmarks_is_over_600_lines():
    """Small modules: each file (code, docs and reports alike, generated or not) stays under 600 lines."""
    repo = ROOT.parent
    suffixes = {".py", ".md", ".c", ".cpp", ".h", ".pyi"}
    long = [
        (str(path.relative_to(repo)), n)
        for folder in ("framejit", "tests", "benchmarks")
        for path in (repo / folder).rglob("*")
        if path.suffix in suffixes and (n := len(path.read_text(errors="replace").splitlines())) > 600
    ]
    assert long == []
