"""`dvc exp run` over the real stages: the values set on the command line reach training, and two
experiments compare (their effective params and metrics in `dvc exp show`, `dvc metrics diff`)."""

import json
import subprocess
import sys

import yaml
from helpers.dvc import dvc_env, dvc_project, run_process

from study.config import load_params, plan_runs


# ---------------------------------------------------------------- the real thing
def _declared(dvcyaml: dict, preset: str, project) -> list[str]:
    """Every path DVC knows, `${preset}` (dvc.yaml's templating) that of the run: the stages' outs,
    the top-level metrics and plots, and every file of a job's record (versions/)."""
    from study.versions import record_outs, records

    paths = []
    for stage in dvcyaml["stages"].values():
        paths += [next(iter(o)) if isinstance(o, dict) else o for o in stage.get("outs", [])]
    paths += dvcyaml.get("metrics", [])
    for plot in dvcyaml.get("plots", []):  # a path, or {title: {y: {path: column}}}
        paths += [plot] if isinstance(plot, str) else [f for spec in plot.values() for f in spec.get("y", {})]
    paths += [out for path in records(project) for out in record_outs(project, path)[0]]
    return [p.replace("${preset}", preset) for p in paths if p]


def _exp(shown: list, name: str) -> dict:
    """The data of the experiment `name` in `dvc exp show --json`."""
    found = [rev for base in shown for exp in base.get("experiments") or [] for rev in exp.get("revs") or []
             if rev.get("name") == name]
    assert len(found) == 1, f"experiment {name!r} not in dvc exp show --json: {json.dumps(shown)[:2000]}"
    return found[0]["data"]


def _metric_values(data: dict) -> dict:
    """{metrics file: its numbers} of one experiment, as dvc exp show --json has them."""
    return {path: entry["data"] for path, entry in (data.get("metrics") or {}).items()
            if path.startswith("results/ci/metrics/") and entry.get("data")}


