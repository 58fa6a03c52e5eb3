"""DVC that tells the truth: a value set on the command line wins over the preset (DVC's
`-S` and Snakemake's `--config` alike, study.config.overrides), every `study` module a stage
runs is one of its deps, and the plots and metrics render from a finished run."""

import ast
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from helpers.dag import Dag, dry_run
from helpers.dvc import BIN, ROOT, dvc_env, git_project, run_process

from study.config import ConfigError, load_params, plan_runs
from study.config.overrides import changed_values, config_arguments
from study.config.params import coerce_overrides


# ---------------------------------------------------------------- overrides, unit
def test_changed_values_are_the_leaves_that_differ_and_lists_whole():
    committed = {"preset": "paper", "train": {"epochs": 200, "optimizer": {"lr": 0.1, "momentum": 0.9}},
                 "evaluate": {"default": ["clean", "pgd20"]}}
    current = {"preset": "ci", "train": {"epochs": 3, "optimizer": {"lr": 0.1, "momentum": 0.9}},
               "evaluate": {"default": ["clean"]}}
    assert changed_values(current, committed) == {"preset": "ci", "train": {"epochs": 3},
                                                  "evaluate": {"default": ["clean"]}}
    assert changed_values(committed, committed) == {}
    # a value written another way is the same value; a bool is not the number 1
    assert changed_values({"a": 5.0e-4, "b": True}, {"a": 0.0005, "b": 1}) == {"b": True}
    with pytest.raises(ConfigError, match="'train' of the committed params.yaml was removed"):
        changed_values({"preset": "ci"}, committed)


def test_config_arguments_round_trip_through_snakemake_parsing():
    """What a stage hands to `snakemake --config` comes back typed: Snakemake reads each value
    with YAML's base loader (every scalar a string), load_params types it again."""
    from snakemake.cli import parse_config

    overrides = {"preset": "ci", "features": None,
                 "train": {"epochs": 3, "optimizer": {"weight_decay": 5.0e-5}, "tf32": {"cudnn": False}},
                 "methods": {"pgd_at": {"adversary": {"alpha": "3/255"}}}, "evaluate": {"default": ["clean"]}}
    parsed = parse_config(config_arguments(overrides))
    assert coerce_overrides(parsed) == overrides


# ---------------------------------------------------------------- the stage command
def test_values_set_in_params_yaml_win_over_the_preset_for_every_front_end(tmp_path):
    """A value is set where params.yaml differs from the published settings (no git needed): after
    DVC's own writer put `-S preset=ci -S train.batch_size=32` into it (what `dvc exp run` and an
    applied experiment leave), load_params (plain Snakemake, `study`) and the stage's line agree,
    and the file differs from the committed one in those two lines alone."""
    from dvc.utils.hydra import apply_overrides

    shutil.copy2(ROOT / "params.yaml", tmp_path / "params.yaml")
    shutil.copytree(ROOT / "workflow", tmp_path / "workflow")
    apply_overrides(tmp_path / "params.yaml", ["preset=ci", "train.batch_size=32"])
    before, after = (ROOT / "params.yaml").read_text().splitlines(), (tmp_path / "params.yaml").read_text().splitlines()
    assert len(before) == len(after)
    assert sorted(b.strip() + " -> " + a.strip() for b, a in zip(before, after, strict=True) if a != b) == [
        "batch_size: 128 -> batch_size: 32", "preset: paper -> preset: ci"]
    params = load_params(tmp_path / "params.yaml", None, tmp_path / "workflow/presets",
                         tmp_path / "workflow/schemas/params.schema.yaml")
    assert params.preset == "ci" and {r.config["batch_size"] for r in plan_runs(params)} == {32}
    proc = run_process([sys.executable, "-m", "study.stage", "--params", tmp_path / "params.yaml",
                        "--profile", "workflow/profiles/cpu", "--dry-run", "train_all"], ROOT)
    assert "values set for this run: preset=ci, train.batch_size=32" in proc.stdout.splitlines()[0]
    # a value set back to the published one is no value set: the preset's stands
    apply_overrides(tmp_path / "params.yaml", ["train.batch_size=128"])
    params = load_params(tmp_path / "params.yaml", None, tmp_path / "workflow/presets",
                         tmp_path / "workflow/schemas/params.schema.yaml")
    preset = yaml.safe_load((ROOT / "workflow/presets/ci.yaml").read_text())
    assert params.train.batch_size == preset["train"]["batch_size"] != 128


def test_params_yaml_is_kept_in_the_form_dvc_writes(tmp_path):
    """DVC's writer (what `-S` runs) leaves params.yaml as committed byte for byte when it sets a
    value to the one there: an experiment's diff is its values and nothing else."""
    from dvc.utils.hydra import apply_overrides

    shutil.copy2(ROOT / "params.yaml", tmp_path / "params.yaml")
    apply_overrides(tmp_path / "params.yaml", ["preset=paper"])
    assert (tmp_path / "params.yaml").read_text() == (ROOT / "params.yaml").read_text()


