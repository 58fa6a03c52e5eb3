"""The package's shape (docs/architecture.md): layers with no import back up, no import
circle, short functions. Read from the source with `ast`, so every import counts, those
inside functions too."""

import ast
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "study"
MAX_FUNCTION_LINES = 80

# Top-level parts of `study`, lowest layer first; a part imports only from its own layer
# or the layers below (docs/architecture.md draws the same list).
LAYERS = [
    {"io", "device", "provenance", "checkpoints"},
    {"data", "models", "attacks", "metrics"},
    {"run_directory", "config", "predict", "workload", "resources", "cost", "labels", "record_names"},
    {"evaluate", "train", "features"},
    {"figures", "tables", "published", "reproduction", "front_page", "preflight", "stage", "workflow_plan", "rename",
     "versions"},
    {"cli"},
]


def _module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(path: Path, modules: set[str]) -> set[str]:
    """The study modules `path` imports (a `from pkg import name` of a submodule counts as it)."""
    tree = ast.parse(path.read_text())
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [f"{node.module}.{a.name}" for a in node.names] + [node.module]
        else:
            continue
        for name in names:
            # the longest prefix that is a module of the package
            while name and name not in modules:
                name = name.rpartition(".")[0]
            if name.startswith("study.") or name == "study":
                found.add(name)
    return found


def _graph() -> dict[str, set[str]]:
    files = {_module_name(p): p for p in PACKAGE.rglob("*.py")}
    modules = set(files)
    graph = {}
    for name, path in files.items():
        # A package's own __init__ is not an edge: importing `study.data.x` runs it first anyway.
        graph[name] = {m for m in _imports(path, modules) if m != name and not name.startswith(m + ".")}
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index, low, stack, on_stack, out = {}, {}, [], set(), []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    sys.setrecursionlimit(10000)
    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def _part(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ""


def _layer(part: str) -> int:
    for i, layer in enumerate(LAYERS):
        if part in layer:
            return i
    raise AssertionError(f"study.{part} is in no layer of this test and docs/architecture.md: place it")


def test_the_cycle_finder_finds_a_cycle():
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert _cycles({"a": {"b"}, "b": set()}) == []


def test_no_import_cycle_between_modules_of_study():
    assert _cycles(_graph()) == []


def test_no_import_cycle_between_top_level_parts():
    graph = _graph()
    parts: dict[str, set[str]] = {}
    for module, targets in graph.items():
        parts.setdefault(_part(module), set()).update(_part(t) for t in targets if _part(t) != _part(module))
    assert _cycles(parts) == []


def test_every_part_has_a_layer_and_no_import_runs_back_up():
    upward = []
    for module, targets in _graph().items():
        if module == "study":
            continue
        for target in targets:
            if target != "study" and _layer(_part(target)) > _layer(_part(module)):
                upward.append(f"{module} -> {target}")
    assert upward == []


def test_no_function_in_study_is_longer_than_the_limit():
    long = []
    for path in PACKAGE.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                lines = node.end_lineno - node.lineno + 1
                if lines > MAX_FUNCTION_LINES:
                    long.append(f"{path.relative_to(ROOT)}:{node.lineno} {node.name} ({lines} lines)")
    assert long == []


def test_ruff_with_the_complexity_limits_of_pyproject_passes():
    ruff = shutil.which("ruff") or str(Path(sys.executable).parent / "ruff")
    proc = subprocess.run([ruff, "check", "study", "tests", "tools", "workflow"], cwd=ROOT, capture_output=True,
                          text=True)
    assert proc.returncode == 0, proc.stdout[-3000:]
    config = (ROOT / "pyproject.toml").read_text()
    assert '"C901"' in config and '"PLR0915"' in config and "max-complexity = 12" in config


# What Snakemake's DAG (common.smk), `study plan` and the table and figure jobs import: every
# such process would otherwise pay torch's import (about 3 s of CPU) for nothing.
TORCH_FREE = ("study.config", "study.config.zoo", "study.resources", "study.cost", "study.figures.panels",
              "study.figures.catalog", "study.tables.classwise", "study.tables.robustness", "study.reproduction",
              "tools.readme_numbers", "study.data.registry", "study.models.registry")


def test_planning_tables_and_figures_never_import_torch():
    code = (
        "import sys\n"
        f"for name in {TORCH_FREE!r}: __import__(name)\n"
        "from study.config import constructions, load_params, plan_runs\n"
        "from study.resources import evaluate_minutes, mem_mb, train_minutes\n"
        "params = load_params('params.yaml', {'preset': 'paper'}, presets_dir='workflow/presets',"
        " schema_path='workflow/schemas/params.schema.yaml')\n"
        "runs = plan_runs(params)\n"
        "constructions(params, runs)\n"
        "[(train_minutes(r.run), mem_mb(r.run)) for r in runs]\n"
        "from study.cost import price\n"
        "price(params, runs, [])\n"
        "print(len(runs), sorted(m for m in sys.modules if m.split('.')[0] == 'torch')[:5])\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr[-2000:]
    count, loaded = proc.stdout.split(" ", 1)
    assert int(count) > 0 and loaded.strip() == "[]", proc.stdout


def test_building_a_model_and_fetching_a_source_still_work_from_the_lazy_tables():
    from study.data.registry import SOURCES, get_source, sources
    from study.models.registry import MODEL_NAMES, MODELS, build_model

    assert SOURCES is sources() and get_source("synthetic", "default").load.__name__ == "make_synthetic"
    for name in MODEL_NAMES:  # every row names a module and a factory that exist
        assert callable(MODELS[name].build), name
    assert build_model("small_cnn", 10).fc.out_features == 10
