# Pretrained ImageNet models (no training): the hand-placed ImageNet validation set is
# prepared once (a per-class subset, 224 px), each model is evaluated clean and under
# attack, and the records become tables of their own (results/pretrained/tables).


# data/prepared/imagenet-val.pt also matches the generic `prepare` rule; this one knows
# ImageNet's options (subset size, image size).
ruleorder: prepare_imagenet > prepare


rule prepare_imagenet:
    output:
        prepared=PRETRAINED_DATA,
    log:
        f"{RESULTS}/logs/prepare/imagenet-val.log",
    params:
        mirror=mirror_arg,
        options=imagenet_options_arg,
        raw=f"{DATA}/raw",
    resources:
        mem_mb=16000,
        runtime=120,
    shell:
        "study prepare --dataset imagenet --variant val --raw-dir {params.raw} {params.mirror}"
        " --options {params.options} --out {output.prepared} 2> {log}"


rule evaluate_pretrained:
    input:
        data=PRETRAINED_DATA,
    output:
        records=pretrained_eval_file("{pretrained}", "{evaluation}"),
    log:
        f"{RESULTS}/logs/pretrained/{{pretrained}}/{{evaluation}}.log",
    wildcard_constraints:
        pretrained=r"[A-Za-z0-9_]+",
    params:
        evaluation=evaluation_arg,
        weights=weights_dir_arg,
    threads: 8
    resources:
        gpu=1,
        mem_mb=32000,
        runtime=240,
    shell:
        "study evaluate-pretrained --model {wildcards.pretrained} {params.weights} --data {input.data}"
        " --evaluation {params.evaluation} --out {output.records} --threads {threads} --no-progress 2> {log}"


rule pretrained_tables:
    input:
        records=all_pretrained_evaluations(),
    output:
        **PRETRAINED_TABLES,
    log:
        f"{RESULTS}/logs/pretrained/tables.log",
    params:
        out_dir=f"{RESULTS}/pretrained/tables",
    shell:
        "study tables --records {input.records} --out-dir {params.out_dir} 2> {log}"


rule pretrained_all:
    input:
        **PRETRAINED_TABLES,
