"""The `study` command as a user runs it: clear one-line errors, nothing lost."""

import json
import os

from helpers.commands import run_study


def test_plan_lists_the_runs_of_a_preset(repo_root, ci_params):
    from study.config import method_definition, plan_runs

    out = run_study("plan", "--preset", "ci", cwd=repo_root).stdout
    plan = json.loads(run_study("plan", "--preset", "ci", "--json", cwd=repo_root).stdout)
    assert out.startswith(f"preset ci: {len(plan)} runs")
    assert all(r["run_id"] in out for r in plan)
    # and the seeds each claim family needs for 80% power, on the preset's test images
    from study.reproduction.power import families

    per_class = ci_params.evaluate.test_per_class or 1000
    seeds = max(len(g.seeds) for g in ci_params.experiments)
    assert f"({per_class:g} test images per class; preset ci runs {seeds}):" in out
    assert all(f"  {f.paper}, {f.kind} rows, {f.statistic} ({len(f.needed)}): {f.text}" in out
               for f in families(per_class))
    # what `study plan` prints is the library's plan, in its order, each run's config complete
    assert [(r["run_id"], r["config"], r["groups"]) for r in plan] == [
        (r.run_id, r.config, r.groups) for r in plan_runs(ci_params)]
    original = [r for r in plan if not r["config"].get("constructed") and "mitigation" not in r["groups"]]
    assert all(r["evaluations"][0] == "clean" for r in original)
    assert sorted(r["config"]["constructed"]["kind"] for r in plan if r["config"].get("constructed")) == sorted(
        ci_params.features.datasets)
    # mitigation: every method of the group and the run FRL fine-tunes, with best checkpoints
    group = ci_params.group("mitigation")
    parents = {method_definition(ci_params, m).get("init_from") for m in group.methods} - {None}
    mitigation = [r for r in plan if "mitigation" in r["groups"]]
    assert parents and {r["config"]["method"] for r in mitigation} == set(group.methods) | parents
    assert all("best" in r["checkpoints"] for r in mitigation)
    baseline = [r for r in plan if "baseline" in r["groups"]]
    assert all(r["checkpoints"] == ["last"] for r in baseline)


def test_unknown_dataset_names_the_valid_ones(tmp_path):
    proc = run_study("prepare", "--dataset", "imagenet42", "--variant", "official", "--out",
                     str(tmp_path / "x.pt"), check=False)
    assert proc.returncode == 2
    assert "imagenet42" in proc.stderr and "cifar10" in proc.stderr and "synthetic" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_offline_without_mirror_says_which_file_goes_where(tmp_path):
    empty = tmp_path / "mirror"
    empty.mkdir()
    proc = run_study("prepare", "--dataset", "cifar10", "--variant", "jpeg", "--raw-dir", str(tmp_path / "raw"),
                     "--mirror", str(empty), "--out", str(tmp_path / "c.pt"), check=False)
    assert proc.returncode == 2
    assert "cifar10-jpeg.tar.gz" in proc.stderr
    assert str(tmp_path / "raw") in proc.stderr
    assert "STUDY_DATA_MIRROR" in proc.stderr
    assert not (tmp_path / "c.pt").exists()


def test_corrupt_archive_in_mirror_is_refused_and_not_copied(tmp_path):
    mirror = tmp_path / "mirror" / "cifar10-jpeg"
    mirror.mkdir(parents=True)
    (mirror / "cifar10-jpeg.tar.gz").write_bytes(b"not an archive")
    proc = run_study("prepare", "--dataset", "cifar10", "--variant", "jpeg", "--raw-dir", str(tmp_path / "raw"),
                     "--mirror", str(tmp_path / "mirror"), "--out", str(tmp_path / "c.pt"), check=False)
    assert proc.returncode == 2
    assert "checksum" in proc.stderr.lower()
    assert not (tmp_path / "raw" / "cifar10-jpeg.tar.gz").exists()
    assert (mirror / "cifar10-jpeg.tar.gz").read_bytes() == b"not an archive", "the mirror copy is left alone"


def test_missing_prepared_data_points_to_study_prepare(tmp_path, ci_params):
    from study.config import plan_runs

    cfg = json.dumps(plan_runs(ci_params)[0].config)
    proc = run_study("train", "--data", str(tmp_path / "nope.pt"), "--run-dir", str(tmp_path / "run"),
                     "--run-config", cfg, check=False)
    assert proc.returncode == 2
    assert "nope.pt" in proc.stderr and "study prepare" in proc.stderr


def test_bad_run_config_is_named_where_the_argument_is_read(tmp_path):
    proc = run_study("train", "--data", str(tmp_path / "nope.pt"), "--run-dir", str(tmp_path / "run"),
                     "--run-config", "{}", check=False)
    assert proc.returncode == 2
    assert "argument --run-config: run config: missing key(s) dataset" in proc.stderr
    assert "Traceback" not in proc.stderr and not (tmp_path / "run").exists()


def test_bad_json_argument_is_named(tmp_path):
    proc = run_study("evaluate", "--data", "x.pt", "--run-dir", "r", "--evaluation", "{broken", "--out", "o",
                     check=False)
    assert proc.returncode == 2
    assert "not valid JSON" in proc.stderr


