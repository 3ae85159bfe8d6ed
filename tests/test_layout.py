"""The package's shape: short functions, the model kind decided only in ``tfseqrec.kinds``, and
imports that only go down (no cycle, no upward import, no hidden function-local import)."""

import ast
import pathlib

import pytest

from tfseqrec import kinds

ROOT = pathlib.Path(__file__).resolve().parents[1]
SOURCES = sorted([*ROOT.joinpath("tfseqrec").rglob("*.py"), *ROOT.joinpath("components").rglob("*.py")])
MAX_FUNCTION_LINES = 60


def _tree(path):
    return ast.parse(path.read_text(encoding="utf-8"), filename=str(path))


def test_the_sources_were_found():
    names = {p.relative_to(ROOT).as_posix() for p in SOURCES}
    assert {"tfseqrec/kinds.py", "tfseqrec/cli.py", "components/trainer_module.py"} <= names


def _body_lines(node):
    """Lines of a function's body, its signature and docstring left out.

    The formatter lays a long signature out one argument a line; what the rule
    limits is the code a reader follows, so it counts from the first statement after
    the docstring.
    """
    body = node.body
    if (
        len(body) > 1
        and isinstance(body[0], ast.Expr)
        and isinstance(body[0].value, ast.Constant)
        and isinstance(body[0].value.value, str)
    ):
        body = body[1:]
    return node.end_lineno - body[0].lineno + 1


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_no_function_is_longer_than_60_lines(path):
    long = [
        f"{node.name} (line {node.lineno}): {_body_lines(node)} lines"
        for node in ast.walk(_tree(path))
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
        and _body_lines(node) > MAX_FUNCTION_LINES
    ]
    assert not long, f"{path.name}: {long}"


def test_the_length_rule_counts_the_body_alone():
    source = 'def f(\n    a,\n    b,\n):\n    """Doc.\n\n    More.\n    """\n    x = a\n    return x + b\n'
    assert _body_lines(ast.parse(source).body[0]) == 2


def _kind_tests(tree):
    """Comparisons with a kind's name, and duck-typing on attributes that tell kinds apart."""
    names = set(kinds.KINDS)
    found = []
    for node in ast.walk(tree):
        # "sasrec" is also a file format (readers: the SASRec repository's ml-1m.txt).
        if isinstance(node, ast.Compare) and getattr(node.left, "id", None) != "format":
            operands = [node.left, *node.comparators]
            if any(isinstance(o, ast.Constant) and o.value in names for o in operands):
                found.append(f"line {node.lineno}: compares with a model name")
        if isinstance(node, ast.Call) and getattr(node.func, "id", None) in ("hasattr", "getattr"):
            args = node.args
            if (
                len(args) >= 2
                and isinstance(args[1], ast.Constant)
                and args[1].value in ("tokenizer", "masking")
            ):
                found.append(f"line {node.lineno}: {node.func.id}(..., {args[1].value!r})")
    return found


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_only_the_registry_tells_model_kinds_apart(path):
    if path.name == "kinds.py":
        return
    assert not _kind_tests(_tree(path)), f"{path.name}: {_kind_tests(_tree(path))}"


def test_the_kind_check_finds_what_it_forbids():
    tree = ast.parse('if args.model == "recformer": pass\nx = hasattr(model, "tokenizer")\n')
    assert len(_kind_tests(tree)) == 2