def test_stage_hands_the_values_set_for_the_run_to_snakemake(tmp_path):
    project = git_project(tmp_path, with_study=False)
    params = yaml.safe_load((project / "params.yaml").read_text())
    params["preset"] = "ci"
    params["train"]["batch_size"] = 32
    (project / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    proc = run_process([sys.executable, "-m", "study.stage", "--params", project / "params.yaml",
                        "--profile", "workflow/profiles/cpu", "--dry-run", "train_all"], ROOT)
    line, command = proc.stdout.splitlines()
    assert "values set for this run: preset=ci, train.batch_size=32" in line
    assert command == (f"{sys.executable} -m snakemake --profile workflow/profiles/cpu train_all "
                       "--config preset=ci train={batch_size: 32}")


def test_a_stage_writes_its_run_summary_also_when_nothing_is_to_be_done(tmp_path):
    """DVC removes a stage's outs before it runs it; Snakemake calls no onsuccess handler when every
    output is up to date, so the stage writes its declared summary itself."""
    project = git_project(tmp_path)
    params = yaml.safe_load((project / "params.yaml").read_text())
    params["preset"] = "ci"
    (project / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    stage = [sys.executable, "-m", "study.stage", "--profile", "workflow/profiles/cpu", "--summary",
             "results/ci/run_summary/data.md", "data_all"]
    run_process(stage, project)  # prepares the synthetic data: the workflow's own summary
    first = (project / "results/ci/run_summary/data.md").read_text()
    assert "nothing to be done" not in first and first.strip()
    (project / "results/ci/run_summary/data.md").unlink()
    run_process(stage, project)  # every output up to date
    assert "data_all: nothing to be done, every output was up to date." in (
        project / "results/ci/run_summary/data.md").read_text()
    assert not (project / "results/ci/run_summary.md").exists(), "the stage's summary goes where --summary says"


def test_stage_picks_the_profile_of_the_machine():
    import torch

    from study.stage import machine_profile

    assert machine_profile().path.name == ("local" if torch.cuda.is_available() else "cpu")


# ---------------------------------------------------------------- Snakemake --config
def _run_configs(dag: Dag) -> dict[str, dict]:
    """{run id: the run config its `study train` job is given} in the DAG of a dry run."""
    configs = {}
    for job in dag.jobs:
        if match := re.match(r"study train .*?--run-dir results/runs/(\S+) --run-config '(\{.*?\})'", job.shell):
            configs[match.group(1)] = json.loads(match.group(2))
    return configs


def test_snakemake_config_values_win_over_the_preset(tmp_path):
    project = git_project(tmp_path, with_study=False)
    configs = _run_configs(dry_run(["--cores", "1", "--config", "preset=ci", "train={batch_size: 32}", "--",
                                    "train_all"], project, env=dvc_env()))
    expected = {r.run_id: r.config for r in plan_runs(load_params(
        project / "params.yaml", {"preset": "ci", "train": "{batch_size: 32}"},
        presets_dir=project / "workflow/presets", schema_path=project / "workflow/schemas/params.schema.yaml"))}
    assert set(configs) == set(expected) and len(configs) > 3
    # a value that no method's or group's own settings override reaches every run (one that some
    # override is refused: tests/workflow/test_train_overrides_reach.py)
    assert {c["batch_size"] for c in configs.values()} == {32}


def _reproduction_command(project: Path, *config: str) -> str:
    """The `study reproduction` command line the workflow plans with these --config values."""
    dag = dry_run(["--cores", "1", "--config", *config, "--", "results/reproduction.md"], project, env=dvc_env())
    (command,) = {j.shell for j in dag.jobs if j.shell.startswith("study reproduction ")}
    return command


def test_snakemake_config_values_reach_the_reproduction_report(tmp_path):
    """The report's job loads params.yaml itself: given the --config values the workflow planned
    with, an evaluation changed there is matched as changed (pgd3 at 4/255 is no stand-in for
    the published 8/255 AutoAttack), not as the preset defines it."""
    from helpers.class_rows import AT_CLEAN, AT_PGD, runs

    project = git_project(tmp_path, with_study=False)
    for folder in ("results/ci/tables", "results/ci/logs"):  # the ci preset's own (workflow/rules/common.smk)
        (project / folder).mkdir(parents=True)
    runs("at", {"clean@best": AT_CLEAN, "pgd3@best": AT_PGD}).to_csv(project / "results/ci/tables/classwise.csv",
                                                                     index=False)
    reports = {}
    for name, config in {"preset": ["preset=ci"], "changed": ["preset=ci", "evaluations={pgd3: {eps: 4/255}}"]}.items():
        command = _reproduction_command(project, *config)
        assert ("4/255" in command) == (name == "changed"), command
        run_process(["bash", "-c", command.replace("results/ci/reproduction.md", f"{name}.md")], project)
        reports[name] = (project / f"{name}.md").read_text()
    stand_in = "pgd3@best (pgd) in place of autoattack"
    assert stand_in in reports["preset"]  # the preset's pgd3: L-inf 8/255, standing in for AutoAttack
    assert stand_in not in reports["changed"] and "cfa_at_best_autoattack_mean" not in reports["changed"]
    assert "cfa_at_best_clean_mean" in reports["changed"]  # the clean rows are matched as before


# ---------------------------------------------------------------- deps: the modules each stage runs
def _module_file(name: str) -> Path | None:
    base = ROOT / Path(*name.split("."))
    for path in (base.with_suffix(".py"), base / "__init__.py"):
        if path.exists():
            return path
    return None


def _imports(tree: ast.AST, package: str) -> set[str]:
    """study modules a module imports anywhere (module level and inside functions); one that
    imports by name at run time (importlib) needs the modules its strings name, else its whole package."""
    found, by_name = set(), False
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name.split(".")[0] == "study"}
        elif isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "study":
            found.add(node.module)
            found |= {f"{node.module}.{a.name}" for a in node.names if _module_file(f"{node.module}.{a.name}")}
        elif getattr(node, "id", getattr(node, "attr", None)) == "import_module":
            by_name = True
    if by_name:
        named = {n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str)
                 and re.fullmatch(r"study(\.\w+)+", n.value) and _module_file(n.value)}
        found |= named or {f"{package}.*"}
    return found


