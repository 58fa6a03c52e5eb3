"""The SLURM profile and the files the rules pass between jobs, without a cluster (a few seconds).

`make test-slurm` (tools/slurm/check.py) runs the profile on a real one-node Slurm
cluster; these check, on the ci preset's planned DAG, what it showed: the training job declares
every file of a run that later jobs read (model_best.pt and config.json too, so a cluster's
latency wait and a rerun see them), a packed evaluate group asks for one GPU, and cheap jobs
go to the CPU partition."""

from __future__ import annotations

import re
import shlex
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
import yaml
from helpers.dag import dry_run

from study.checkpoints import CHECKPOINT_FILES

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
PROFILE = ROOT / "workflow/profiles/slurm"
TRAINING_RULES = {"train", "zoo_run"}


def _jobs(*options: str) -> list[dict]:
    """Each job of the ci DAG's dry run with `options`, as Snakemake describes it (helpers.dag):
    rule, input and output files, shell command, resources, group (its group job, else None)."""
    dag = dry_run([*options, "--config", "preset=ci", "--", "all"], ROOT, timeout=120,
                  env={"PATH": f"{BIN}:/usr/bin:/bin", "HOME": str(Path.home())})
    jobs = [{"rule": j.rule, "input": list(j.input), "output": list(j.output), "shell": j.shell, "group": j.group,
             "resources": j.resources} for j in dag.jobs]
    assert jobs and len(jobs) == dag.counts["total"]
    return jobs


@pytest.fixture(scope="module")
def ci_jobs():
    return _jobs("--cores", "2")


@pytest.fixture(scope="module")
def slurm_jobs():
    return _jobs("--profile", "workflow/profiles/slurm")


def _option_values(shell: str, option: str) -> list[str]:
    """The values of `--option v1 v2 ...` in a shell command (until the next option)."""
    words, values = shlex.split(shell.split(" 2>")[0]), []
    for i, word in enumerate(words):
        if word == option:
            values += [w for w in _until_option(words[i + 1:])]
    return values


def _until_option(words):
    for w in words:
        if w.startswith("--"):
            return
        yield w


def test_training_declares_every_run_file_that_other_jobs_read(ci_jobs):
    produced = {f: job["rule"] for job in ci_jobs for f in job["output"]}
    reads = []  # (job, file it reads from a run directory, whether it must be an input of the job)
    for job in ci_jobs:
        shell = job["shell"]
        for run in _option_values(shell, "--run-dir") + _option_values(shell, "--source-run"):
            if job["rule"] not in TRAINING_RULES:
                reads.append((job, f"{run}/config.json", False))  # study.run_directory: the run's config
                named = re.search(r"--checkpoint[ =](\w+)", shell)
                reads.append((job, f"{run}/{CHECKPOINT_FILES[named[1] if named else 'last']}", True))
        reads += [(job, path, True) for path in _option_values(shell, "--init-from")]
        reads += [(job, str(Path(path).parent / "config.json"), False) for path in _option_values(shell, "--epochs")]
    missing = [f"{j['rule']} reads {f}, no rule's output" for j, f, _ in reads if f not in produced]
    assert not missing, "\n".join(missing[:10])
    wrong = [f"{j['rule']} reads {f}, written by {produced[f]}" for j, f, _ in reads
             if produced[f] not in TRAINING_RULES]
    assert not wrong, "\n".join(wrong[:10])
    undeclared = [f"{j['rule']} reads {f} without declaring it an input" for j, f, as_input in reads
                  if as_input and f not in j["input"]]
    assert not undeclared, "\n".join(undeclared[:10])
    # the ci DAG has them: @best evaluations, and a fine-tuning run (FRL) from its parent's best checkpoint
    best_readers = {j["rule"] for j, f, _ in reads if f.endswith("/model_best.pt")}
    assert any(r.startswith("evaluate_") for r in best_readers), best_readers  # the @best evaluations
    assert any(f.endswith("/model_best.pt") for j in ci_jobs if j["rule"] == "train" for f in j["input"])
    # and @published evaluations, of model_published.pt
    published_readers = {j["rule"] for j, f, _ in reads if f.endswith("/model_published.pt")}
    assert any(r.startswith("evaluate_") and r.endswith("_at_published") for r in published_readers), published_readers
    # one training rule declares every run's every checkpoint file (a stand-in where the run keeps none)
    for job in ci_jobs:
        if job["rule"] in TRAINING_RULES - {"zoo_run"}:
            assert job["rule"] == "train"
            assert {f.rsplit("/", 1)[1] for f in job["output"]} >= {*CHECKPOINT_FILES.values(), "config.json"}