# === Imports only go down ===
# The package's layers, lowest first (STYLE.md, section 1). A module may import its own
# layer and those below; the cycle check keeps imports within a layer acyclic.
LAYERS = [
    # Small helpers every layer may import.
    [
        "tfseqrec.checks",
        "tfseqrec.progress",
        "tfseqrec.distribute",
        "tfseqrec.keras_internals",
        "tfseqrec.version",
        "tfseqrec.registry",  # the model kinds' table: no TensorFlow, read by every layer above
    ],
    # Data, layers, losses, ranking and metrics: the bottom of the library.
    [
        "tfseqrec.data",
        "tfseqrec.layers",
        "tfseqrec.losses",
        "tfseqrec.ranking",
        "tfseqrec.block_ranking",
        "tfseqrec.beyond_accuracy",
        "tfseqrec.metrics",
        "tfseqrec.optimizers",
        "tfseqrec.schedules",
        "tfseqrec.serving",
        "tfseqrec.plot",
    ],
    # The models: the tasks, the contract and Recformer; the id models' backbone base; one
    # package per id model (backbone.py, the task model); the package.
    ["tfseqrec.models.tasks", "tfseqrec.models.protocol", "tfseqrec.models.recformer"],
    ["tfseqrec.models.base"],
    [
        "tfseqrec.models.sasrec",
        "tfseqrec.models.bert4rec",
        "tfseqrec.models.hstu",
        "tfseqrec.models.unisrec",
        "tfseqrec.models.sentence_encoder",
    ],
    ["tfseqrec.models"],
    # What a model trains with: the registry's defaults and the data's choices (for_data).
    ["tfseqrec.presets"],
    ["tfseqrec.evaluation", "tfseqrec.bulk", "tfseqrec.training", "tfseqrec.export"],
    ["tfseqrec.kinds", "tfseqrec.report"],
    # The command line and the TFX components, on top of the library.
    ["tfseqrec.cli", "tfseqrec.commands", "components"],
    # The package's lazy public surface (importlib strings, not import statements).
    ["tfseqrec", "tfseqrec.__main__"],
]
OWN_PACKAGES = ("tfseqrec", "components")
# Function-local imports of the package's own modules, each with its reason.
LAZY_OWN_IMPORTS = {
    # `tfseqrec --help` and flag errors answer before TensorFlow is imported.
    ("tfseqrec.cli", "tfseqrec.commands"),
}


def _module_name(path):
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _package_sources():
    return {_module_name(p): p.read_text(encoding="utf-8") for p in SOURCES}


def _own(name):
    return name.split(".")[0] in OWN_PACKAGES


def _known(name, modules):
    """The module ``name`` refers to: itself, or its longest prefix that is a module."""
    while name and name not in modules:
        name = name.rpartition(".")[0]
    return name


def _function_imports(tree):
    """The import statements inside a function (``id``s)."""
    return {
        id(node)
        for function in ast.walk(tree)
        if isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef))
        for node in ast.walk(function)
        if isinstance(node, (ast.Import, ast.ImportFrom))
    }


def _imports(module, tree, modules):
    """``(imported name, statement)`` of every import in ``tree``; relative ones made absolute.

    ``from P import N`` imports ``P.N`` when that is a module (a package's
    ``__init__`` is then not what is read), else ``P`` itself.
    """
    is_package = any(m.startswith(module + ".") for m in modules)
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name, node
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                package = module if is_package else module.rpartition(".")[0]
                for _ in range(node.level - 1):
                    package = package.rpartition(".")[0]
                base = f"{package}.{base}".strip(".")
            for alias in node.names:
                yield (f"{base}.{alias.name}" if f"{base}.{alias.name}" in modules else base), node


def import_graph(sources):
    """``{module: {imported module: first line}}`` and the function-local imports.

    Args:
        sources: ``{module name: source text}`` (package ``__init__`` files by the package's name).

    Returns:
        ``(edges, local)``: ``local`` lists ``(module, imported name, line, source line, line above)``.
    """
    edges, local = {}, []
    for module, text in sources.items():
        tree = ast.parse(text)
        lines = ["", *text.splitlines()]
        inside = _function_imports(tree)
        edges[module] = {}
        for name, node in _imports(module, tree, sources):
            target = _known(name, sources) if _own(name) else None
            if target and target != module:
                edges[module].setdefault(target, node.lineno)
            if id(node) in inside:
                statement = "\n".join(lines[node.lineno : node.end_lineno + 1])
                local.append((module, name, node.lineno, statement, lines[node.lineno - 1]))
    return edges, local


def cycles(edges):
    """The strongly connected components of more than one module (Tarjan), sorted."""
    index, low, stack, on_stack, found = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in edges.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while not component or component[-1] != v:
                component.append(stack.pop())
                on_stack.discard(component[-1])
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return sorted(found)


