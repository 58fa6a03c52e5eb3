# Phase 3: evaluation. Per-sample records of every (run, evaluation, checkpoint): one job per
# run and checkpoint for all its evaluations (a rule per set of evaluations, EVALUATION_SETS
# in common.smk), a job per shard of a sharded evaluation (AutoAttack, Square) and one that
# merges them; then the tables that every figure and metric is drawn from. `root` is the folder
# of a run's evaluations and logs: results, or results/zoo for a zoo model (common.smk, run_root).

for (_evs, _cp), _ids in EVALUATION_SETS.items():

    rule:
        name:
            f"evaluate_{'_'.join(_evs)}{'' if _cp == 'last' else f'_at_{_cp}'}"
        input:
            model=run_model(CHECKPOINT_FILES[_cp]),  # the one read
            data=run_data,
        output:
            **{e: eval_file("{run_id}", e, _cp, root="{root}") for e in _evs},
        wildcard_constraints:
            run_id=one_of(_ids),
        log:
            f"{{root}}/logs/evaluate/{{run_id}}/{record_name('+'.join(_evs), _cp)}.log",
        benchmark:
            f"{{root}}/benchmarks/evaluate/{{run_id}}/{record_name('+'.join(_evs), _cp)}.tsv",
        params:
            evaluations=evaluation_args(_evs),
            checkpoint=f"--checkpoint {_cp}",
            run_dir=lambda w: run_dir(w.run_id),
        group:
            "gpu_eval"  # packed several to a GPU on a cluster (profiles/slurm); ignored locally
        threads: MODEL_THREADS
        resources:
            **gpu_resources(mem_mb=run_resource(resources_estimate.mem_mb, floor=6000),
                            runtime=evaluate_runtime(_evs)),
        conda:
            "../../environment.yml"
        shell:
            "study evaluate --data {input.data:q} --run-dir {params.run_dir:q} {params.evaluations}"
            " {params.checkpoint} --threads {threads} --no-progress 2> {log:q}"


rule evaluate_shard:
    input:
        model=run_model("model.pt"),
        data=run_data,
    output:
        records=f"{{root}}/evaluations/{{run_id}}/shards/{{evaluation}}/{{shard}}-of-{{shards}}.parquet",
    wildcard_constraints:
        evaluation=one_of(SHARDED),
        shard=r"\d+",
        shards=r"\d+",
    log:
        f"{{root}}/logs/evaluate/{{run_id}}/shards/{{evaluation}}/{{shard}}-of-{{shards}}.log",
    benchmark:
        f"{{root}}/benchmarks/evaluate/{{run_id}}/shards/{{evaluation}}/{{shard}}-of-{{shards}}.tsv",
    params:
        evaluation=lambda w: quoted_json(resolved_evaluation(w)),
        run_dir=lambda w: run_dir(w.run_id),
    group:
        "gpu_eval"
    threads: MODEL_THREADS
    resources:
        **gpu_resources(mem_mb=run_resource(resources_estimate.mem_mb, floor=6000),
                        runtime=lambda w: evaluate_runtime([w.evaluation], int(w.shards))(w)),
    conda:
        "../../environment.yml"
    shell:
        "study evaluate --data {input.data:q} --run-dir {params.run_dir:q} --evaluation {params.evaluation}"
        " --shard {wildcards.shard}/{wildcards.shards} --out {output.records:q} --threads {threads} --no-progress"
        " 2> {log:q}"


rule merge_shards:
    input:
        shard_files,
    output:
        records=f"{{root}}/evaluations/{{run_id}}/{{evaluation}}.parquet",
    wildcard_constraints:
        evaluation=one_of(SHARDED),
    log:
        f"{{root}}/logs/evaluate/{{run_id}}/{{evaluation}}-merge.log",
    benchmark:
        f"{{root}}/benchmarks/evaluate/{{run_id}}/{{evaluation}}-merge.tsv",
    conda:
        "../../environment.yml"
    shell:
        # `study merge-shards` prints nothing when it succeeds; the log says what it joined.
        "study merge-shards --out {output.records:q} {input:q} 2> {log:q} && echo merged {input:q} >> {log:q}"


