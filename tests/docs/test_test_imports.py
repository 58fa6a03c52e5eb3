"""The tests reach the project by its public names only (issue 44, item 6).

A test that imports `_x` from study/, or patches or reads a private attribute of a study module,
pins how that module is built inside: a rename or a move breaks the test while the behaviour it
means to check is unchanged, and the private name stays private in name only. So each name a
test needs is public in its module (documented and typed), and tests/helpers' functions that
the tests import are public too. Read from the source with `ast`, every test file and helper:

- no `from study|helpers|tests... import _x`, and no `import` of a dotted path with a private part;
- no `M._x` where `M` is bound, in that file, to a module of study/ or tests/helpers (by
  `import study.a.b as M`, `import study.a`, `from study.a import b` where b is a module);
- no string naming a private attribute of such a module: `"study.a._x"` (monkeypatch.setattr's
  dotted form), or a call given such a module and `"_x"` (`monkeypatch.setattr(M, "_x", ...)`,
  `getattr(M, "_x")`, a helper that patches `M._x` for the test);
- no `obj._x` where `obj = C(...)` in the same function and `C` is imported from study: the
  private state of the project's own objects (a class's public attributes serve the tests).

Private names of other libraries are not checked (`torch._dynamo.reset()`, a matplotlib
figure's `_suptitle`, argparse's `_actions`): they are those libraries' to keep, and some have
no public spelling. Neither are a test file's own private helpers (`_run`, a parser class's
`self._cell`): they are private to that file, which is what the underscore says. Dunder names
(`__file__`) are not private.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TESTS = ROOT / "tests"
#: the import roots of the project's own code, and where each lives
OWN = {"study": ROOT / "study", "helpers": TESTS / "helpers", "tests": TESTS}


def _private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def _is_module(dotted: str) -> bool:
    """`dotted` names a module or package of the project (study.a.b, helpers.x, tests.y)."""
    top, *rest = dotted.split(".")
    if top not in OWN:
        return False
    path = OWN[top].joinpath(*rest)
    return path.with_suffix(".py").is_file() or path.is_dir()


def _own_import(module: str | None, level: int) -> bool:
    return level > 0 or (module is not None and module.split(".")[0] in OWN)


def _dotted(node: ast.expr) -> str | None:
    """`a.b.c` as text, for a chain of names and attributes; None for anything else."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute) and (base := _dotted(node.value)) is not None:
        return f"{base}.{node.attr}"
    return None


def _bindings(tree: ast.Module) -> tuple[dict[str, str], set[str]]:
    """(local name -> the project module it is bound to, names of classes imported from study)."""
    modules: dict[str, str] = {}
    classes: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] in OWN:
                    if alias.asname:
                        modules[alias.asname] = alias.name
                    else:  # `import study.a.b` binds `study`; its attribute chain is resolved below
                        top = alias.name.split(".")[0]
                        modules[top] = top
        elif isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] in OWN:
            for alias in node.names:
                full = f"{node.module}.{alias.name}"
                if _is_module(full):
                    modules[alias.asname or alias.name] = full
                elif node.module.split(".")[0] == "study" and alias.name[:1].isupper():
                    classes.add(alias.asname or alias.name)
    return modules, classes


def _module_of(node: ast.expr, modules: dict[str, str]) -> str | None:
    """The project module `node` (a name or a chain of attributes) stands for, or None."""
    text = _dotted(node)
    if text is None:
        return None
    head, *rest = text.split(".")
    if head not in modules:
        return None
    full = ".".join([modules[head], *rest])
    return full if _is_module(full) else None


def _study_objects(scope: ast.AST, classes: set[str]) -> set[str]:
    """Names assigned an instance of a class imported from study (`step = TrainStep(...)`) in `scope`."""
    names = set()
    for node in ast.walk(scope):
        if (isinstance(node, ast.Assign) and isinstance(node.value, ast.Call)
                and isinstance(node.value.func, ast.Name) and node.value.func.id in classes):
            names |= {t.id for t in node.targets if isinstance(t, ast.Name)}
    return names


