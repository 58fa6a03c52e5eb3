# Robust / non-robust feature datasets (Ilyas et al. 2019): construction from the source
# runs (resumable, chunk by chunk), then standard training on each through rule `train`.


rule construct:
    input:
        data=lambda w: prepared_file(construction_of(w).source_run.dataset, construction_of(w).source_run.variant),
        model=lambda w: f"{run_dir(construction_of(w).source_run.run_id)}/model.pt",
    output:
        constructed=f"{DATA}/constructed/{{construction}}.pt",
    wildcard_constraints:
        construction=r"d_[a-z]+-[0-9a-f]{8}",
    log:
        f"{RESULTS}/logs/construct/{{construction}}.log",
    benchmark:
        f"{RESULTS}/benchmarks/construct/{{construction}}.tsv",
    params:
        kind=lambda w: construction_of(w).kind,
        key=lambda w: construction_of(w).key,
        source=lambda w: run_dir(construction_of(w).source_run.run_id),
        settings=lambda w: quoted_json(construction_of(w).settings),
        work_dir=f"{DATA}/constructed/{{construction}}.chunks",
    threads: MODEL_THREADS
    resources:
        **gpu_resources(mem_mb=16000,
                        runtime=lambda w: max(30, int(construction_of(w).settings["representation"]["steps"] / 4))),
    conda:
        "../../environment.yml"
    shell:
        "study construct --kind {params.kind:q} --key {params.key:q} --data {input.data:q} --source-run {params.source:q}"
        " --settings {params.settings} --work-dir {params.work_dir:q} --out {output.constructed:q}"
        " --threads {threads} --no-progress 2> {log:q}"
