"""`dvc exp run` over the real stages: the epochs set on the command line reach training."""

import json
import sys

import yaml
from helpers.dvc import BIN, _git_project, _run

from study.config import load_params, plan_runs


# ---------------------------------------------------------------- the real thing
def _declared(stages: dict, preset: str) -> list[str]:
    """Every out, metric and plot path of the stages, `${preset}` (dvc.yaml's templating) that of the run."""
    paths = []
    for stage in stages.values():
        for kind in ("outs", "metrics", "plots"):
            paths += [next(iter(o)) if isinstance(o, dict) else o for o in stage.get(kind, [])]
    return [p.replace("${preset}", preset) for p in paths]


def test_dvc_exp_run_trains_the_epochs_set_on_the_command_line(tmp_path):
    """`dvc exp run -S preset=ci -S train.epochs=3` trains 3 epochs (where the preset's methods
    set none of their own), records 3, declares every file it writes, and its plots render."""
    project = _git_project(tmp_path)
    dvc = BIN / "dvc"
    _run([dvc, "init", "-q"], project)
    _run([dvc, "config", "core.analytics", "false"], project)
    _run(["git", "-c", "user.name=t", "-c", "user.email=t@t", "add", "."], project)
    _run(["git", "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "dvc"], project)
    out = _run([dvc, "exp", "run", "-S", "preset=ci", "-S", "train.epochs=3"], project)
    assert "values set for this run: preset=ci, train.epochs=3" in out.stdout + out.stderr

    from study.config.overrides import run_overrides

    # the plan of what the stages ran: params.yaml as committed, the preset, the values set by -S
    runs = plan_runs(load_params(project / "params.yaml", run_overrides(project / "params.yaml"),
                                 presets_dir=project / "workflow/presets",
                                 schema_path=project / "workflow/schemas/params.schema.yaml"))
    assert sum(r.config["epochs"] == 3 for r in runs) > len(runs) / 2
    for run in runs:
        run_dir = project / "results/runs" / run.run_id
        assert json.loads((run_dir / "config.json").read_text())["epochs"] == run.config["epochs"]
        import pandas as pd

        assert pd.read_csv(run_dir / "epochs.csv")["epoch"].nunique() == run.config["epochs"]
    shown = json.loads(_run([dvc, "exp", "show", "--json"], project).stdout)
    assert '"epochs": 3' in json.dumps(shown) and '"preset": "ci"' in json.dumps(shown)

    # every file the stages wrote is declared (Snakemake's own .snakemake/ aside)
    stages = yaml.safe_load((project / "dvc.yaml").read_text())["stages"]
    declared = _declared(stages, "ci")
    # (each stage's run summary is its own out: python -m study.stage --summary)
    written = [p for root in ("results", "data") for p in (project / root).rglob("*") if p.is_file()
               and p.name != ".gitignore"]
    assert {p.name for p in (project / "results/ci/run_summary").iterdir()} == {f"{s}.md" for s in stages}
    undeclared = [p.relative_to(project).as_posix() for p in written
                  if not any(p.relative_to(project).as_posix() == d or
                             p.relative_to(project).as_posix().startswith(d + "/") for d in declared)]
    assert not undeclared, f"written by a stage, declared by none: {undeclared[:20]}"

    # the epochs table has one column per name, the per-epoch learning rate among them
    import pandas as pd

    epochs = pd.read_csv(project / "results/ci/tables/epochs.csv")
    assert not any(c.endswith(".1") for c in epochs.columns) and {"lr", "epoch_lr"} <= set(epochs.columns)
    plots = project / "plots"
    shown = _run([dvc, "plots", "show", "--out", plots], project)
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
    metrics = _run([dvc, "metrics", "show"], project).stdout
    assert "results/ci/metrics/" in metrics  # a row per model