def _profile() -> dict:
    return yaml.safe_load((PROFILE / "config.yaml").read_text())


def test_slurm_profile_gives_a_packed_evaluate_group_one_gpu(slurm_jobs):
    """Snakemake's own group arithmetic (GroupResources.basic_layered, as at submission) on four
    evaluate jobs of the ci DAG, with the profile's limits and scopes."""
    from snakemake.resources import GroupResources, Resources, ResourceScopes

    profile = _profile()
    size = profile["group-components"]["gpu_eval"]
    assert size > 1
    grouped = [job for job in slurm_jobs if job["group"] == "gpu_eval"]
    assert len(grouped) >= size and {job["rule"] for job in grouped} >= {"evaluate_shard"}

    def fake(job):
        res = {k: v for k, v in job["resources"].items()
               if isinstance(v, int) and not k.startswith(("disk", "mem_mib"))}
        return SimpleNamespace(resources={**res, "_cores": 8}, pipe_group=None)
    members = [fake(job) for job in grouped[:size]]
    assert all(m.resources["gpu"] == 1 for m in members)

    def group_request(limits: dict) -> dict:
        constraints = Resources.from_mapping({**limits, "_cores": None, "_nodes": None})
        return GroupResources.basic_layered([members], constraints, run_local=False,
                                            additive_resources=["runtime"], sortby=["runtime"])
    # each submitted group gets its own GPU limit (local scope); the workflow's GPU jobs are not capped
    scopes = ResourceScopes(profile.get("set-resource-scopes", {}))
    assert scopes.is_local("gpu"), "gpu must be scoped local: a global limit of 1 would run one GPU job at a time"
    request = group_request(profile.get("resources", {}))
    assert request["gpu"] == 1, request
    assert request["mem_mb"] == max(m.resources["mem_mb"] for m in members)
    assert request["runtime"] == sum(m.resources["runtime"] for m in members)
    assert group_request({})["gpu"] == size  # what the profile's limit prevents


def test_slurm_partitions_cpu_jobs_to_the_cpu_partition(slurm_jobs):
    # (pyproject's workflow extra installs the plugin; imported here, not at collection, so that a
    # GPU machine's bundle without Snakemake still collects tests/hardware)
    import snakemake_executor_plugin_slurm.partitions as plugin

    profile = _profile()
    assert "slurm_partition" not in profile.get("default-resources", {}), "it would override the partition choice"
    assert not any("slurm_partition" in r for r in profile.get("set-resources", {}).values())
    partitions = plugin.read_partition_file(PROFILE / profile["slurm-partition-config"])
    gpu_parts = {p.name for p in partitions if p.limits.max_gpu > 0}
    assert gpu_parts and {p.name for p in partitions} - gpu_parts
    logger = SimpleNamespace(info=lambda *a: None, debug=lambda *a: None, warning=lambda *a: None)
    defaults = profile["default-resources"]
    for job in slurm_jobs:
        if job["rule"] == "all":
            continue
        gpu = int(job["resources"].get("gpu", defaults["gpu"]))
        fake = SimpleNamespace(name=job["rule"], threads=1,
                               resources={"gpu": gpu, "mem_mb": int(job["resources"].get("mem_mb", 1000)),
                                          "runtime": int(job["resources"].get("runtime", 60))})
        chosen = plugin.get_best_partition(partitions, fake, logger)
        assert (chosen in gpu_parts) == (gpu > 0), (job["rule"], gpu, chosen)