def test_dvc_exp_run_trains_the_values_set_on_the_command_line_and_experiments_compare(tmp_path):
    """`dvc exp run -S preset=ci -S train.batch_size=32` trains with batch 32, records it, declares
    every file it writes, and its plots render; a second experiment (batch 48) is compared with it:
    `dvc exp show --json` holds each one's effective params and metrics, `dvc metrics diff` their numbers."""
    project, dvc = dvc_project(tmp_path)
    out = run_process([dvc, "exp", "run", "-n", "batch32", "-S", "preset=ci", "-S", "train.batch_size=32"], project)
    assert "values set for this run: preset=ci, train.batch_size=32" in out.stdout + out.stderr

    from study.config.overrides import run_overrides

    # the plan of what the stages ran: params.yaml as committed, the preset, the values set by -S
    runs = plan_runs(load_params(project / "params.yaml", run_overrides(project / "params.yaml"),
                                 presets_dir=project / "workflow/presets",
                                 schema_path=project / "workflow/schemas/params.schema.yaml"))
    assert {r.config["batch_size"] for r in runs} == {32}
    for run in runs:
        run_dir = project / "results/runs" / run.run_id
        assert json.loads((run_dir / "config.json").read_text())["batch_size"] == 32
        import pandas as pd

        assert pd.read_csv(run_dir / "epochs.csv")["epoch"].nunique() == run.config["epochs"]

    # every file the stages wrote is declared (Snakemake's own .snakemake/ aside)
    dvcyaml = yaml.safe_load((project / "dvc.yaml").read_text())
    stages = dvcyaml["stages"]
    declared = _declared(dvcyaml, "ci", project)
    # (each stage's run summary is its own out: python -m study.stage --summary)
    # (the work folders of a construction, `<name>.chunks/`, and of a corruption evaluation,
    # `corruptions.parts/`, let an interrupted job resume; no result is read from them)
    written = [p for root in ("results", "data") for p in (project / root).rglob("*") if p.is_file()
               and p.name != ".gitignore" and not p.parent.name.endswith((".chunks", ".parts"))]
    assert {p.name for p in (project / "results/ci/run_summary").iterdir()} == {
        f"{name}.md" for name, stage in stages.items() if "--summary" in stage["cmd"]}
    undeclared = [p.relative_to(project).as_posix() for p in written
                  if not any(p.relative_to(project).as_posix() == d or
                             p.relative_to(project).as_posix().startswith(d + "/") for d in declared)]
    assert not undeclared, f"written by a stage, declared by none: {undeclared[:20]}"

    # the epochs table has one column per name, the per-epoch learning rate among them
    import pandas as pd

    epochs = pd.read_csv(project / "results/ci/tables/epochs.csv")
    assert not any(c.endswith(".1") for c in epochs.columns) and {"lr", "epoch_lr"} <= set(epochs.columns)
    plots = project / "plots"
    shown = run_process([dvc, "plots", "show", "--out", plots], project)
    assert "error" not in (shown.stdout + shown.stderr).lower(), shown.stderr  # no file DVC cannot render
    html = (plots / "index.html").read_text()
    for title in ("clean accuracy per class over training", "robust accuracy per class over training",
                  "class-wise accuracy per evaluation"):
        assert title in html
    images = list(plots.rglob("*.png"))
    assert len(images) == len(list((project / "results/ci/figure_images").rglob("*.png"))) \
        == len(list((project / "results/ci/figures").rglob("*.png"))) > 0
    listing = sorted(p.relative_to(plots).as_posix() for p in plots.rglob("*") if p.is_file())
    print("dvc plots show wrote:", len(listing), "files:", listing[:10], file=sys.stderr)
    metrics = run_process([dvc, "metrics", "show"], project).stdout
    assert "results/ci/metrics/" in metrics  # a row per model


    # the second experiment: the stages up to the metrics, another batch size
    run_process([dvc, "exp", "run", "-n", "batch48", "-S", "preset=ci", "-S", "train.batch_size=48", "evaluate"],
                project)
    # each experiment's outputs are its own: batch48 stopped before the figures, so its commit holds
    # no figure image and no figure job's record (batch32's are older than its tables), batch32's does
    refs = run_process(["git", "for-each-ref", "--format=%(refname)", "refs/exps"], project).stdout.split()
    for name, drawn in (("batch32", True), ("batch48", False)):
        (ref,) = [r for r in refs if r.endswith(f"/{name}")]
        tree = run_process(["git", "ls-tree", "-r", "--name-only", ref], project).stdout.split()
        images = [f for f in tree if f.startswith("results/ci/figure_images/")]
        figure_records = [f for f in tree if f.startswith("versions/results/ci/logs/figures/")]
        assert bool(images) == bool(figure_records) == drawn, (name, images[:3], figure_records[:3])
    shown = json.loads(run_process([dvc, "exp", "show", "--json"], project).stdout)
    metrics = {}
    for name, batch in (("batch32", 32), ("batch48", 48)):
        data = _exp(shown, name)
        resolved = data["params"]["results/params.resolved.yaml"]["data"]["run"]
        # what ran: the preset's values, with the one set by -S (params.yaml as committed has batch 128,
        # lr 0.1, the paper preset)
        assert resolved["preset"] == "ci" and resolved["train"]["batch_size"] == batch
        assert resolved["train"]["optimizer"]["lr"] == 0.05 and resolved["train"]["epochs"] == 2
        metrics[name] = _metric_values(data)
        assert len(metrics[name]) >= 3, (name, sorted(data.get("metrics") or {}))
    # one file per model, every cell a number in both experiments, and not all equal
    assert set(metrics["batch32"]) == set(metrics["batch48"])
    numbers = {name: sorted(_numbers(values)) for name, values in metrics.items()}
    # (a count may differ: an evaluation that a check flags in one experiment has null numbers there)
    assert numbers["batch32"] and numbers["batch48"]
    assert numbers["batch32"] != numbers["batch48"]
    diff = run_process([dvc, "metrics", "diff", "batch32", "batch48", "--json"], project)
    changes = json.loads(diff.stdout)
    assert set(changes) <= set(metrics["batch32"]) and changes, diff.stdout[:2000]
    assert any(isinstance(v.get("diff"), (int, float)) for entry in changes.values() for v in _leaf_diffs(entry))
    # the documented table (docs/usage.md), as an 80-column terminal shows it: every column whole, each
    # experiment's values set and its headline numbers
    documented = ["exp", "show", "--no-pager", "--drop", ".*", "--keep", "Experiment",
                  "--keep", r"run\.(preset|train\.batch_size)$", "--keep", "(robust|worst)$"]
    env = {**dvc_env(), "COLUMNS": "80"}
    table = subprocess.run([str(dvc), *documented], cwd=project, env=env, capture_output=True, text=True).stdout
    print("dvc exp show at 80 columns:", table, sep="\n", file=sys.stderr)
    lines = table.splitlines()
    assert "…" not in table and max(len(line) for line in lines) <= 80, table
    assert lines[1].split() == ["Experiment", "robust", "worst", "run.preset", "run.train.batch_size"], table
    for name, batch in (("batch32", "32"), ("batch48", "48")):
        (row,) = [line.split() for line in lines if f"[{name}]" in line]
        assert row[-2:] == ["ci", batch] and all(0 <= float(v) <= 1 for v in row[-4:-2]), row


def _numbers(values) -> list[float]:
    if isinstance(values, dict):
        return [n for v in values.values() for n in _numbers(v)]
    return [values] if isinstance(values, (int, float)) and not isinstance(values, bool) else []


def _leaf_diffs(entry) -> list[dict]:
    """The {old, new, diff} leaves of one file's entry in `dvc metrics diff --json`."""
    if isinstance(entry, dict) and "diff" in entry:
        return [entry]
    return [leaf for v in (entry.values() if isinstance(entry, dict) else []) for leaf in _leaf_diffs(v)]
