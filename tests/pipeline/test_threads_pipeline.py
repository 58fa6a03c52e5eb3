"""The same run id, the same model: the ci preset's tables from real Snakemake runs at
`--cores 1` and at `--cores 2` are byte-identical (issue 40: a job's thread count followed
--cores, and a CPU's conv and batch-norm gradients are sums split over the threads). The run's
`train.threads` fixes the count (study.device.set_numerics_threads). The preset is the ci's
baseline group alone (two runs, clean and PGD records, their checks), so the two runs of the
workflow take a minute or two."""

from __future__ import annotations

import time

import yaml
from helpers.workflow import BIN, ROOT, _copy_project, _run


def _reduced_ci(project) -> None:
    ci = yaml.safe_load((ROOT / "workflow/presets/ci.yaml").read_text())
    baseline = next(e for e in ci["experiments"] if e["group"] == "baseline")
    ci.update(experiments=[{**baseline, "evaluations": ["clean", "pgd3"]}], features=None, zoo=None,
              figures=["fig01_classwise_standard"])
    (project / "workflow/presets/ci_baseline.yaml").write_text(yaml.safe_dump(ci))


def test_tables_do_not_depend_on_the_cores(tmp_path):
    tables, seconds = {}, {}
    for cores in (1, 2):
        (tmp_path / f"cores{cores}").mkdir()
        project = _copy_project(tmp_path / f"cores{cores}")
        _reduced_ci(project)
        t0 = time.perf_counter()
        _run([BIN / "snakemake", "--cores", str(cores), "--config", "preset=ci_baseline", "--",
              "results/ci_baseline/tables/classwise.csv"], project)
        seconds[cores] = time.perf_counter() - t0
        tables[cores] = {p.name: p.read_bytes() for p in sorted((project / "results/ci_baseline/tables").glob("*.csv"))}
        threads = {p.parent.name: yaml.safe_load(p.read_text())["threads"]
                   for p in (project / "results/runs").glob("*/meta.json")}
        assert set(threads.values()) == {1}, threads  # the run's count, not the job's
    print(f"reduced ci preset: --cores 1 {seconds[1]:.0f} s, --cores 2 {seconds[2]:.0f} s")
    assert len(tables[1]) >= 4 and tables[1].keys() == tables[2].keys()
    differ = [name for name in tables[1] if tables[1][name] != tables[2][name]]
    assert not differ, f"tables that differ between --cores 1 and --cores 2: {differ}"
