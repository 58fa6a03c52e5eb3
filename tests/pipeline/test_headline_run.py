"""The headline command for real: a failed weights download stops only the zoo, and the same
command completes once the file is served."""

from __future__ import annotations

from pathlib import Path

from helpers.headline import FAILING, FIGURES, SERVED, on_synthetic, run_snakemake, write_headline_preset
from helpers.workflow import job_counts
from helpers.zoo import place_random_weights

from study.models.weights import WEIGHTS_URL_BASE_ENV

PRESET = "headline"


ZOO_FIGURES = FIGURES[2:]


def _figures_made(project: Path, figures: list[str]) -> dict[str, int]:
    return {fig: len(list((project / "results" / PRESET / "figures" / fig).glob("*.png"))) for fig in figures}


def test_headline_run_a_failed_download_stops_only_the_zoo_then_completes(headline_project, weights_server):
    project = headline_project
    served, url, requests = weights_server
    write_headline_preset(project, PRESET, [on_synthetic(SERVED), on_synthetic(FAILING)])
    env = {WEIGHTS_URL_BASE_ENV: url}
    # the headline command as it is (the default profile: keep-going), the preset sized for tests
    args = ["--cores", "2", "--config", f"preset={PRESET}", "--", "results/figures/all"]
    proc = run_snakemake(project, *args, env=env)
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0 and "workflow specific profile profiles/default" in out
    # the preflight screen comes before the first job
    assert out.index(f"Preflight of preset {PRESET}") < out.index("rule prepare:")
    assert "zoo weights, 2 models: into data/zoo_weights" in out
    # the served model was fetched into the project's own folder; Ding2020MMA got a 404
    fetched = project / "data/zoo_weights" / SERVED.relative_file
    assert fetched.read_bytes() == (served / SERVED.relative_file).read_bytes()
    assert f"/{FAILING.relative_file}" in requests
    made = _figures_made(project, FIGURES)
    assert all(made[fig] == 1 for fig in FIGURES if fig not in ZOO_FIGURES), made  # independent work went on
    assert (project / f"results/zoo/evaluations/zoo-cifar10-Linf-{SERVED.name}-on-synthetic/zoo_pgd.parquet").is_file()
    assert not any(made[fig] for fig in ZOO_FIGURES)
    summary = (project / f"results/{PRESET}/run_summary.md").read_text()
    failed = [line for line in summary.splitlines() if line.startswith("- zoo_run")]
    assert len(failed) == 1 and f"zoo-cifar10-Linf-{FAILING.name}-on-synthetic" in failed[0]
    assert "HTTP 404" in failed[0] and f"{url}/{FAILING.relative_file}" in failed[0]
    assert "- not made: fig15_zoo_classwise" in summary and "fig01_classwise_standard" not in summary
    assert summary in out.replace("\r", "")  # printed at the end, too
    # the file appears on the server: the same command makes only what is missing, and finishes
    place_random_weights(served, FAILING)
    proc = run_snakemake(project, *args, env=env)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-4000:]
    counts = job_counts(out)
    assert counts["zoo_run"] == 1 and "train" not in counts
    assert _figures_made(project, FIGURES) == {fig: 1 for fig in FIGURES}
    summary = (project / f"results/{PRESET}/run_summary.md").read_text()
    assert "Failed jobs: none." in summary and "Left out of the plan: nothing." in summary
    assert f"Made: {len(FIGURES)} of {len(FIGURES)} figures complete" in summary
