# Phase 3: evaluation. Per-sample records of every (run, evaluation, checkpoint): one job per
# record, or per shard of a sharded evaluation (AutoAttack, Square) and one that merges them;
# then the tables that every figure and metric is drawn from.


rule evaluate:
    input:
        model=f"{RESULTS}/runs/{{run_id}}/model.pt",
        data=run_data,
    output:
        records=f"{RESULTS}/evaluations/{{run_id}}/{{records}}.parquet",
    wildcard_constraints:
        records=EVALUATE_RECORDS,
    log:
        f"{RESULTS}/logs/evaluate/{{run_id}}/{{records}}.log",
    params:
        evaluation=lambda w: quoted_json(resolved_evaluation(w)),
        part=lambda w: evaluate_job(w)[1],
        run_dir=lambda w: run_dir(w.run_id),
    threads: 8
    resources:
        gpu=1,
        gpu_slots=1,
        mem_mb=run_resource(resources_estimate.mem_mb, floor=6000),
        runtime=evaluate_runtime,
    shell:
        "study evaluate --data {input.data} --run-dir {params.run_dir} --evaluation {params.evaluation}"
        " {params.part} --out {output.records} --threads {threads} --no-progress 2> {log}"


rule merge_shards:
    input:
        shard_files,
    output:
        records=f"{RESULTS}/evaluations/{{run_id}}/{{evaluation}}.parquet",
    wildcard_constraints:
        evaluation=one_of(SHARDED),
    log:
        f"{RESULTS}/logs/evaluate/{{run_id}}/{{evaluation}}-merge.log",
    shell:
        # `study merge-shards` prints nothing when it succeeds; the log says what it joined.
        "study merge-shards --out {output.records} {input} 2> {log} && echo 'merged {input}' >> {log}"


rule tables:
    input:
        records=[eval_file(r.run_id, ev, cp) for cp in ("last", "best") for r in PLAN if cp in r.checkpoints
                 for ev in r.evaluations],
        epochs=[f"{run_dir(r.run_id)}/epochs.csv" for r in PLAN],
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


rule reproduction:
    input:
        classwise=TABLES["classwise"],
    output:
        report(f"{RESULTS}/reproduction.md", caption="../report/reproduction.rst", category="Reproduction"),
    log:
        f"{RESULTS}/logs/reproduction.log",
    params:
        tables_dir=f"{RESULTS}/tables",
        preset=config["preset"],
    shell:
        "study reproduction --preset {params.preset} --tables-dir {params.tables_dir} --out {output} 2> {log}"


rule evaluate_all:
    input:
        **TABLES,
        reproduction=f"{RESULTS}/reproduction.md",
