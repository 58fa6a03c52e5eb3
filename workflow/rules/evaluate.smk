# Phase 3: evaluation. Per-sample records for every (run, evaluation), then the tables
# that every figure and metric is drawn from.


rule evaluate:
    input:
        model=f"{RESULTS}/runs/{{run_id}}/model.pt",
        data=run_data,
    output:
        records=f"{RESULTS}/evaluations/{{run_id}}/{{evaluation}}.parquet",
    log:
        f"{RESULTS}/logs/evaluate/{{run_id}}/{{evaluation}}.log",
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
        " --out {output.records} --threads {threads} --no-progress 2> {log}"


rule tables:
    input:
        records=all_evaluations(),
        epochs=[f"{run_dir(rid)}/epochs.csv" for rid in RUNS],
    output:
        **TABLES,
        metrics=f"{RESULTS}/metrics.json",
    log:
        f"{RESULTS}/logs/tables.log",
    params:
        out_dir=f"{RESULTS}/tables",
    shell:
        "study tables --records {input.records} --epochs {input.epochs}"
        " --out-dir {params.out_dir} --metrics {output.metrics} 2> {log}"


rule evaluate_all:
    input:
        **TABLES,
