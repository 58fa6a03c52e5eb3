"""The workflow's own Python never shadows a name Snakemake gives a Snakefile (`lookup`, `expand`,
`report`, `rules`, `config`...), and common.smk stays glue: under 300 lines, its plan-side helpers
in study.workflow_plan (tests/integration/test_workflow_plan.py).

Each .smk file is read as Snakemake compiles it (snakemake.parser: the rules become decorated
functions), then its top-level bindings are read with `ast`."""

from __future__ import annotations

import ast
import types
from pathlib import Path

import pytest
import snakemake.api  # noqa: F401 (imports snakemake.workflow without its import circle)
import snakemake.ioflags
import snakemake.ioutils
import snakemake.workflow
from snakemake.parser import parse
from snakemake.sourcecache import LocalSourceFile

ROOT = Path(__file__).resolve().parents[2]
SNAKEFILES = sorted((ROOT / "workflow" / "rules").glob("*.smk")) + [ROOT / "Snakefile"]
MAX_COMMON_LINES = 300

#: what Workflow.__init__ puts in a Snakefile's namespace besides snakemake.workflow's own names
_INJECTED = {"shell", "workflow", "checkpoints", "checkpoint", "scatter", "gather", "github", "gitlab", "gitfile",
             "storage", "from_queue", "access", "config", "rules", "pep", "onstart", "onsuccess", "onerror"}


def snakemake_names() -> set[str]:
    """The names a Snakefile is given: Snakemake's own functions and classes in its namespace."""
    names = dict(vars(snakemake.workflow))
    snakemake.ioutils.register_in_globals(names)
    snakemake.ioflags.register_in_globals(names)
    own = {n for n, v in names.items()
           if not n.startswith("_") and str(getattr(v, "__module__", "") or "").startswith("snakemake")}
    return own | _INJECTED


def _bound(target: ast.expr) -> list[str]:
    """The names an assignment target binds (not an attribute or item it sets)."""
    if isinstance(target, ast.Name):
        return [target.id]
    if isinstance(target, (ast.Tuple, ast.List)):
        return [n for t in target.elts for n in _bound(t)]
    if isinstance(target, ast.Starred):
        return _bound(target.value)
    return []


def top_level_bindings(code: str) -> list[tuple[str, int]]:
    """(name, line) of every top-level def, class, assignment, loop variable and import alias of
    compiled Snakefile code; an import of Snakemake's own object under its own name is no shadow."""
    found = []
    for node in ast.parse(code).body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            found.append((node.name, node.lineno))
        elif isinstance(node, ast.Assign):
            found += [(n, node.lineno) for t in node.targets for n in _bound(t)]
        elif isinstance(node, (ast.AnnAssign, ast.AugAssign, ast.For)):
            found += [(n, node.lineno) for n in _bound(node.target)]
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            from_snakemake = isinstance(node, ast.ImportFrom) and (node.module or "").startswith("snakemake")
            found += [(a.asname or a.name.split(".")[0], node.lineno) for a in node.names
                      if not (from_snakemake and (a.asname or a.name) == a.name)]
    return found


def compiled(path: Path) -> str:
    """A Snakefile's Python as Snakemake compiles it (the parser reads it through a source cache)."""
    cache = types.SimpleNamespace(open=lambda src, mode="r": open(src.get_path_or_uri(secret_free=True), mode))
    code, _ = parse(LocalSourceFile(str(path)), types.SimpleNamespace(sourcecache=cache), {})
    return code


def shadows(path: Path) -> list[str]:
    names = snakemake_names()
    return [f"{path.name}: {name}" for name, _ in top_level_bindings(compiled(path)) if name in names]


def test_the_snakemake_names_hold_the_helpers_a_snakefile_uses():
    names = snakemake_names()
    assert {"lookup", "expand", "glob_wildcards", "temp", "protected", "directory", "ancient", "touch", "pipe",
            "branch", "collect", "evaluate", "exists", "subpath", "unpack", "multiext", "report", "rules", "config",
            "workflow", "checkpoints"} <= names
    assert not {"json", "os", "Path", "sys"} & names  # the standard library's names are not Snakemake's


@pytest.mark.parametrize("path", SNAKEFILES, ids=lambda p: p.name)
def test_no_snakefile_binds_a_name_snakemake_gives_it(path):
    assert shadows(path) == [], "rename these top-level names: they shadow Snakemake's own"


def test_a_helper_named_like_a_snakemake_builtin_is_found(tmp_path):
    smk = tmp_path / "bad.smk"
    smk.write_text("from snakemake.io import expand\nimport os\n\n"
                   "def lookup(table, name):\n    return table[name]\n\n"
                   "glob_wildcards, other = 1, 2\n"
                   "rule r:\n    output: 'x'\n    shell: 'touch {output}'\n")
    assert shadows(smk) == ["bad.smk: lookup", "bad.smk: glob_wildcards"]


def test_common_smk_stays_under_300_lines():
    lines = len((ROOT / "workflow" / "rules" / "common.smk").read_text().splitlines())
    assert lines < MAX_COMMON_LINES, f"common.smk has {lines} lines: move plan-side helpers to study/workflow_plan.py"
