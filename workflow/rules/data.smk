# Phase 1: datasets. Archives are taken from the local mirror or downloaded, verified by
# checksum into data/raw, and prepared once as uint8 tensors in data/prepared.


rule prepare:
    output:
        prepared=f"{DATA}/prepared/{{dataset}}-{{variant}}.pt",
    log:
        f"{RESULTS}/logs/prepare/{{dataset}}-{{variant}}.log",
    benchmark:
        f"{RESULTS}/benchmarks/prepare/{{dataset}}-{{variant}}.tsv",
    params:
        sources=source_args,
        raw=f"{DATA}/raw",
    resources:
        mem_mb=8000,
        runtime=30,
    conda:
        "../../environment.yml"
    shell:
        "study prepare --dataset {wildcards.dataset:q} --variant {wildcards.variant:q}"
        " --raw-dir {params.raw:q} {params.sources} --out {output.prepared:q} 2> {log:q}"


rule data_all:
    input:
        sorted({prepared_file(r.dataset, r.variant) for r in PLAN}),
