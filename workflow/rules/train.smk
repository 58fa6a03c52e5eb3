# Phase 2: training. One job per run; each resumes from its checkpoint.pt when rerun
# (a preempted or retried cluster job continues where it stopped).


rule train:
    input:
        data=run_data,
        parent=run_parent_model,
    output:
        model=f"{RESULTS}/runs/{{run_id}}/model.pt",
        epochs=f"{RESULTS}/runs/{{run_id}}/epochs.csv",
    log:
        f"{RESULTS}/logs/train/{{run_id}}.log",
    params:
        config=run_config_arg,
        run_dir=lambda w: run_dir(w.run_id),
        init_from=init_from_arg,
    threads: 8
    resources:
        gpu=1,
        mem_mb=train_mem_mb,
        runtime=train_runtime,
    shell:
        "study train --data {input.data} --run-dir {params.run_dir} --run-config {params.config}"
        " {params.init_from} --threads {threads} --no-progress 2> {log}"


rule train_all:
    input:
        all_models(),
