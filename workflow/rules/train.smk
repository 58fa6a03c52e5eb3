# Phase 2: training. One job per run; each resumes from its checkpoint.pt when rerun
# (a preempted or retried cluster job continues where it stopped).


rule train:
    input:
        data=run_data,
        parent=run_parent_model,
    output:
        model=f"{RESULTS}/runs/{{run_id}}/model.pt",
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
        compile=config.get("speed", {}).get("compile", "auto"),
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


# A run with a validation split also writes its best checkpoint on validation, model_best.pt,
# which its @best evaluations and checks and a fine-tuning run that starts from it read; a run
# with train.published_selection writes model_published.pt, the published protocol's (its
# @published evaluations): the same job, under a rule that declares those files as well (a
# rule's outputs are those of every run it trains, so each combination the plan has gets its
# own rule, and no rule is left without a run).
_TRAINED = f"{RESULTS}/runs/{{run_id}}"

if KEPT_CHECKPOINTS.get((True, False)):

    use rule train as train_validated with:
        output:
            model=f"{_TRAINED}/model.pt",
            epochs=f"{_TRAINED}/epochs.csv",
            config=f"{_TRAINED}/config.json",
            best=f"{_TRAINED}/model_best.pt",
        wildcard_constraints:
            run_id=one_of(KEPT_CHECKPOINTS[(True, False)]),

    ruleorder: train_validated > train


if KEPT_CHECKPOINTS.get((False, True)):

    use rule train as train_published with:
        output:
            model=f"{_TRAINED}/model.pt",
            epochs=f"{_TRAINED}/epochs.csv",
            config=f"{_TRAINED}/config.json",
            published=f"{_TRAINED}/model_published.pt",
        wildcard_constraints:
            run_id=one_of(KEPT_CHECKPOINTS[(False, True)]),

    ruleorder: train_published > train


if KEPT_CHECKPOINTS.get((True, True)):

    use rule train as train_validated_published with:
        output:
            model=f"{_TRAINED}/model.pt",
            epochs=f"{_TRAINED}/epochs.csv",
            config=f"{_TRAINED}/config.json",
            best=f"{_TRAINED}/model_best.pt",
            published=f"{_TRAINED}/model_published.pt",
        wildcard_constraints:
            run_id=one_of(KEPT_CHECKPOINTS[(True, True)]),

    ruleorder: train_validated_published > train


rule train_all:
    input:
        [f"{run_dir(r.run_id)}/model.pt" for r in PLAN],