_TABLES_INPUT = {
    "records": [eval_file(r.run_id, ev, cp) for cp in CHECKPOINTS for r in PLAN if cp in r.checkpoints
                for ev in r.evaluations],
    "epochs": [f"{run_dir(r.run_id)}/epochs.csv" for r in PLAN],
    "checks": CHECK_FILES,
}


rule tables:
    input:
        **_TABLES_INPUT,
        stamp=gathered("tables", _TABLES_INPUT, [TABLES, METRICS_FILES]),  # a killed update (common.smk)
    output:
        **TABLES,
        # one JSON file per model, so that `dvc metrics show` prints a row per model (dvc.yaml);
        # named, not a directory(): Snakemake's timestamp file in it would be a row of its own
        metrics=METRICS_FILES,
    log:
        f"{PRESET_RESULTS}/logs/tables.log",
    benchmark:
        f"{PRESET_RESULTS}/benchmarks/tables.tsv",
    params:
        out_dir=folder_of("classwise"),  # results/<preset>/tables
        # results/<preset>/metrics, read off its files (a study without models has none to write)
        metrics_dir=lambda wildcards, output: cli_options({"metrics_dir": os.path.dirname(output.metrics[0])
                                                           if output.metrics else None}),
    conda:
        "../../environment.yml"
    shell:
        "study tables --records {input.records:q} --epochs {input.epochs:q} --checks {input.checks:q}"
        " --out-dir {params.out_dir:q} {params.metrics_dir} 2> {log:q}"


rule reproduction:
    input:
        classwise=TABLES["classwise"],
        # the configuration the report reads: declared, so that no job reads params.yaml unseen
        params="params.yaml",
        preset=f"workflow/presets/{PARAMS.preset}.yaml",
        schema="workflow/schemas/params.schema.yaml",
    output:
        md=f"{REPRODUCTION}.md",
        # the same report as a page: Snakemake's report shows an HTML result in the browser (a .md it
        # only offers as a download)
        html=report(f"{REPRODUCTION}.html", caption="../report/reproduction.rst",
                    category=report_category("Reproduction")),
    log:
        f"{PRESET_RESULTS}/logs/reproduction.log",
    benchmark:
        f"{PRESET_RESULTS}/benchmarks/reproduction.tsv",
    params:
        tables_dir=folder_of("classwise", "input"),
        presets_dir=lambda wildcards, input: os.path.dirname(input.preset),
        preset=PARAMS.preset,
        # the --config values too: the report matches the table's evaluations by their settings
        overrides=config_overrides_arg(),
    conda:
        "../../environment.yml"
    shell:
        "study reproduction --params {input.params:q} --presets-dir {params.presets_dir:q} --schema {input.schema:q}"
        " --preset {params.preset:q} {params.overrides} --tables-dir {params.tables_dir:q}"
        " --out {output.md:q} --html {output.html:q} 2> {log:q}"


rule front_page:
    input:
        classwise=TABLES["classwise"],
        reproduction=f"{REPRODUCTION}.md",
        page=f"{REPRODUCTION}.html",  # the page its link opens
    output:
        FRONT_PAGE,
    log:
        f"{PRESET_RESULTS}/logs/front_page.log",
    benchmark:
        f"{PRESET_RESULTS}/benchmarks/front_page.tsv",
    params:
        preset=PARAMS.preset,
        # the PGD-AT panel of figure 2 is the headline figure; the report's categories, in order
        figures=[f for f in figure_files("fig02_classwise_adversarial") if f.endswith(".png")]
        if "fig02_classwise_adversarial" in PARAMS.figures else [],
        categories=present_categories(),
    conda:
        "../../environment.yml"
    shell:
        "study front-page --classwise {input.classwise:q} --reproduction {input.reproduction:q}"
        " --reproduction-page {input.page:q} --preset {params.preset:q}"
        " --figures {params.figures:q} --categories {params.categories:q} --out {output:q} 2> {log:q}"


rule evaluate_all:
    input:
        **TABLES,
        metrics=METRICS_FILES,  # the evaluate stage's metrics (dvc.yaml)
        reproduction=f"{REPRODUCTION}.md",
