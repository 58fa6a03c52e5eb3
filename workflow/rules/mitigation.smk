# Mitigation (STUDY.md question 3): best-checkpoint evaluations and figure 13.
# Runs with a validation split keep model_best.pt (best validation robust accuracy) beside
# model.pt (last); both are evaluated, the best as results/evaluations/<run>/<ev>@best.parquet.


rule evaluate_best:
    input:
        model=f"{RESULTS}/runs/{{run_id}}/model.pt",
        data=run_data,
    output:
        records=f"{RESULTS}/evaluations/{{run_id}}/{{evaluation}}@best.parquet",
    log:
        f"{RESULTS}/logs/evaluate/{{run_id}}/{{evaluation}}@best.log",
    params:
        evaluation=evaluation_arg,
        run_dir=lambda w: run_dir(w.run_id),
    threads: 8
    resources:
        gpu=1,
        mem_mb=evaluate_mem_mb,
        runtime=evaluate_runtime,
    shell:
        "study evaluate --data {input.data} --run-dir {params.run_dir} --evaluation {params.evaluation}"
        " --checkpoint best --out {output.records} --threads {threads} --no-progress 2> {log}"


rule figure_mitigation:
    input:
        table=TABLES["classwise"],
    output:
        png=report(
            f"{RESULTS}/figures/fig13_mitigation/{{dataset}}__{{model}}__all.png",
            caption="../report/mitigation.rst",
            category="Mitigation",
            subcategory="{dataset}",
            labels={"figure": "fig13_mitigation", "model": "{model}"},
        ),
        pdf=f"{RESULTS}/figures/fig13_mitigation/{{dataset}}__{{model}}__all.pdf",
        table=f"{RESULTS}/figures/fig13_mitigation/{{dataset}}__{{model}}__all.csv",
    log:
        f"{RESULTS}/logs/figures/fig13_mitigation/{{dataset}}__{{model}}.log",
    params:
        methods=mitigation_methods,
        stem=lambda w, output: output.png[: -len(".png")],
    shell:
        "study figure mitigation --table {input.table} --dataset {wildcards.dataset}"
        " --model {wildcards.model} --method all --methods {params.methods} --out-stem {params.stem} 2> {log}"


rule figure_policy_epochs:
    input:
        table=TABLES["epochs"],
    output:
        png=report(
            f"{RESULTS}/figures/fig13_policy_epochs/{{dataset}}__{{model}}__all.png",
            caption="../report/policy_epochs.rst",
            category="Mitigation",
            subcategory="{dataset}",
            labels={"figure": "fig13_policy_epochs", "model": "{model}"},
        ),
        pdf=f"{RESULTS}/figures/fig13_policy_epochs/{{dataset}}__{{model}}__all.pdf",
    log:
        f"{RESULTS}/logs/figures/fig13_policy_epochs/{{dataset}}__{{model}}.log",
    params:
        methods=mitigation_methods,
        stem=lambda w, output: output.png[: -len(".png")],
    shell:
        "study figure policy_epochs --table {input.table} --dataset {wildcards.dataset}"
        " --model {wildcards.model} --method all --methods {params.methods} --out-stem {params.stem} 2> {log}"
