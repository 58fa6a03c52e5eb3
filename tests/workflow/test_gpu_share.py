"""K model jobs sharing one GPU (workflow/profiles/local gpu_slots: K): each job's threads are
the cores per slot, its GPU memory 1/K, its compile workers its threads (docs/performance.md)."""

import re
import sys

import pytest
import torch
from helpers.workflow import copy_project, project_dry_run

from study import device
from study.provenance import provenance
from study.resources import CLUSTER_MODEL_THREADS, slot_threads

# the `study` commands of the model rules (train, evaluate, check, corruptions, construct)
MODEL_COMMANDS = {"train", "evaluate", "check", "corruptions", "construct"}


def test_threads_are_the_cores_per_gpu_slot():
    assert slot_threads(16, 4) == 4 and slot_threads(16, 1) == 16 and slot_threads(16, None) == 16
    assert slot_threads(2, 4) == 1  # never 0
    assert slot_threads(None, 4) == CLUSTER_MODEL_THREADS  # a cluster executor: no --cores


@pytest.fixture(scope="module")
def project(tmp_path_factory):
    return copy_project(tmp_path_factory.mktemp("gpu_share"))


def _threads(project, *options) -> dict[str, set[int]]:
    """{study command: the --threads its jobs get} of the ci DAG's dry run."""
    dag = project_dry_run([*options, "--config", "preset=ci", "--", "all"], project)
    found: dict[str, set[int]] = {}
    for job in dag.jobs:
        if m := re.match(r"study ([\w-]+) .*?--threads (\d+)", job.shell):
            found.setdefault(m.group(1), set()).add(int(m.group(2)))
    assert MODEL_COMMANDS <= set(found), found
    return found


def test_gpu_slots_k_gives_every_model_job_cores_over_k_threads(project):
    local = ("--profile", "workflow/profiles/local")
    assert set().union(*_threads(project, *local, "--cores", "8").values()) == {2}  # gpu_slots: 4
    # the cpu profile (max-threads: 1): one thread per job, whatever the cores
    assert set().union(*_threads(project, "--profile", "workflow/profiles/cpu", "--cores", "8").values()) == {1}


def test_memory_fraction_is_one_over_the_jobs_sharing_the_gpu():
    assert device.gpu_memory_fraction({"STUDY_GPU_SLOTS": "4"})[0] == 0.25
    assert device.gpu_memory_fraction({"STUDY_GPU_SLOTS": "1"})[0] is None
    assert device.gpu_memory_fraction({})[0] is None
    explicit = {"STUDY_GPU_SLOTS": "4", "STUDY_GPU_MEMORY_FRACTION": "0.4"}
    assert device.gpu_memory_fraction(explicit) == (0.4, "STUDY_GPU_MEMORY_FRACTION")
    with pytest.raises(ValueError, match="STUDY_GPU_MEMORY_FRACTION"):
        device.gpu_memory_fraction({"STUDY_GPU_MEMORY_FRACTION": "1.5"})


def test_a_job_of_k_on_a_gpu_bounds_its_memory_and_records_it(monkeypatch):
    calls = []
    monkeypatch.setattr(torch.cuda, "set_per_process_memory_fraction", lambda f, d=None: calls.append((f, d)))
    monkeypatch.setattr(device, "process_gpu_share", {})  # this process's own share comes back afterwards
    monkeypatch.setenv("STUDY_GPU_SLOTS", "4")
    monkeypatch.delenv("STUDY_GPU_MEMORY_FRACTION", raising=False)
    share = device.share_gpu(torch.device("cuda"))  # no GPU needed: the call is what is checked
    assert calls == [(0.25, torch.device("cuda"))] and share["applied"] and share["slots"] == 4
    assert provenance(torch.device("cpu"))["gpu_share"]["memory_fraction"] == 0.25  # meta.json's provenance
    assert not device.share_gpu(torch.device("cpu"))["applied"] and len(calls) == 1  # nothing on a CPU


def test_compile_workers_follow_the_jobs_threads(monkeypatch):
    monkeypatch.setenv("TORCHINDUCTOR_COMPILE_THREADS", "99")  # restored afterwards
    monkeypatch.delenv("TORCHINDUCTOR_COMPILE_THREADS")
    monkeypatch.setattr(device, "USER_COMPILE_THREADS", None)
    inductor = sys.modules.get("torch._inductor.config")  # set too where already imported
    if inductor is not None:
        monkeypatch.setattr(inductor, "compile_threads", inductor.compile_threads)
    threads = torch.get_num_threads()
    try:
        device.set_threads(3)
    finally:
        torch.set_num_threads(threads)
    assert device.os.environ["TORCHINDUCTOR_COMPILE_THREADS"] == "3"
    assert inductor is None or inductor.compile_threads == 3
    monkeypatch.setattr(device, "USER_COMPILE_THREADS", "5")  # the user's own setting is kept
    monkeypatch.setenv("TORCHINDUCTOR_COMPILE_THREADS", "5")
    try:
        device.set_threads(2)
    finally:
        torch.set_num_threads(threads)
    assert device.os.environ["TORCHINDUCTOR_COMPILE_THREADS"] == "5"
