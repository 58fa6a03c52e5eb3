# Phase 2: training. One job per run; each resumes from its checkpoint.pt when rerun
# (a preempted or retried cluster job continues where it stopped). Every run writes the file of
# every checkpoint of the table (study.checkpoints: model.pt, model_best.pt, model_published.pt),
# one output each, named by the checkpoint; one it keeps none of (no validation split: no best; no
# published protocol: no published) is a stand-in for model.pt that no job loads as a model
# (study.run_directory.STANDS_IN_FOR): the evaluations read only the checkpoints a run lists.


rule train:
    input:
        data=run_data,
        parent=run_parent_model,
    output:
        **{name: f"{RESULTS}/runs/{{run_id}}/{file}" for name, file in CHECKPOINT_FILES.items()},
        epochs=f"{RESULTS}/runs/{{run_id}}/epochs.csv",
        config=f"{RESULTS}/runs/{{run_id}}/config.json",  # evaluate, check, tables, construct read it
    wildcard_constraints:
        run_id=r"(?!zoo-)[A-Za-z0-9_.\-]+",  # zoo runs (zoo.smk) are never trained
    log:
        f"{RESULTS}/logs/train/{{run_id}}.log",
    benchmark:
        f"{RESULTS}/benchmarks/train/{{run_id}}.tsv",
    params:
        config=lambda w: quoted_json(run_of(w).config),
        run_dir=lambda w: run_dir(w.run_id),
        init_from=init_from_arg,
        compile=PARAMS.speed.compile,
    threads: MODEL_THREADS
    priority: train_priority
    resources:
        **gpu_resources(mem_mb=run_resource(resources_estimate.mem_mb, floor=8000),
                        runtime=run_resource(resources_estimate.train_minutes)),
    conda:
        "../../environment.yml"
    shell:
        "study train --data {input.data:q} --run-dir {params.run_dir:q} --run-config {params.config}"
        " {params.init_from} --compile {params.compile:q} --threads {threads} --no-progress 2> {log:q}"


rule train_all:
    input:
        [f"{run_dir(r.run_id)}/model.pt" for r in PLAN],
