# Pretrained ImageNet models (no training): the hand-placed ImageNet validation set is
# prepared once (a per-class subset, 224 px), each model is evaluated clean and under
# attack, and the records become tables of their own (results/pretrained/tables).


# Pretrained models are evaluated, never trained; off unless pretrained.enabled.
PRETRAINED_DATA = f"{DATA}/prepared/imagenet-val.pt"
PRETRAINED_TABLES = {name: f"{RESULTS}/pretrained/tables/{name}.csv" for name in ("classwise", "summary")}
PRETRAINED_TARGETS = list(PRETRAINED_TABLES.values()) if PRETRAINED["enabled"] else []
for _name in PRETRAINED["evaluations"]:
    lookup(config["evaluations"], _name, "pretrained.evaluations: evaluation")


# data/prepared/imagenet-val.pt also matches the generic `prepare` rule; this one knows
# ImageNet's options (subset size, image size).
ruleorder: prepare_imagenet > prepare


rule prepare_imagenet:
    output:
        prepared=PRETRAINED_DATA,
    log:
        f"{RESULTS}/logs/prepare/imagenet-val.log",
    params:
        sources=source_args,
        options=quoted_json({"per_class": PRETRAINED.get("per_class"), "image_size": PRETRAINED.get("image_size", 224)}),
        raw=f"{DATA}/raw",
    resources:
        mem_mb=16000,
        runtime=120,
    conda:
        "../../environment.yml"
    shell:
        "study prepare --dataset imagenet --variant val --raw-dir {params.raw} {params.sources}"
        " --options {params.options} --out {output.prepared} 2> {log}"


rule evaluate_pretrained:
    input:
        data=PRETRAINED_DATA,
    output:
        records=f"{RESULTS}/pretrained/evaluations/{{pretrained}}/{{evaluation}}.parquet",
    log:
        f"{RESULTS}/logs/pretrained/{{pretrained}}/{{evaluation}}.log",
    wildcard_constraints:
        pretrained=r"[A-Za-z0-9_]+",
    params:
        evaluation=lambda w: quoted_json(resolved_evaluation(w)),
        weights=cli_options({"weights_dir": PRETRAINED.get("weights_dir")}),
    threads: MODEL_THREADS
    resources:
        gpu=1,
        gpu_slots=1,
        mem_mb=32000,
        runtime=240,
    conda:
        "../../environment.yml"
    shell:
        "study evaluate-pretrained --model {wildcards.pretrained} {params.weights} --data {input.data}"
        " --evaluation {params.evaluation} --out {output.records} --threads {threads} --no-progress 2> {log}"


rule pretrained_tables:
    input:
        records=expand(f"{RESULTS}/pretrained/evaluations/{{model}}/{{evaluation}}.parquet",
                       model=PRETRAINED["models"], evaluation=PRETRAINED["evaluations"]),
    output:
        **PRETRAINED_TABLES,
    log:
        f"{RESULTS}/logs/pretrained/tables.log",
    params:
        out_dir=folder_of("classwise"),  # results/pretrained/tables
    conda:
        "../../environment.yml"
    shell:
        "study tables --records {input.records} --out-dir {params.out_dir} 2> {log}"


rule pretrained_all:
    input:
        **PRETRAINED_TABLES,