def private_uses(source: str) -> Iterator[tuple[int, str]]:
    """(line, what) for each use of a private name of the project's own code in `source`."""
    tree = ast.parse(source)
    modules, classes = _bindings(tree)
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and _own_import(node.module, node.level):
            for alias in node.names:
                if _private(alias.name):
                    yield node.lineno, f"from {'.' * node.level}{node.module or ''} import {alias.name}"
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] in OWN and any(map(_private, alias.name.split("."))):
                    yield node.lineno, f"import {alias.name}"
        elif isinstance(node, ast.Attribute) and _private(node.attr):
            if (module := _module_of(node.value, modules)) is not None:
                yield node.lineno, f"{module}.{node.attr}"
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            parts = node.value.split(".")
            if len(parts) > 1 and _is_module(".".join(parts[:-1])) and _private(parts[-1]):
                yield node.lineno, repr(node.value)
        elif isinstance(node, ast.Call):
            args = [*node.args, *(k.value for k in node.keywords)]
            targets = [m for a in args if (m := _module_of(a, modules)) is not None]
            names = [a.value for a in args if isinstance(a, ast.Constant) and isinstance(a.value, str)]
            for module in targets:
                for name in filter(_private, names):
                    yield node.lineno, f"{module}.{name} (by name)"
    # a function's names, and the module's own statements (not its functions': a name is local to each)
    defs = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
    top = ast.Module(body=[s for s in tree.body if not isinstance(s, defs)], type_ignores=[])
    for scope in [top, *(n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)))]:
        objects = _study_objects(scope, classes)
        for node in ast.walk(scope):
            if (isinstance(node, ast.Attribute) and _private(node.attr) and isinstance(node.value, ast.Name)
                    and node.value.id in objects):
                yield node.lineno, f"{node.value.id}.{node.attr} (a study object's private attribute)"


def test_no_test_reaches_a_private_name_of_the_project():
    found = sorted({f"{path.relative_to(ROOT)}:{line}: {what}"
                    for path in sorted(TESTS.rglob("*.py"))
                    for line, what in private_uses(path.read_text())})
    assert not found, ("tests use private names of study/ or tests/helpers (make each public in its module, "
                       "documented and typed):\n" + "\n".join(found))


def test_each_kind_of_private_use_is_caught():
    """The scan finds each form above (so the test above can fail), and passes their public spellings."""
    # (source, where, the private name found): the two halves kept apart here, so that this file's
    # own strings are not read as uses
    caught = [
        ("from study.reproduction.render import _summary", "from study.reproduction.render import", "_summary"),
        ("from helpers.workflow import ROOT, _run", "from helpers.workflow import", "_run"),
        ("from .workflow import _env", "from .workflow import", "_env"),
        ("import study.train.step as s\ns._compile(1)", "study.train.step", "_compile"),
        ("import study.device\nstudy.device._gpu_share.clear()", "study.device", "_gpu_share"),
        ("from study.features import build\nbuild._chunk", "study.features.build", "_chunk"),
        ("mp.setattr('study.train.engine._log', print)", "'study.train.engine", "_log'"),
        ("import study.device as d\nmp.setattr(d, '_USER_COMPILE_THREADS', None)", "study.device",
         "_USER_COMPILE_THREADS (by name)"),
        ("from study.train.step import TrainStep\ndef f():\n    step = TrainStep(1)\n    step._update()", "step",
         "_update (a study object's private attribute)"),
    ]
    for source, where, name in caught:
        found = [text for _, text in private_uses(source)]
        assert f"{where}.{name}" in found or f"{where} {name}" in found, (source, found)
    allowed = ("import torch\ntorch._dynamo.reset()\nfig._suptitle\nparser._actions",
               "def _run():\n    pass\n_run()\nself._cell = None",
               "from study.train.step import compile_region, TrainStep\nstep = TrainStep(1)\nstep.update_params()",
               "import study.device as d\nmp.setattr(d, 'USER_COMPILE_THREADS', None)\nd.__file__",
               "mp.setattr('torch._dynamo.config.x', 1)\nx = '_private text'")
    for source in allowed:
        assert not list(private_uses(source)), source
