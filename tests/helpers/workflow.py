"""What the workflow tests share: a copy of the project to run Snakemake and DVC in, the
commands run there, and the expected job counts derived from a preset's plan (study.config)
and params, so the tests stay right when the study grows. `project` is a fixture (registered by
tests/conftest.py): a module's copy of the project."""

import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from helpers.dag import Dag, dry_run
from study.record_names import record_name
from study.run_directory import setting_tuple

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
# environment.yml: every rule names it (`conda:`), and Snakemake reads it for each job's metadata
WORKFLOW_FILES = ["Snakefile", "params.yaml", "dvc.yaml", "workflow", ".gitignore", ".dvcignore", "environment.yml"]
# Rules the ci DAG has no job of: targets that only gather other rules' outputs, the bench
# (it measures the machine; test_bench_target_... checks its DAG) and the zoo's ImageNet data
# (it needs the hand-placed ImageNet; tests/pipeline/test_zoo_jobs.py checks the paper DAG's zoo jobs).
NOT_IN_CI_DAG = {"all", "data_all", "train_all", "evaluate_all", "robustness_all", "bench_all", "report_inputs",
                 "bench", "prepare_imagenet"}
# The RobustBench zoo's rules and figures: in the ci DAG only once its weights are placed
# (tests/pipeline/test_zoo_jobs.py places them and runs them).
ZOO_FIGURES = {"fig15_zoo_classwise": "zoo_classwise", "fig16_zoo_ranks": "zoo_ranks", "fig17_zoo_gap": "zoo_gap"}
NOT_IN_CI_DAG |= {"zoo_run", "zoo_tables", "zoo_robustness_tables", "zoo_all", *ZOO_FIGURES}
DISCREPANCY_FIGURES = ("fig04_discrepancy_datasets", "fig05_discrepancy_models", "fig06_discrepancy_optimization")


def command_env():
    env = dict(os.environ)
    env["PATH"] = f"{BIN}{os.pathsep}{env.get('PATH', '')}"
    env.pop("STUDY_DATA_MIRROR", None)
    return env


def copy_project(dest: Path) -> Path:
    for name in WORKFLOW_FILES:
        src = ROOT / name
        if src.is_dir():
            shutil.copytree(src, dest / name)
        else:
            shutil.copy2(src, dest / name)
    return dest


def run_command(args, cwd, timeout=900):
    t0 = time.perf_counter()
    proc = subprocess.run(args, cwd=cwd, env=command_env(), capture_output=True, text=True, timeout=timeout)
    # where a slow test spends its time (shown by pytest -s, or beside a failure)
    print(f"[{time.perf_counter() - t0:6.1f} s] {' '.join(str(a) for a in args[:6])}", file=sys.stderr)
    assert proc.returncode == 0, f"{' '.join(map(str, args))} failed:\n{proc.stdout[-4000:]}\n{proc.stderr[-4000:]}"
    return proc.stdout + proc.stderr


def project_dry_run(args: list, cwd: Path, env: dict | None = None) -> Dag:
    """`snakemake -n ARGS` in the project copy `cwd`, read as Snakemake describes its DAG."""
    return dry_run(args, cwd, env=command_env() if env is None else {**command_env(), **env})


def dag_outputs(dag: Dag) -> set[str]:
    """Every file a job of the DAG writes."""
    return {f for job in dag.jobs for f in job.output}


def job_counts(output: str) -> dict[str, int]:
    table = output[output.index("Job stats:"):]
    counts = {}
    for line in table.splitlines()[3:]:
        parts = line.split()
        if len(parts) != 2 or not parts[1].isdigit():
            break
        counts[parts[0]] = int(parts[1])
    return counts


def rule_names(project) -> set[str]:
    out = run_command([BIN / "snakemake", "--list-rules", "--config", "preset=ci"], project)
    return {line.strip() for line in out.splitlines() if re.fullmatch(r"\w+", line.strip())}



@pytest.fixture(scope="module")
def project(tmp_path_factory):
    return copy_project(tmp_path_factory.mktemp("project"))


def plan_preset(project, preset):
    from study.config import constructions, load_params, plan_runs

    params = load_params(project / "params.yaml", {"preset": preset}, presets_dir=project / "workflow/presets",
                         schema_path=project / "workflow/schemas/params.schema.yaml")
    runs = plan_runs(params)
    return params, runs, (constructions(params, runs) if params.features is not None else [])


def is_mitigation(run) -> bool:
    return any(g.startswith("mitigation") for g in run.groups)


def plain_runs(runs):
    """The runs of the class-wise figures: on the original data, outside the mitigation groups."""
    return [r for r in runs if not r.config.get("constructed") and not is_mitigation(r)]


def _of_groups(runs, groups, datasets=None):
    return [r for r in runs if set(r.groups) & set(groups) and not r.config.get("constructed")
            and (datasets is None or r.dataset in datasets)]


def robustness_runs(params, runs):
    """(runs of the robustness groups: figures 3 and 11; runs checked, at each of their
    checkpoints: those and the mitigation runs; runs of the corruption groups on its datasets)."""
    rob = params.robustness
    cc = rob.corruptions
    tabled = _of_groups(runs, rob.groups)
    if rob.checks.groups is not None:
        checked = _of_groups(runs, rob.checks.groups)
    else:
        checked = tabled + [r for r in runs if is_mitigation(r) and r not in tabled]
    return tabled, checked, _of_groups(runs, (cc.groups if cc else None) or rob.groups, cc.datasets if cc else [])


