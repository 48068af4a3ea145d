"""The rules of ARCHITECTURE.md, checked on the source: no import circles, no private
Keras API outside the one isolated workaround, the TensorFlow-free packages free of
TensorFlow, the standard-library-only modules free of any third-party module, and
nothing newer than the oldest Python the package declares."""

import ast
import pathlib
import re
import subprocess
import sys
from importlib.metadata import metadata

import pytest

PACKAGE = pathlib.Path(__file__).resolve().parent.parent / "transformer_zoo"
# The one isolated, documented workaround of Keras bugs (see its docstrings), and the two
# places Keras leaves no public way.
PRIVATE_KERAS_ALLOWED = {
    ("train/distribution.py", "_build_lazily"),
    ("train/distribution.py", "_scalar_mean_reduction"),
    # Keras has no public list of nested layers (its own Model.quantize calls this too).
    ("models/zoo_model.py", "_sublayers"),
    # A tensor's Keras mask: Keras 3.15 has no public getter or setter (keras-hub reads it).
    ("layers/masking.py", "keras_mask"),
    ("layers/masking.py", "with_keras_mask"),
}
# ARCHITECTURE.md's first row: modules that import the standard library only (the command
# line reads run directories and presets with them before any third-party package).
STANDARD_LIBRARY_ONLY = ("errors", "files", "run_directory", "run_state", "architectures")
TENSORFLOW_FREE = (
    "errors.py",
    "files.py",
    "progress.py",
    "run_directory.py",
    "run_state.py",
    "architectures.py",
    "text",
    "serving",
    "evaluation",
)
TENSORFLOW_FREE_MODULES = (
    "generation/search.py",
    "generation/search_common.py",
    "generation/greedy.py",
    "generation/sampling.py",
    "generation/beam_search.py",
    "generation/engine.py",
    "generation/alignment.py",
    "generation/inputs.py",
    "generation/onnx_runner.py",
    "generation/onnx_greedy.py",
    "generation/runners.py",
    "train/config.py",
    "train/config_checks.py",
    "data/examples.py",
    "data/task.py",
    "data/tasks.py",
    "data/run_task.py",
    "data/user_files.py",
)


def _modules():
    for path in sorted(PACKAGE.rglob("*.py")):
        relative = path.relative_to(PACKAGE.parent).with_suffix("")
        name = ".".join(relative.parts).removesuffix(".__init__")
        yield name, path, ast.parse(path.read_text(encoding="utf-8"))


MODULES = {name: (path, tree) for name, path, tree in _modules()}


def _imports(name: str, tree: ast.AST) -> set[str]:
    """The project modules `name` imports, at module level or inside functions."""
    targets = set()
    package = name if MODULES[name][0].name == "__init__.py" else name.rpartition(".")[0]
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            candidates = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(
                    package.split(".")[: len(package.split(".")) - node.level + 1]
                    + ([base] if base else [])
                )
            candidates = [f"{base}.{alias.name}" for alias in node.names] + [base]
        else:
            continue
        for candidate in candidates:
            while candidate and candidate not in MODULES:
                candidate = candidate.rpartition(".")[0]
            # A module's own packages are imported before it anyway: not an edge.
            if candidate.startswith("transformer_zoo") and not name.startswith(candidate):
                targets.add(candidate)
    return targets


def test_no_module_imports_another_that_imports_it_back():
    graph = {name: _imports(name, tree) for name, (_, tree) in MODULES.items()}
    # Tarjan's strongly connected components: any component of two or more is a circle.
    index, low, stack, on_stack, circles, counter = {}, {}, [], set(), [], [0]

    def visit(node):
        index[node] = low[node] = counter[0]
        counter[0] += 1
        stack.append(node)
        on_stack.add(node)
        for target in graph[node]:
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                circles.append(sorted(component))

    for node in graph:
        if node not in index:
            visit(node)
    assert not circles, circles


def _keras_private_attributes() -> set[str]:
    """The `_names` Keras' classes define, and the Keras mask it sets on tensors."""
    import keras

    classes = (keras.layers.Layer, keras.Model, keras.optimizers.Optimizer, keras.KerasTensor,
               keras.Variable, keras.callbacks.Callback, keras.losses.Loss, keras.metrics.Metric)  # fmt: skip
    names = {"_keras_mask"}
    for cls in classes:
        names |= {n for n in dir(cls) if n.startswith("_") and not n.startswith("__")}
    return names


