"""The same run id, the same model: the ci preset's tables from real Snakemake runs at
`--cores 1` and at `--cores 2` (no profile, so a job's `--threads` follows `--cores`, as the
headline command's do) are byte-identical (issue 40: a job's thread count followed --cores, and
a CPU's conv and batch-norm gradients are sums split over the threads). The run's
`train.threads` fixes the count (study.device.set_numerics_threads). The whole ci preset up to
its tables: every run, method and evaluation kind, the checks and the corruptions."""

from __future__ import annotations

import json
import time

from helpers.workflow import BIN, copy_project, run_command


def _tables(project) -> dict[str, bytes]:
    """Every table of the preset's results (the zoo's apart: the ci preset has no zoo run)."""
    return {p.relative_to(project).as_posix(): p.read_bytes()
            for p in sorted(project.glob("results/**/tables/*.csv")) if "zoo" not in p.parts}


def test_tables_do_not_depend_on_the_cores(tmp_path):
    tables, seconds = {}, {}
    for cores in (1, 2):
        (tmp_path / f"cores{cores}").mkdir()
        project = copy_project(tmp_path / f"cores{cores}")
        t0 = time.perf_counter()
        run_command([BIN / "snakemake", "--cores", str(cores), "--config", "preset=ci", "--",
                     "evaluate_all", "robustness_all"], project, timeout=1800)
        seconds[cores] = time.perf_counter() - t0
        tables[cores] = _tables(project)
        threads = {p.parent.name: json.loads(p.read_text())["threads"]
                   for p in (project / "results/runs").glob("*/meta.json")}
        assert threads and set(threads.values()) == {1}, threads  # the run's count, not the job's
    print(f"ci preset up to its tables: --cores 1 {seconds[1]:.0f} s, --cores 2 {seconds[2]:.0f} s")
    assert len(tables[1]) >= 10 and tables[1].keys() == tables[2].keys(), (tables[1].keys(), tables[2].keys())
    differ = [name for name in tables[1] if tables[1][name] != tables[2][name]]
    assert not differ, f"tables that differ between --cores 1 and --cores 2: {differ}"