def evaluation_shards(params) -> dict[str, int]:
    return {name: ev.shards for name, ev in params.evaluations.items()}


def _whole(run, checkpoint: str, shards: dict[str, int]) -> list[str]:
    """The evaluations of a run that its one evaluate job of `checkpoint` writes: all of them but
    the sharded ones of the last checkpoint (a job per shard and a merge each)."""
    return sorted(e for e in run.evaluations if checkpoint != "last" or shards.get(e, 1) == 1)


def evaluate_jobs(params, runs) -> tuple[int, int]:
    """(evaluate, merge_shards) jobs of a plan: one per (run, checkpoint) for all its evaluations
    but a sharded one of the last checkpoint, which has one per shard and a merge."""
    shards = evaluation_shards(params)
    whole = sum(bool(_whole(r, c, shards)) for r in runs for c in r.checkpoints)
    last = [e for r in runs if "last" in r.checkpoints for e in r.evaluations if shards.get(e, 1) > 1]
    return whole + sum(shards[e] for e in last), len(last)


def evaluate_count(counts: dict[str, int]) -> int:
    """Jobs of the evaluate rules (one rule per set of evaluations, evaluate_shard) in job stats."""
    return sum(n for rule, n in counts.items()
               if rule.startswith("evaluate_") and rule != "evaluate_all")


#: the training rule: one for every run, which writes every checkpoint file (workflow/rules/train.smk)
TRAIN_RULES = ("train",)


def train_count(counts: dict[str, int]) -> int:
    """Training jobs in job stats (TRAIN_RULES)."""
    return sum(counts.get(rule, 0) for rule in TRAIN_RULES)


def zoo_plan(params):
    from study.config.zoo import plan_zoo, zoo_checked, zoo_corrupted

    zoo = plan_zoo(params)
    return zoo, zoo_checked(params, zoo), zoo_corrupted(params, zoo)


def _zoo_panels(params) -> int:
    """Zoo figures: one panel per (dataset, threat model) with its robust evaluation."""
    robust = params.zoo.figure_evaluations.model_dump() if params.zoo is not None else {}
    return len({(r.dataset, r.config["zoo"]["threat_model"]) for r in zoo_plan(params)[0]
                if robust.get(r.config["zoo"]["threat_model"]) in r.evaluations})


def figure_jobs(params, runs) -> dict[str, int]:
    """Jobs per figure rule: one per panel (what the figure draws, from docs/study.md#figures)."""
    plain = plain_runs(runs)
    tabled, _, corrupted = robustness_runs(params, runs)
    configs: dict[str, set] = {}
    for r in plain:
        configs.setdefault(r.dataset, set()).add((r.config["model"], r.config["method"], setting_tuple(r.run)))

    def panels(rs, method=None):
        return len({(r.dataset, r.config["model"], method or r.config["method"]) for r in rs})

    jobs = {
        "fig01_classwise_standard": panels([r for r in plain if r.config["method"] == "standard"]),
        "fig02_classwise_adversarial": panels([r for r in plain if r.config["method"] == "pgd_at"]),
        "fig03_frl_errors": panels(tabled, "all"),
        **{fig: 1 for fig in DISCREPANCY_FIGURES},  # one experiment group each
        "fig07_epochs": panels(plain),
        "fig08_rank_agreement": sum(len(c) > 1 for c in configs.values()),  # datasets with configurations to compare
        # the records of the last checkpoint, which a run keeping only its paper's choice has not
        "fig09_confusion": panels([r for r in plain if "last" in r.checkpoints]),
        "fig10_logit_similarity": panels([r for r in plain if "last" in r.checkpoints]),
        "fig11_cfp": panels([r for r in tabled if r.config["method"] == "pgd_at"]),
        "fig12_features": 1 if params.features is not None else 0,
        "fig13_mitigation": panels([r for r in runs if is_mitigation(r)], "all"),
        "fig13_policy_epochs": panels([r for r in runs if is_mitigation(r)], "all"),
        "fig14_corruptions": panels(corrupted),
        **{fig: _zoo_panels(params) for fig in ZOO_FIGURES},
    }
    return {fig: n for fig, n in jobs.items() if fig in params.figures and n}


def expected_logs(params, runs) -> set[str]:
    """The logs that training and evaluation must leave: one per run, one per (run, checkpoint)
    evaluate job (its evaluations joined by +), a sharded one's per shard and its merge's."""
    logs = {f"results/logs/train/{r.run_id}.log" for r in runs}
    shards = evaluation_shards(params)
    for r in runs:
        where = f"results/logs/evaluate/{r.run_id}"
        for c in r.checkpoints:
            if whole := _whole(r, c, shards):
                logs.add(f"{where}/{record_name('+'.join(whole), c)}.log")
        for e in (e for e in r.evaluations if "last" in r.checkpoints and shards.get(e, 1) > 1):
            logs |= {f"{where}/shards/{e}/{i}-of-{shards[e]}.log" for i in range(shards[e])}
            logs.add(f"{where}/{e}-merge.log")
    return logs


def job_stats(output: str) -> dict[str, int]:
    """Jobs per rule over every Snakemake invocation in `output` (DVC runs one per stage)."""
    counts: dict[str, int] = {}
    for start in (m.start() for m in re.finditer("Job stats:", output)):
        for rule, n in job_counts(output[start:]).items():
            counts[rule] = counts.get(rule, 0) + n
    return counts