def _closure(modules: set[str]) -> set[Path]:
    """The files of these modules, of every module they import, and of their packages' __init__."""
    todo, files = list(modules), set()
    while todo:
        name = todo.pop()
        if name.endswith(".*"):  # a whole package
            pkg = ROOT / Path(*name[:-2].split("."))
            todo += [".".join(p.relative_to(ROOT).with_suffix("").parts) for p in pkg.rglob("*.py")]
            continue
        parts = name.split(".")
        todo += [".".join(parts[:i]) for i in range(1, len(parts))
                 if (ROOT / Path(*parts[:i]) / "__init__.py").exists()]
        path = _module_file(name)
        if path is None or path in files:
            continue
        files.add(path)
        package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
        todo += list(_imports(ast.parse(path.read_text()), package))
    return files


def _cli_subcommands() -> dict[str, set[str]]:
    """{`study` subcommand: the study modules its function (and the cli helpers it calls) imports,
    with what every module of study/cli imports at its top (`study` imports them all)}."""
    trees = [ast.parse(p.read_text()) for p in sorted((ROOT / "study/cli").glob("*.py"))]
    functions = {f.name: f for tree in trees for f in tree.body if isinstance(f, ast.FunctionDef)}
    # study.cli's own modules are every stage's (its files are added whole): not followed from here
    top = {n.module for tree in trees for n in tree.body if isinstance(n, ast.ImportFrom) and n.module
           and n.module.split(".")[0] == "study" and n.module.split(".")[:2] != ["study", "cli"]}

    def needs(name: str, seen: set) -> set[str]:
        seen.add(name)
        fn = functions[name]
        mods = _imports(fn, "study")
        for call in (n for n in ast.walk(fn) if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)):
            if call.func.id in functions and call.func.id not in seen:
                mods |= needs(call.func.id, seen)
        return mods

    subcommands = {}
    for fn in functions.values():
        parser = None
        for node in ast.walk(fn):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
                if node.func.attr == "add_parser":
                    parser = node.args[0].value
                elif node.func.attr == "set_defaults" and parser:
                    func = next(k.value.id for k in node.keywords if k.arg == "func")
                    subcommands[parser] = top | needs(func, set())
    return subcommands


def _workflow_imports() -> set[str]:
    """What parsing the workflow imports (every stage parses all of it: Snakefile and its includes)."""
    text = "\n".join(p.read_text() for p in [ROOT / "Snakefile", *sorted((ROOT / "workflow/rules").glob("*.smk"))])
    found = set()
    pattern = r"^[ \t]*(from study[\w.]* import \([^)]*\)|from study[\w.]* import [^\n(]*|import study[\w.]*)"
    for statement in re.findall(pattern, text, re.M):
        code = re.sub(r"#[^\n]*", "", statement)
        found |= _imports(ast.parse(code.replace("\n", " ")), "study")
    return found


