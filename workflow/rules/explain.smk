# Phase 4b: explanation figures (STUDY.md figures 4, 5, 6, 8, 9, 10). Discrepancy per
# experiment group, rank agreement per dataset, confusion and logit similarity per
# (dataset, model, method) from the per-sample records.


rule figure_discrepancy:
    input:
        table=TABLES["classwise"],
    output:
        png=report(
            f"{RESULTS}/figures/{{fig}}/{{group}}.png",
            caption="../report/discrepancy.rst",
            category="Class-wise discrepancy",
            labels={"figure": "{fig}", "group": "{group}"},
        ),
        pdf=f"{RESULTS}/figures/{{fig}}/{{group}}.pdf",
    wildcard_constraints:
        fig="fig04_discrepancy_datasets|fig05_discrepancy_models|fig06_discrepancy_optimization",
        group=r"[A-Za-z0-9_]+",
    log:
        f"{RESULTS}/logs/figures/{{fig}}/{{group}}.log",
    params:
        runs=group_runs_arg,
        by=lambda w: DISCREPANCY_BY[w.fig],
        evaluations=lambda w: evaluation_names_arg(GROUP_RUNS[w.group]),
        stem=lambda w, output: output.png[: -len(".png")],
    shell:
        "study figure discrepancy --table {input.table} --by {params.by} --runs {params.runs}"
        " --evaluations {params.evaluations} --out-stem {params.stem} 2> {log}"


rule figure_rank_agreement:
    input:
        table=TABLES["classwise"],
    output:
        png=report(
            f"{RESULTS}/figures/fig08_rank_agreement/{{dataset}}.png",
            caption="../report/rank_agreement.rst",
            category="Rank agreement of class accuracies",
            labels={"figure": "fig08_rank_agreement", "dataset": "{dataset}"},
        ),
        pdf=f"{RESULTS}/figures/fig08_rank_agreement/{{dataset}}.pdf",
    log:
        f"{RESULTS}/logs/figures/fig08_rank_agreement/{{dataset}}.log",
    params:
        runs=dataset_runs_arg,
        evaluations=lambda w: evaluation_names_arg(DATASET_RUNS[w.dataset]),
        stem=lambda w, output: output.png[: -len(".png")],
    shell:
        "study figure rank_agreement --table {input.table} --dataset {wildcards.dataset} --runs {params.runs}"
        " --evaluations {params.evaluations} --out-stem {params.stem} 2> {log}"


rule figure_class_matrix:
    input:
        records=panel_records,
    output:
        png=report(
            f"{RESULTS}/figures/{{fig}}/{{dataset}}__{{model}}__{{method}}.png",
            caption="../report/class_matrix.rst",
            category="Confusion and class similarity",
            subcategory="{dataset}",
            labels={"figure": "{fig}", "model": "{model}", "method": "{method}"},
        ),
        pdf=f"{RESULTS}/figures/{{fig}}/{{dataset}}__{{model}}__{{method}}.pdf",
    wildcard_constraints:
        fig="fig09_confusion|fig10_logit_similarity",
    log:
        f"{RESULTS}/logs/figures/{{fig}}/{{dataset}}__{{model}}__{{method}}.log",
    params:
        kind=lambda w: FIGURES[w.fig][0],
        stem=lambda w, output: output.png[: -len(".png")],
    shell:
        "study figure {params.kind} --records {input.records} --out-stem {params.stem} 2> {log}"
