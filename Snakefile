# Class-wise robustness study: table of contents of the workflow.
#   snakemake --cores 8 results/figures/all                            (paper preset, the default)
#   snakemake --cores 2 --config preset=demo -- results/figures/all    (CPU demo; `--` ends --config)
# Each preset's results are its own, under results/<preset>/ (common.smk, PRESET_RESULTS);
# results/figures/all and results/reproduction.md are those of the preset selected.
from snakemake.utils import min_version

min_version("9.0")


configfile: "params.yaml"


include: "workflow/rules/common.smk"
include: "workflow/rules/data.smk"
include: "workflow/rules/train.smk"
include: "workflow/rules/features.smk"
include: "workflow/rules/evaluate.smk"
include: "workflow/rules/robustness.smk"
include: "workflow/rules/figures.smk"
include: "workflow/rules/zoo.smk"
include: "workflow/rules/bench.smk"
include: "workflow/rules/preflight.smk"


# The report opens on the finding, with its numbers read from the results (the front_page rule;
# `make report PRESET=...` writes results/<preset>/report.html), once they exist; before, on the study's description.
report: FRONT_PAGE if Path(FRONT_PAGE).exists() else "workflow/report/workflow.rst"


rule all:
    input:
        SELECTED_FIGURES,
        SELECTED_REPRODUCTION,
        FRONT_PAGE,
        ZOO_TARGETS,


# What the report of a preset shows (`make report PRESET=...`: these built, then `--report` on them):
# every figure, the reproduction page and the landing text.
rule report_inputs:
    input:
        rules.figures_all.output.manifest,
        rules.reproduction.output.html,
        FRONT_PAGE,
    localrule: True