def _stage_commands(stage_cmd: str, project: Path) -> set[str]:
    """The `study` subcommands of the jobs a stage's targets run (the ci preset's dry run)."""
    from study.stage import build_parser

    words = re.search(r"python -m study\.stage ([^&;]+)", stage_cmd).group(1).split()
    # (a file target of the preset's own folder, `${preset}`: the ci preset's, as dvc.yaml interpolates it)
    targets = [t.replace("${preset}", "ci") for t in build_parser().parse_args(words).targets]
    dag = dry_run(["--cores", "1", *targets, "--config", "preset=ci"], project, env=dvc_env())
    commands = {m for job in dag.jobs for m in re.findall(r"(?:^|[\s&;(])study ([a-z][a-z-]*)", job.shell)}
    assert commands, f"no `study` command in the jobs of {targets}"
    return commands


def _covered(path: Path, deps: list[str]) -> bool:
    rel = path.relative_to(ROOT).as_posix()
    return any(rel == d or rel.startswith(d.rstrip("/") + "/") for d in deps)


def test_every_study_module_a_stage_runs_is_one_of_its_deps(tmp_path):
    """From the entry points a stage runs (the workflow it parses, `python -m study.stage`, the
    `study` subcommands of its jobs) through every import: each module file is under a dep."""
    project = git_project(tmp_path, with_study=False)
    stages = yaml.safe_load((ROOT / "dvc.yaml").read_text())["stages"]
    subcommands = _cli_subcommands()
    parse_time = _workflow_imports() | {"study.stage"}
    assert {"study.config", "study.figures.catalog"} <= parse_time
    for name, stage in stages.items():
        if name == "resolve":  # runs no Snakemake: `python -m study.stage --write-params` and what it imports
            missing = sorted(p.relative_to(ROOT).as_posix() for p in _closure({"study.stage"})
                             if not _covered(p, [d for d in stage["deps"] if isinstance(d, str)]))
            assert not missing, f"dvc.yaml stage resolve: runs {missing} but lists none of them in deps"
            continue
        commands = _stage_commands(stage["cmd"], project)
        assert commands, f"stage {name} runs no `study` command"
        unknown = commands - set(subcommands)
        assert not unknown, f"stage {name}: jobs run study {unknown}, which study/cli does not define"
        # study/cli itself (its other subcommands' imports are theirs, not this stage's)
        needed = _closure(parse_time | set().union(*(subcommands[c] for c in commands))) | set(
            (ROOT / "study/cli").glob("*.py"))
        deps = [d for d in stage["deps"] if isinstance(d, str)]
        missing = sorted(p.relative_to(ROOT).as_posix() for p in needed if not _covered(p, deps))
        assert not missing, f"dvc.yaml stage {name}: runs {missing} but lists none of them (or a folder above) in deps"
        # and every workflow file it parses
        for path in [ROOT / "Snakefile", *(ROOT / "workflow/rules").glob("*.smk")]:
            assert _covered(path, deps), f"dvc.yaml stage {name}: parses {path.relative_to(ROOT)}, not in deps"






def test_stages_that_import_their_deps_are_up_to_date_after_they_ran(tmp_path):
    """Python writes its bytecode cache into the package folders the stages name as deps while they
    run, and a later stage's imports add to a folder after an earlier stage recorded its hash; the
    project's .dvcignore keeps that cache out of the hashes, or `dvc status` would call a stage that
    just ran changed (it did, in CI, for the resolve stage)."""
    project = tmp_path
    shutil.copy2(ROOT / ".dvcignore", project / ".dvcignore")
    (project / "pkg").mkdir()
    (project / "pkg" / "__init__.py").write_text("")
    (project / "pkg" / "first.py").write_text("VALUE = 1\n")
    (project / "pkg" / "second.py").write_text("VALUE = 2\n")

    def stage(module, deps):
        return {"cmd": f"{sys.executable} -c 'import pkg.{module}; open(\"{module}.txt\", \"w\").write(\"1\")'",
                "deps": deps, "outs": [{f"{module}.txt": {"cache": False}}]}

    (project / "dvc.yaml").write_text(yaml.safe_dump({"stages": {
        "first": stage("first", ["pkg"]), "second": stage("second", ["pkg", "first.txt"])}}))
    env = {k: v for k, v in dvc_env().items() if k != "PYTHONDONTWRITEBYTECODE"}

    def run(*args):
        return subprocess.run([str(a) for a in args], cwd=project, env=env, check=True, capture_output=True,
                              text=True).stdout

    run("git", "init", "-q")
    run(BIN / "dvc", "init", "-q")
    run(BIN / "dvc", "repro", "-q")
    assert {p.name.split(".")[0] for p in (project / "pkg" / "__pycache__").iterdir()} >= {"first", "second"}
    assert "up to date" in (status := run(BIN / "dvc", "status")), status
    (project / "pkg" / "first.py").write_text("VALUE = 3\n")  # a real change of a dep still shows
    assert "modified:" in (status := run(BIN / "dvc", "status")) and "pkg" in status, status