def layer_of(module, layers=LAYERS):
    """The index in ``layers`` of ``module`` (by its longest listed prefix); ``None`` when unlisted.

    ``"tfseqrec"`` names only the top package's ``__init__``, not the modules under it.
    """
    best = None
    for i, prefixes in enumerate(layers):
        for prefix in prefixes:
            nested = prefix != "tfseqrec" and module.startswith(prefix + ".")
            if (module == prefix or nested) and (best is None or len(prefix) > len(best[1])):
                best = (i, prefix)
    return None if best is None else best[0]


def upward_imports(edges, layers=LAYERS):
    """``"a (layer i) imports b (layer j), line n"`` for every import of a higher layer."""
    found = []
    for module, targets in sorted(edges.items()):
        for target, line in sorted(targets.items()):
            if layer_of(target, layers) > layer_of(module, layers):
                found.append(
                    f"{module} (layer {layer_of(module, layers)}) imports {target} "
                    f"(layer {layer_of(target, layers)}), line {line}"
                )
    return found


def hidden_imports(local, lazy=LAZY_OWN_IMPORTS):
    """Function-local imports that are not allowed: of the package's own modules (unless
    listed in ``lazy``), or of another package without a comment (on the statement or
    the line above) saying why."""
    found = []
    for module, name, line, statement, above in local:
        where = f"{module}, line {line}: {statement.strip()}"
        if name.split(".")[0] == "tfseqrec":
            if not any(module == a and name.startswith(b) for a, b in lazy):
                found.append(f"{where} (import it at the top of the module)")
        elif "#" not in statement + above:
            found.append(f"{where} (an optional heavy dependency? say so in a comment)")
    return found


GRAPH = import_graph(_package_sources())


def test_every_module_has_a_layer():
    assert not [m for m in GRAPH[0] if layer_of(m) is None], "add these modules to LAYERS"


def test_the_import_graph_has_no_cycle():
    assert not cycles(GRAPH[0]), f"import cycles: {cycles(GRAPH[0])}"


def test_imports_only_go_down():
    assert not upward_imports(GRAPH[0]), "\n".join(upward_imports(GRAPH[0]))


def test_no_function_hides_an_import():
    assert not hidden_imports(GRAPH[1]), "\n".join(hidden_imports(GRAPH[1]))


def test_the_import_checks_find_what_they_forbid():
    sources = {
        "pkg": "",
        "tfseqrec": "",
        "tfseqrec.low": "from tfseqrec import high\n",  # upward, and a cycle with high
        "tfseqrec.high": (
            "import tfseqrec.low\n"
            "def f():\n"
            "    from tfseqrec import low\n"  # hidden: the package's own module
            "    import scipy\n"  # hidden: no comment
            "    import matplotlib  # optional: plots only\n"  # allowed
            "    # TFX is optional\n"
            "    from tfx import v1\n"  # allowed: the comment above
        ),
        "tfseqrec.sub": "",
        "tfseqrec.sub.a": "from . import b\nfrom .. import low\n",  # relative imports resolve
        "tfseqrec.sub.b": "",
    }
    layers = [["tfseqrec.low", "tfseqrec.sub"], ["tfseqrec.high"], ["tfseqrec", "pkg"]]
    edges, local = import_graph(sources)
    assert edges["tfseqrec.sub.a"] == {"tfseqrec.sub.b": 1, "tfseqrec.low": 2}
    assert cycles(edges) == [["tfseqrec.high", "tfseqrec.low"]]
    assert upward_imports(edges, layers) == ["tfseqrec.low (layer 0) imports tfseqrec.high (layer 1), line 1"]
    hidden = hidden_imports(local, lazy=set())
    assert len(hidden) == 2 and "from tfseqrec import low" in hidden[0] and "scipy" in hidden[1]
    assert not hidden_imports(local[:1], lazy={("tfseqrec.high", "tfseqrec.low")})
    assert layer_of("tfseqrec.sub.a", layers) == 0 and layer_of("tfseqrec", layers) == 2
    assert layer_of("tfseqrec.unlisted", layers) is None