def _private_keras_uses(tree: ast.AST, private: set[str]):
    """`keras.src` imports, and `_names` read or set on Keras objects: a model, its
    optimizer, or a name imported from keras / keras_hub; and, on any object, the private
    attributes Keras itself defines (`private`), through `getattr` and friends too."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and node.attr in private:
            yield node, ast.unparse(node)
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id in ("getattr", "setattr", "hasattr", "delattr")
            and len(node.args) > 1
            and isinstance(node.args[1], ast.Constant)
            and node.args[1].value in private
        ):
            yield node, ast.unparse(node)
    keras_names = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            module = getattr(node, "module", None) or ""
            for alias in node.names:
                full = f"{module}.{alias.name}" if module else alias.name
                if full.split(".")[0] in ("keras", "keras_hub"):
                    keras_names.add(alias.asname or alias.name.split(".")[0])
                if ".src" in full or module.endswith(".src"):
                    yield node, full
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Attribute)
            and node.attr.startswith("_")
            and not node.attr.startswith("__")
        ):
            owner = node.value
            owner_name = (
                owner.id
                if isinstance(owner, ast.Name)
                else owner.attr
                if isinstance(owner, ast.Attribute)
                else ""
            )
            if owner_name in keras_names | {"model", "optimizer", "keras_trainer"}:
                yield node, f"{ast.unparse(owner)}.{node.attr}"


def _keras_class(dotted: str):
    """The Keras or keras-hub class named `dotted` (`keras.layers.Layer`), else None."""
    import importlib

    root, _, rest = dotted.partition(".")
    if root not in ("keras", "keras_hub") or not rest:
        return None
    value = importlib.import_module(root)
    for part in rest.split("."):
        value = getattr(value, part, None)
    return value


def _enclosing_functions(tree: ast.AST) -> dict:
    owners = {}
    for function in ast.walk(tree):
        if isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)):
            for child in ast.walk(function):
                owners.setdefault(id(child), function.name)
    return owners


def test_no_private_keras_api_outside_the_isolated_workaround():
    found = []
    private = _keras_private_attributes()
    for path, tree in MODULES.values():
        owners = _enclosing_functions(tree)
        relative = str(path.relative_to(PACKAGE))
        for node, what in _private_keras_uses(tree, private):
            if (relative, owners.get(id(node))) not in PRIVATE_KERAS_ALLOWED:
                found.append(f"{relative}:{node.lineno}: {what}")
        for cls in ast.walk(tree):
            if not isinstance(cls, ast.ClassDef):
                continue
            bases = [_keras_class(ast.unparse(base)) for base in cls.bases]
            for function in cls.body:
                if not isinstance(function, ast.FunctionDef):
                    continue
                if function.name.startswith("_") and not function.name.startswith("__"):
                    if any(base is not None and hasattr(base, function.name) for base in bases):
                        found.append(
                            f"{relative}:{cls.lineno}: {cls.name} overrides {function.name}"
                        )
    assert not found, found


def _imports_tensorflow(tree: ast.AST) -> list[str]:
    heavy = ("tensorflow", "keras", "keras_hub", "tf2onnx")
    names = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names += [a.name for a in node.names if a.name.split(".")[0] in heavy]
        elif isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] in heavy:
            names.append(node.module)
    return names


@pytest.mark.parametrize("where", TENSORFLOW_FREE + TENSORFLOW_FREE_MODULES)
def test_the_tensorflow_free_parts_import_no_tensorflow_or_keras(where):
    paths = [PACKAGE / where] if where.endswith(".py") else sorted((PACKAGE / where).rglob("*.py"))
    found = {
        str(p.relative_to(PACKAGE)): _imports_tensorflow(ast.parse(p.read_text())) for p in paths
    }
    assert not {k: v for k, v in found.items() if v}


@pytest.mark.parametrize("name", STANDARD_LIBRARY_ONLY)
def test_the_standard_library_only_modules_import_no_third_party_module(name):
    """Imported in a fresh interpreter, so that what else the tests loaded does not count;
    what the interpreter loaded at startup (site's `.pth` hooks) does not count either."""
    probe = (
        "import sys; before = set(sys.modules); "
        f"import transformer_zoo.{name}; "
        "print(sorted({m.split('.')[0] for m in set(sys.modules) - before} "
        "- set(sys.stdlib_module_names) - {'transformer_zoo'}))"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe],
        cwd=PACKAGE.parent,
        capture_output=True,
        text=True,
        check=True,
    )
    assert done.stdout.strip() == "[]", f"transformer_zoo.{name} loads {done.stdout.strip()}"


def test_the_code_needs_no_python_newer_than_the_package_declares():
    """vermin's table of when each construct and library name arrived, held to
    `requires-python` (a construct newer than it would fail on the oldest Python that pip
    installs the package on)."""
    declared = metadata("transformer_zoo")["Requires-Python"]
    oldest = re.fullmatch(r">=\s*(3\.\d+)", declared)
    assert oldest, f"requires-python {declared!r} is not of the form '>=3.N'"
    done = subprocess.run(
        [sys.executable, "-c", "import sys, vermin; sys.exit(vermin.main())", "--no-tips",
         "--violations", "--eval-annotations", f"-t={oldest[1]}-",
         "transformer_zoo", "tests", "benchmarks"],
        cwd=PACKAGE.parent,
        capture_output=True,
        text=True,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr


@pytest.mark.slow
def test_the_dependencies_install_on_the_oldest_python_the_package_declares():
    """pip resolves the package and its test extras for the oldest `requires-python`
    (wheels only, as pip would for that interpreter): vermin checks the code, this the
    dependencies (keras 3.13 and keras-hub 0.26 dropped Python 3.10, which the package
    declared until then). Needs PyPI, as `make test`'s install does."""
    oldest = re.fullmatch(r">=\s*(3\.\d+)", metadata("transformer_zoo")["Requires-Python"])
    assert oldest
    done = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--dry-run", "--quiet", "--ignore-installed",
         "--only-binary=:all:", "--python-version", oldest[1], ".[test]"],
        cwd=PACKAGE.parent,
        capture_output=True,
        text=True,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
