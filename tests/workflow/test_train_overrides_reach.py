"""A value of the train section set on the command line reaches every run, or is refused in one
line naming the runs whose own settings override it and the keys to set (study/config/reach.py);
the DVC stage `resolve` writes the configuration that runs (results/params.resolved.yaml)."""

import subprocess
import sys

import yaml
from helpers.dvc import ROOT, dvc_env, git_project, run_process
from helpers.params import SCHEMA

from study.config import load_params, parse_params, plan_runs


def _stage(project, *args) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "study.stage", "--params", str(project / "params.yaml"),
                           "--profile", "workflow/profiles/cpu", *args], cwd=ROOT, env=dvc_env(),
                          capture_output=True, text=True, timeout=300)


def _set(project, **train) -> None:
    params = yaml.safe_load((project / "params.yaml").read_text())
    params["preset"] = "ci"
    params["train"].update(train)
    (project / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))


def _ci_plan(project, overrides: dict) -> list:
    return plan_runs(load_params(project / "params.yaml", {"preset": "ci", **overrides},
                                 presets_dir=project / "workflow/presets",
                                 schema_path=project / "workflow/schemas/params.schema.yaml"))


def test_an_epochs_value_that_methods_override_is_refused_naming_the_runs_and_keys(tmp_path):
    project = git_project(tmp_path, with_study=False)
    # the ci runs whose own settings set other epochs than 3 (derived from the plan, not typed)
    others = [r for r in _ci_plan(project, {"train.epochs": 3}) if r.config["epochs"] != 3]
    assert others
    _set(project, epochs=3)
    proc = _stage(project, "--dry-run", "train_all")
    assert proc.returncode == 2 and proc.stdout == "", proc.stdout + proc.stderr
    assert proc.stderr.count("\n") == 1 and "Traceback" not in proc.stderr, proc.stderr
    line = proc.stderr
    assert line.startswith("study.stage: train.epochs=3 (set on the command line) does not reach ")
    for run in others:
        assert f"/{run.config['method']} ({run.config['epochs']})" in line, (run.config["method"], line)
    assert "methods.faal_at.train.epochs" in line and "features.train.train.epochs" in line
    assert "params.yaml was put back as committed" not in line  # not under dvc exp run: the user's edit stays

    # the keys it names, set as well: every run trains 3 epochs
    params = yaml.safe_load((project / "params.yaml").read_text())
    setters = [w.split(":")[0] for w in line.split("set it: ")[1].split("; set those keys")[0].split("; ")]
    for setter in setters:
        node = params
        *path, leaf = setter.split(".")
        for key in path:
            node = node.setdefault(key, {})
        node[leaf] = 3
    (project / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    proc = _stage(project, "--dry-run", "--write-params", tmp_path / "resolved.yaml", "train_all")
    assert proc.returncode == 0, proc.stderr
    resolved = parse_params(yaml.safe_load((tmp_path / "resolved.yaml").read_text())["run"], SCHEMA)
    assert {r.config["epochs"] for r in plan_runs(resolved)} == {3}
    assert resolved.preset == "ci" and resolved.train.batch_size == 64  # the preset's, merged


def test_snakemake_config_refuses_it_too_in_one_line(tmp_path):
    project = git_project(tmp_path, with_study=False)
    proc = run_process(["snakemake", "-n", "--cores", "1", "--config", "preset=ci", "train={epochs: 3}", "--",
                        "train_all"], project, ok=False)
    assert proc.returncode != 0
    out = proc.stdout + proc.stderr
    assert "train.epochs=3 (set on the command line) does not reach" in out and "Traceback" not in out, out[-3000:]
    # a value no run's own settings override is applied to every run
    assert run_process(["snakemake", "-n", "--cores", "1", "--config", "preset=ci", "train={batch_size: 32}", "--",
                        "train_all"], project).returncode == 0


def test_the_resolve_stage_writes_what_runs(tmp_path):
    project = git_project(tmp_path, with_study=False)
    _set(project, batch_size=32)
    stages = yaml.safe_load((ROOT / "dvc.yaml").read_text())["stages"]
    cmd = stages["resolve"]["cmd"].split()
    out = project / stages["resolve"]["outs"][0].popitem()[0]
    proc = run_process([sys.executable if c == "python" else c for c in cmd] + ["--params", project / "params.yaml"],
                       project)
    assert "values set for this run: preset=ci, train.batch_size=32" in proc.stdout
    resolved = yaml.safe_load(out.read_text())["run"]
    assert resolved == load_params(project / "params.yaml", {"preset": "ci", "train.batch_size": 32},
                                   presets_dir=project / "workflow/presets",
                                   schema_path=project / "workflow/schemas/params.schema.yaml").set_fields()
    # every later stage declares its sections from the resolved file, none from params.yaml
    for name, stage in stages.items():
        if name != "resolve":
            files = [next(iter(p)) for p in stage["params"] if isinstance(p, dict)]
            assert files == ["results/params.resolved.yaml"] and not [p for p in stage["params"] if isinstance(p, str)]


def test_the_committed_resolved_params_are_params_yaml_as_committed():
    """results/params.resolved.yaml is in git (a fresh clone's `dvc repro --dry` reads the params the
    stages declare from it): it holds params.yaml with its preset, as `dvc repro` writes it."""
    committed = yaml.safe_load((ROOT / "results/params.resolved.yaml").read_text())["run"]
    assert committed == load_params(ROOT / "params.yaml", presets_dir=ROOT / "workflow/presets",
                                    schema_path=ROOT / "workflow/schemas/params.schema.yaml").set_fields(), \
        "results/params.resolved.yaml is stale: python -m study.stage --write-params results/params.resolved.yaml"
