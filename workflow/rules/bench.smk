# Speed (issue 7): `study bench` times the training engine and the evaluations against a
# plain PyTorch reference loop in one process (docs/performance.md). Not part of
# results/figures/all: a bench measures the machine, not the study. Its setting: bench_setting
# (common.smk).


rule bench:
    input:
        data=lambda w: [bench_setting(w)["data"]] if bench_setting(w).get("data") else [],
    output:
        report=f"{RESULTS}/bench/{{name}}.json",
        table=f"{RESULTS}/bench/{{name}}.md",
    log:
        f"{RESULTS}/logs/bench/{{name}}.log",
    benchmark:
        f"{RESULTS}/benchmarks/bench/{{name}}.tsv",
    wildcard_constraints:
        name=r"[A-Za-z0-9_]+",
    params:
        # the setting's keys are `study bench` options (params schema); --data is its input
        args=lambda w: cli_options(bench_setting(w)),
    threads: 8
    resources:
        gpu=lambda w: 1 if bench_setting(w)["device"] != "cpu" else 0,
        mem_mb=16000,
        runtime=120,
    conda:
        "../../environment.yml"
    shell:
        "study bench --out {output.report:q} {params.args} --no-progress --threads {threads} 2> {log:q}"


rule bench_all:
    input:
        expand(f"{RESULTS}/bench/{{name}}.json", name=PARAMS.bench.default if PARAMS.bench is not None else []),
