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
    params:
        kind=lambda w: construction_of(w).kind,
        key=lambda w: construction_of(w).key,
        source=lambda w: run_dir(construction_of(w).source_run.run_id),
        settings=lambda w: shlex.quote(json.dumps(construction_of(w).settings, sort_keys=True)),
        work_dir=f"{DATA}/constructed/{{construction}}.chunks",
    threads: 8
    resources:
        gpu=1,
        mem_mb=16000,
        runtime=lambda w: max(30, int(construction_of(w).settings["representation"]["steps"] / 4)),
    shell:
        "study construct --kind {params.kind} --key {params.key} --data {input.data} --source-run {params.source}"
        " --settings {params.settings} --work-dir {params.work_dir} --out {output.constructed}"
        " --threads {threads} --no-progress 2> {log}"


rule figure_features:
    input:
        table=TABLES["classwise"],
        constructed=lambda w: [constructed_file(name) for name in CONSTRUCTIONS],
        data=lambda w: prepared_file(*next((c.source_run.dataset, c.source_run.variant) for c in CONSTRUCTIONS.values())),
    output:
        bars=report(
            f"{RESULTS}/figures/fig12_features/{{dataset}}__{{model}}.png",
            caption="../report/features.rst",
            category="Robust and non-robust features",
            labels={"figure": "fig12_features", "dataset": "{dataset}", "model": "{model}"},
        ),
        bars_pdf=f"{RESULTS}/figures/fig12_features/{{dataset}}__{{model}}.pdf",
        examples=report(
            f"{RESULTS}/figures/fig12_features/{{dataset}}__{{model}}__examples.png",
            caption="../report/features_examples.rst",
            category="Robust and non-robust features",
            labels={"figure": "fig12_features (examples)", "dataset": "{dataset}", "model": "{model}"},
        ),
        examples_pdf=f"{RESULTS}/figures/fig12_features/{{dataset}}__{{model}}__examples.pdf",
    wildcard_constraints:
        model=r"[a-z0-9]+(_[a-z0-9]+)*",  # no "__": keeps "<model>__examples" from matching a model
    log:
        f"{RESULTS}/logs/figures/fig12_features/{{dataset}}__{{model}}.log",
    params:
        sources=lambda w: " ".join(sorted({
            f"{'robust' if c.kind == 'd_r' else 'standard'}={c.source_run.run_id}" for c in CONSTRUCTIONS.values()
        })),
    shell:
        "study features-figure --table {input.table} --dataset {wildcards.dataset} --model {wildcards.model}"
        " --sources {params.sources}"
        " --constructed {input.constructed} --data {input.data}"
        " --out-stem {RESULTS}/figures/fig12_features/{wildcards.dataset}__{wildcards.model}"
        " --examples-stem {RESULTS}/figures/fig12_features/{wildcards.dataset}__{wildcards.model}__examples 2> {log}"
