"""Values as users write them (docs/reliability.md, "Configuration values and the shell"):
`speed.compile: off` as workflow/published-settings.yaml's comment spells it, through Snakemake's `--config` and
DVC's `-S` alike (YAML 1.1 reads an unquoted `off` as false); and a dataset, group or
evaluation named anywhere in the configuration is one the study knows, or one line says so."""

from __future__ import annotations

import re
import sys

import pytest
import yaml
from helpers.dvc import git_project, run_process
from helpers.workflow import ROOT, copy_project, project_dry_run

from study.config import ConfigError, load_params
from study.config.overrides import config_arguments, run_overrides


def _compile_words(dag) -> set[str]:
    """The --compile value of every training job of a dry run."""
    words = {m.group(1) for job in dag.of("train")
             if (m := re.search(r" --compile (\S+) ", job.shell))}
    assert words, "the dry run has training jobs"
    return words


def test_compile_off_from_snakemake_config_arrives_as_off(tmp_path):
    project = copy_project(tmp_path)
    assert _compile_words(project_dry_run(["--cores", "1", "--config", "preset=ci", "speed={compile: off}", "--",
                                           "train_all"], project)) == {"off"}


def test_compile_off_from_dvc_set_arrives_as_off(tmp_path):
    """`dvc exp run -S speed.compile=off` writes params.yaml with DVC's own writer (dvc.utils.hydra,
    which -S calls), then runs the stage, whose Snakemake command is read and dry-run here."""
    from dvc.utils.hydra import apply_overrides

    project = git_project(tmp_path, with_study=False)
    apply_overrides(project / "params.yaml", ["preset=ci", "speed.compile=off"])
    assert re.search(r"^\s*compile: off\b", (project / "params.yaml").read_text(), flags=re.M)
    proc = run_process([sys.executable, "-m", "study.stage", "--params", project / "params.yaml",
                        "--profile", "workflow/profiles/cpu", "--dry-run", "train_all"], ROOT)
    line, _ = proc.stdout.splitlines()
    assert "speed.compile=false" in line, line  # as read from params.yaml; typed as off below
    # the stage's own words for Snakemake's --config (study.stage.StageRun.argv)
    config = config_arguments(run_overrides(project / "params.yaml"))
    assert _compile_words(project_dry_run(["--cores", "1", "--config", *config, "--", "train_all"], project)) == {"off"}


def _load(**overrides):
    return load_params(ROOT / "params.yaml", {"preset": "ci", **overrides}, presets_dir=ROOT / "workflow/presets",
                       schema_path=ROOT / "workflow/schemas/params.schema.yaml")


def test_compile_off_in_params_yaml_is_off_and_on_is_refused():
    assert _load(speed="{compile: off}").speed.compile == "off"
    with pytest.raises(ConfigError, match=r"speed.compile: True is not valid; expected one of off, default, auto$"):
        _load(speed="{compile: on}")


DATASETS = "cifar10, cifar100, imagenet, mnist, svhn, synthetic, tinyimagenet"
ZOO_ENTRY = "{dataset: cifar10, threat_model: Linf, name: Wong2020Fast, data: %s}"


@pytest.mark.parametrize("override, message", [
    ({"robustness.corruptions.datasets": "[cifar-10]"},
     f"robustness.corruptions.datasets: unknown dataset 'cifar-10'; valid: {DATASETS}"),
    ({"zoo.models": f"[{ZOO_ENTRY % 'synth'}]"}, f"zoo.models[0].data: unknown dataset 'synth'; valid: {DATASETS}"),
    ({"zoo.models": "[{dataset: cifar10, threat_model: Linf, name: Wong2020Fast, data: synthetic, variant: huge}]"},
     "zoo.models[0].variant: unknown variant 'huge' of dataset 'synthetic'; valid variants: default"),
    ({"data.variants": "{cifar10: huge}"},
     "data.variants.cifar10: unknown variant 'huge' of dataset 'cifar10'; valid variants: official, jpeg"),
    ({"data.variants": "{cifar-10: official}"}, f"data.variants: unknown dataset 'cifar-10'; valid: {DATASETS}"),
    ({"per_dataset": "{cifar-10: {}}"}, f"per_dataset: unknown dataset 'cifar-10'; valid: {DATASETS}"),
    ({"experiments": "[{group: g, dataset: cifar-10, models: [small_cnn], methods: [standard], seeds: [0]}]",
      "features": "null", "robustness.groups": "[g]", "robustness.checks.groups": "[g]",
      "robustness.corruptions.groups": "[g]"},
     f"experiment group 'g': unknown dataset 'cifar-10'; valid: {DATASETS}"),
    ({"robustness.groups": "[baselin]"}, "robustness.groups: unknown experiment group 'baselin'; valid: baseline,"),
    ({"robustness.corruptions.groups": "[baselin]"}, "robustness.corruptions.groups: unknown experiment group"),
    ({"robustness.checks.reference": "pgd33"}, "robustness.checks.reference: unknown evaluation 'pgd33'; valid:"),
    ({"zoo.figure_evaluations": "{Linf: zoo_pgd2}"}, "zoo.figure_evaluations.Linf: unknown evaluation 'zoo_pgd2'"),
])
def test_an_unknown_name_is_refused_in_one_line(override, message):
    with pytest.raises(ConfigError) as err:
        _load(**override)
    text = str(err.value)
    assert "\n" not in text and message in text, text


def test_figure_14_keeps_its_panels_with_the_known_dataset(tmp_path):
    """The corrected value plans figure 14 again (the refused one would have dropped it silently)."""
    project = copy_project(tmp_path)
    preset = yaml.safe_load((project / "workflow/presets/ci.yaml").read_text())
    assert preset["robustness"]["corruptions"]["datasets"] == ["synthetic"]
    dag = project_dry_run(["--cores", "1", "--config", "preset=ci", "--", "results/ci/tables/corruptions.csv"], project)
    assert dag.of("corruptions"), "the ci preset's corruption runs are planned"
