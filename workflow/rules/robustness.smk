# Robustness suite (issue 4): sharded evaluations, checks against false robustness per run,
# CIFAR-10-C (regenerated offline) per class, robustness tables and figures 3, 11 and 14.


# ------------------------------------------------------------ shards of one evaluation
rule evaluate_shard:
    input:
        model=f"{RESULTS}/runs/{{run_id}}/model.pt",
        data=run_data,
    output:
        records=f"{RESULTS}/evaluations/{{run_id}}/shards/{{evaluation}}/{{shard}}-of-{{shards}}.parquet",
    wildcard_constraints:
        shard=r"\d+",
        shards=r"\d+",
    log:
        f"{RESULTS}/logs/evaluate/{{run_id}}/{{evaluation}}-{{shard}}-of-{{shards}}.log",
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
        " --shard {wildcards.shard}/{wildcards.shards} --out {output.records} --threads {threads}"
        " --no-progress 2> {log}"


rule merge_shards:
    input:
        shard_files,
    output:
        records=f"{RESULTS}/evaluations/{{run_id}}/{{evaluation}}.parquet",
    wildcard_constraints:
        evaluation=SHARDED_EVALUATIONS,
    log:
        f"{RESULTS}/logs/evaluate/{{run_id}}/{{evaluation}}-merge.log",
    shell:
        "study merge-shards --out {output.records} {input} 2> {log}"


ruleorder: merge_shards > evaluate
ruleorder: corruptions > evaluate


# ------------------------------------------------------------ checks and corruptions
rule check:
    input:
        model=f"{RESULTS}/runs/{{run_id}}/model.pt",
        data=run_data,
        records=lambda w: [eval_file(w.run_id, ev) for ev in RUNS[w.run_id].evaluations],
    output:
        checks=f"{RESULTS}/evaluations/{{run_id}}/checks.json",
        table=f"{RESULTS}/evaluations/{{run_id}}/checks.csv",
    log:
        f"{RESULTS}/logs/check/{{run_id}}.log",
    params:
        run_dir=lambda w: run_dir(w.run_id),
        pgd=check_pgd_arg,
        per_class=ROBUSTNESS["checks"]["per_class"],
        eps_factors=" ".join(str(f) for f in ROBUSTNESS["checks"]["eps_factors"]),
        strict="--strict" if ROBUSTNESS["checks"].get("strict", True) else "",
    threads: 8
    resources:
        gpu=1,
        mem_mb=evaluate_mem_mb,
        runtime=60,
    shell:
        "study check --data {input.data} --run-dir {params.run_dir} --records {input.records}"
        " --pgd {params.pgd} --per-class {params.per_class} --eps-factors {params.eps_factors}"
        " --out {output.checks} --table {output.table} {params.strict} --threads {threads} 2> {log}"


rule corruptions:
    input:
        model=f"{RESULTS}/runs/{{run_id}}/model.pt",
        data=run_data,
    output:
        records=f"{RESULTS}/evaluations/{{run_id}}/corruptions.parquet",
    log:
        f"{RESULTS}/logs/corruptions/{{run_id}}.log",
    params:
        run_dir=lambda w: run_dir(w.run_id),
        args=corruption_args,
    threads: 8
    resources:
        gpu=1,
        mem_mb=16000,
        runtime=240,
    shell:
        "study corruptions --data {input.data} --run-dir {params.run_dir} {params.args}"
        " --out {output.records} --threads {threads} --no-progress 2> {log}"


rule robustness_tables:
    input:
        records=robustness_records(),
        checks=[f"{RESULTS}/evaluations/{rid}/checks.json" for rid in ROBUSTNESS_RUNS],
        corruptions=all_corruption_records(),
    output:
        **ROBUSTNESS_TABLES,
    log:
        f"{RESULTS}/logs/robustness_tables.log",
    params:
        out_dir=f"{RESULTS}/tables",
        corruptions=lambda w, input: " ".join(input.corruptions),
    shell:
        "study robustness-tables --records {input.records} --checks {input.checks}"
        " --corruptions {params.corruptions} --out-dir {params.out_dir} 2> {log}"


# ------------------------------------------------------------ figures 3, 11, 14
rule figure_robustness:
    input:
        table=robustness_figure_table,
    output:
        png=report(
            f"{RESULTS}/figures/{{fig}}/{{dataset}}__{{model}}__{{method}}.png",
            caption="../report/robustness.rst",
            category="Robustness per class",
            subcategory="{dataset}",
            labels={"figure": "{fig}", "model": "{model}", "method": "{method}"},
        ),
        pdf=f"{RESULTS}/figures/{{fig}}/{{dataset}}__{{model}}__{{method}}.pdf",
    wildcard_constraints:
        fig="fig03_frl_errors|fig11_cfp|fig14_corruptions",
    log:
        f"{RESULTS}/logs/figures/{{fig}}/{{dataset}}__{{model}}__{{method}}.log",
    params:
        kind=lambda w: ROBUSTNESS_FIGURE_KINDS[w.fig],
        stem=lambda w, output: output.png[: -len(".png")],
        runs=robustness_panel_runs_arg,
    shell:
        "study figure {params.kind} --table {input.table} --dataset {wildcards.dataset}"
        " --model {wildcards.model} --method {wildcards.method} --runs {params.runs}"
        " --out-stem {params.stem} 2> {log}"


rule robustness_all:
    input:
        **ROBUSTNESS_TABLES,
