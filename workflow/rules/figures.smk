# Phase 4: figures, one job per (figure, dataset, model, method), and the manifest
# results/figures/all that stands for the whole set.


rule figure_classwise:
    input:
        table=TABLES["classwise"],
    output:
        png=report(
            f"{RESULTS}/figures/{{fig}}/{{dataset}}__{{model}}__{{method}}.png",
            caption="../report/classwise.rst",
            category="Class-wise accuracy and robustness",
            subcategory="{dataset}",
            labels={"figure": "{fig}", "model": "{model}", "method": "{method}"},
        ),
        pdf=f"{RESULTS}/figures/{{fig}}/{{dataset}}__{{model}}__{{method}}.pdf",
    wildcard_constraints:
        fig="fig01_classwise_standard|fig02_classwise_adversarial",
    log:
        f"{RESULTS}/logs/figures/{{fig}}/{{dataset}}__{{model}}__{{method}}.log",
    params:
        evaluations=figure_evaluations,
        runs=panel_runs_arg,
        stem=lambda w, output: output.png[: -len(".png")],
    shell:
        "study figure classwise --table {input.table} --dataset {wildcards.dataset}"
        " --model {wildcards.model} --method {wildcards.method} --evaluations {params.evaluations}"
        " --runs {params.runs} --out-stem {params.stem} 2> {log}"


rule figure_epochs:
    input:
        table=TABLES["epochs"],
    output:
        png=report(
            f"{RESULTS}/figures/fig07_epochs/{{dataset}}__{{model}}__{{method}}.png",
            caption="../report/epochs.rst",
            category="Class-wise records over training",
            subcategory="{dataset}",
            labels={"figure": "fig07_epochs", "model": "{model}", "method": "{method}"},
        ),
        pdf=f"{RESULTS}/figures/fig07_epochs/{{dataset}}__{{model}}__{{method}}.pdf",
    log:
        f"{RESULTS}/logs/figures/fig07_epochs/{{dataset}}__{{model}}__{{method}}.log",
    params:
        runs=panel_runs_arg,
        stem=lambda w, output: output.png[: -len(".png")],
    shell:
        "study figure epochs --table {input.table} --dataset {wildcards.dataset}"
        " --model {wildcards.model} --method {wildcards.method} --runs {params.runs}"
        " --out-stem {params.stem} 2> {log}"


rule figures_all:
    input:
        all_figures(),
    output:
        manifest=f"{RESULTS}/figures/all",
    log:
        f"{RESULTS}/logs/figures/manifest.log",
    shell:
        "study manifest --out {output.manifest} {input} 2> {log}"