def test_prepare_train_evaluate_by_hand(tmp_path, ci_params):
    """The steps a rule runs, typed by a person: prepare, train, evaluate, tables, figure."""
    from study.config import plan_runs, resolve_evaluation

    data = tmp_path / "synthetic-default.pt"
    run_study("prepare", "--dataset", "synthetic", "--variant", "default", "--out", str(data),
              "--synthetic", ci_params.data.synthetic.model_dump_json(exclude_unset=True))
    cfg = next(r for r in plan_runs(ci_params) if r.config["method"] == "standard").config
    from study.config.spec import ConfigSpec

    run = tmp_path / "runs" / ConfigSpec.parse(cfg).run_id
    # (with the list of what it imports: an eager run never loads torch's compiler, which costs
    # seconds per process; `study/train/optim.py` says why it keeps no torch.optim optimizer)
    trained = run_study("train", "--data", str(data), "--run-dir", str(run), "--run-config", json.dumps(cfg),
                        "--device", "cpu", env={**os.environ, "PYTHONPROFILEIMPORTTIME": "1"})
    imported = {line.rsplit("|", 1)[-1].strip() for line in trained.stderr.splitlines()
                if line.startswith("import time")}
    assert "torch" in imported and "torch._dynamo" not in imported
    record = tmp_path / "evaluations" / run.name / "clean.parquet"
    run_study("evaluate", "--data", str(data), "--run-dir", str(run), "--out", str(record),
              "--evaluation", json.dumps(resolve_evaluation(ci_params, "clean")))
    run_study("tables", "--records", str(record), "--epochs", str(run / "epochs.csv"),
              "--out-dir", str(tmp_path / "tables"))
    run_study("figure", "classwise", "--table", str(tmp_path / "tables" / "classwise.csv"), "--dataset", "synthetic",
              "--model", "small_cnn", "--method", "standard", "--out-stem", str(tmp_path / "fig"))
    assert (tmp_path / "fig.png").stat().st_size > 1000 and (tmp_path / "fig.pdf").exists()
    proc = run_study("figure", "epochs", "--table", str(tmp_path / "tables" / "epochs.csv"), "--dataset", "synthetic",
                     "--model", "small_cnn", "--method", "pgd_at", "--out-stem", str(tmp_path / "f2"), check=False)
    assert proc.returncode == 2 and "no rows for dataset=synthetic model=small_cnn method=pgd_at" in proc.stderr


def test_bad_evaluation_json_is_one_line_naming_each_key(tmp_path):
    """A new user's evaluation: a negative eps, steps not a number, no name; one line, no traceback."""
    proc = run_study("evaluate", "--run-dir", str(tmp_path), "--data", str(tmp_path / "d.pt"),
                     "--evaluation", '{"type": "pgd", "eps": -1, "steps": "x"}', "--out", str(tmp_path / "o"),
                     check=False)
    assert proc.returncode == 2
    err = proc.stderr.strip()
    assert "\n" not in err and "Traceback" not in err
    for named in ("eps: -1 is not valid; expected a number >= 0", "steps: 'x' is not valid; expected an integer >= 1",
                  "name: missing (required)", "norm: missing (required); expected one of linf, l2"):
        assert named in err, err


def test_misspelt_evaluation_key_names_the_valid_keys(tmp_path):
    ev = {"type": "clean", "name": "clean", "tset_per_class": 3}
    proc = run_study("evaluate", "--run-dir", str(tmp_path), "--data", str(tmp_path / "d.pt"),
                     "--evaluation", json.dumps(ev), "--out", str(tmp_path / "o"), check=False)
    assert proc.returncode == 2
    assert "tset_per_class: unknown key (valid keys: batch_size, checkpoint, name, seed, shards, test_per_class, " \
           "type)" in proc.stderr
    proc = run_study("evaluate", "--run-dir", str(tmp_path), "--data", str(tmp_path / "d.pt"),
                     "--evaluation", '{"type": "fgsm", "name": "x"}', "--out", str(tmp_path / "o"), check=False)
    assert "type: 'fgsm' is not valid; valid: clean, pgd, autoattack, square" in proc.stderr


def _defined_by(module) -> set[str]:
    """The subcommands a module of study.cli adds."""
    import argparse

    sub = argparse.ArgumentParser().add_subparsers()
    for add in module.PARSERS:
        add(sub)
    return set(sub.choices)


def test_every_command_a_rule_runs_is_defined_and_each_rule_file_has_its_module(repo_root):
    """`study COMMAND` in a rule file's shell commands (and each figure's command in FIGURES) is a
    subcommand; a rule file that runs `study` has a module of study.cli by its name that defines
    one of the commands it runs (the command line mirrors the workflow: docs/architecture.md)."""
    import importlib
    import re

    import study.cli
    from study.figures.catalog import FIGURE_KINDS

    by_module = {m.__name__.rsplit(".", 1)[-1]: _defined_by(m) for m in study.cli.MODULES}
    defined = set().union(*by_module.values())
    assert sum(map(len, by_module.values())) == len(defined), "a subcommand is defined by two modules"
    parser = study.cli.build_parser()
    assert set(next(a for a in parser._actions if a.dest == "command").choices) == defined

    runs_study = {}
    for path in sorted((repo_root / "workflow/rules").glob("*.smk")):
        commands = set(re.findall(r"""["']study ([a-z][a-z-]*)""", path.read_text()))
        assert commands <= defined, f"{path.name} runs study {commands - defined}, which study.cli does not define"
        if commands:
            runs_study[path.stem] = commands
    assert {"data", "train", "evaluate", "robustness", "features", "figures", "zoo", "bench"} <= set(runs_study)
    for stem, commands in runs_study.items():
        module = importlib.import_module(f"study.cli.{stem}")
        assert commands & _defined_by(module), f"study/cli/{stem}.py defines none of {sorted(commands)}"

    from study.figures.catalog import FIGURES

    assert FIGURES
    for figure in FIGURES.values():
        assert figure.command.split()[0] in defined, figure.command
        assert figure.kind is None or figure.kind in FIGURE_KINDS, figure.kind
