# Robustness suite: checks against false robustness per run, CIFAR-10-C (regenerated offline)
# per class, and the robustness tables that figures 3, 11 and 14 draw. The sharded
# evaluations (AutoAttack, Square) are evaluate jobs (evaluate.smk).


rule check:
    input:
        model=lambda w: f"{run_dir(w.run_id)}/{CHECKPOINT_FILES[checked_checkpoint(w)]}",  # the one checked
        data=run_data,
        records=lambda w: [eval_file(w.run_id, ev, checked_checkpoint(w)) for ev in run_of(w).evaluations],
    output:
        checks=f"{{root}}/evaluations/{{run_id}}/checks{{at}}.json",  # root: results, or the zoo's
        table=f"{{root}}/evaluations/{{run_id}}/checks{{at}}.csv",
    wildcard_constraints:
        at="|@best|@published",
    log:
        f"{{root}}/logs/check/{{run_id}}{{at}}.log",
    benchmark:
        f"{{root}}/benchmarks/check/{{run_id}}{{at}}.tsv",
    params:
        run_dir=lambda w: run_dir(w.run_id),
        pgd=lambda w: quoted_json(resolve_evaluation(PARAMS, ROBUSTNESS.checks.reference, dataset=run_of(w).dataset)),
        per_class=ROBUSTNESS.checks.per_class,
        eps_factors=[f"{f:g}" for f in ROBUSTNESS.checks.eps_factors],  # as written: 2, not 2.0
        checkpoint=checked_checkpoint,
        strict="--strict" if ROBUSTNESS.checks.strict else "",
        # in the names' order, not the preset file's: two presets that set the same values share the check jobs
        strong=cli_options(wp.check_strong_options(ROBUSTNESS.checks)),
    threads: MODEL_THREADS
    resources:
        **gpu_resources(mem_mb=run_resource(resources_estimate.mem_mb, floor=6000), runtime=60),
    conda:
        "../../environment.yml"
    shell:
        "study check --data {input.data:q} --run-dir {params.run_dir:q} --records {input.records:q}"
        " --pgd {params.pgd} --per-class {params.per_class:q} --eps-factors {params.eps_factors:q}"
        " --checkpoint {params.checkpoint:q} --out {output.checks:q} --table {output.table:q} {params.strict} {params.strong}"
        " --threads {threads} 2> {log:q}"


rule corruptions:
    input:
        model=run_model("model.pt"),
        data=run_data,
    output:
        records=f"{{root}}/evaluations/{{run_id}}/corruptions.parquet",
    log:
        f"{{root}}/logs/corruptions/{{run_id}}.log",
    benchmark:
        f"{{root}}/benchmarks/corruptions/{{run_id}}.tsv",
    params:
        run_dir=lambda w: run_dir(w.run_id),
        args=corruption_args,
    threads: MODEL_THREADS
    resources:
        **gpu_resources(mem_mb=16000, runtime=240),
    conda:
        "../../environment.yml"
    shell:
        "study corruptions --data {input.data:q} --run-dir {params.run_dir:q} {params.args}"
        " --out {output.records:q} --threads {threads} --no-progress 2> {log:q}"


_ROBUSTNESS_INPUT = {
    "records": [eval_file(r.run_id, ev, c) for r in CHECKED_RUNS for c in r.checkpoints for ev in r.evaluations],
    "checks": CHECK_FILES,
    "corruptions": [f"{evaluations_dir(r.run_id)}/corruptions.parquet" for r in CORRUPTION_RUNS],
}


rule robustness_tables:
    input:
        **_ROBUSTNESS_INPUT,
        stamp=gathered("robustness_tables", _ROBUSTNESS_INPUT, ROBUSTNESS_TABLES),  # a killed update (common.smk)
    output:
        **ROBUSTNESS_TABLES,
    log:
        f"{PRESET_RESULTS}/logs/robustness_tables.log",
    benchmark:
        f"{PRESET_RESULTS}/benchmarks/robustness_tables.tsv",
    params:
        out_dir=folder_of("frl"),  # results/<preset>/tables
        corruptions=lambda w, input: shlex.join(input.corruptions),
    conda:
        "../../environment.yml"
    shell:
        "study robustness-tables --records {input.records:q} --checks {input.checks:q}"
        " --corruptions {params.corruptions} --out-dir {params.out_dir:q} 2> {log:q}"


rule robustness_all:
    input:
        **ROBUSTNESS_TABLES,
