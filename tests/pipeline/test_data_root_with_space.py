"""A data folder whose name has a space (`data.root: "my data"`) runs: Snakemake prepares the ci
preset's synthetic data into it and trains a run from it, each `study` command receiving the
folder as one word (before: `study prepare: error: unrecognized arguments: data/raw ...`)."""

from __future__ import annotations

from helpers.workflow import copy_project, run_command

from study.config import load_params, plan_runs


def test_prepare_and_train_with_a_space_in_data_root(tmp_path):
    project = copy_project(tmp_path)
    config = ["--config", "preset=ci", 'data={root: "my data"}']
    params = load_params(project / "params.yaml", {"preset": "ci", "data": '{root: "my data"}'},
                         presets_dir=project / "workflow/presets",
                         schema_path=project / "workflow/schemas/params.schema.yaml")
    # the cheapest run: a plain one on the prepared data (no parent, no constructed data)
    run = min((r for r in plan_runs(params) if not r.init_from and not r.config.get("constructed")),
              key=lambda r: (r.config["epochs"], r.config["method"] != "standard"))
    run_command(["snakemake", "--cores", "2", *config, "--", f"results/runs/{run.run_id}/model.pt"], project)
    assert (project / "my data/prepared/synthetic-default.pt").is_file()
    assert (project / f"results/runs/{run.run_id}/model.pt").is_file()
    assert not (project / "data").exists(), "nothing went to the default folder"
