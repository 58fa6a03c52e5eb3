# The model zoo (params `zoo`): models trained elsewhere (RobustBench's zoo, torchvision's ImageNet
# models), evaluated class-wise, never trained. A zoo run's directory names its model and weights
# file (`study zoo-run`, which fails with the file's expected place when it is missing); the
# evaluate, merge_shards, check and corruptions rules then treat it as a trained run. Its tables
# (the preset's zoo): results/<preset>/zoo/tables; its figures: 15-17. Its runs, evaluations and their logs are the zoo's own,
# results/zoo/{runs,evaluations,logs} (common.smk, run_root), since the figures stage, not the
# train and evaluate stages, writes them (dvc.yaml). Weights: the folder a user gives (zoo.weights_dir,
# $STUDY_WEIGHTS_DIR) is read as it is (offline machines); without one, the project's own
# data/zoo_weights, into which a zoo_run job fetches the missing files (--download:
# robustbench's own download, or $STUDY_WEIGHTS_URL_BASE). Entries on ImageNet are left out of
# the plan while it is not placed (study.config.zoo.zoo_left_out; preflight.smk says so).
from study.config.zoo import zoo_downloads

ZOO_TARGETS = list(ZOO_TABLES.values()) if ZOO else []


# The ImageNet entries' data, data/prepared/imagenet-val.pt, also matches the generic `prepare`
# rule; this one knows ImageNet's options (zoo.imagenet: subset size, image size).
ruleorder: prepare_imagenet > prepare


rule prepare_imagenet:
    output:
        prepared=prepared_file("imagenet", "val"),
    log:
        f"{RESULTS}/logs/prepare/imagenet-val.log",
    benchmark:
        f"{RESULTS}/benchmarks/prepare/imagenet-val.tsv",
    params:
        sources=source_args,
        options=quoted_json(zoo_imagenet_options(PARAMS)),
        raw=f"{DATA}/raw",
    resources:
        mem_mb=16000,
        runtime=120,
    conda:
        "../../environment.yml"
    shell:
        "study prepare --dataset imagenet --variant val --raw-dir {params.raw:q} {params.sources}"
        " --options {params.options} --out {output.prepared:q} 2> {log:q}"


rule zoo_run:
    output:
        model=f"{ZOO_ROOT}/runs/{{run_id}}/model.pt",
        config=f"{ZOO_ROOT}/runs/{{run_id}}/config.json",
    wildcard_constraints:
        run_id=one_of(r.run_id for r in ZOO),
    log:
        f"{RESULTS}/logs/zoo/{{run_id}}.log",
    benchmark:
        f"{RESULTS}/benchmarks/zoo/{{run_id}}.tsv",
    params:
        config=lambda w: quoted_json(run_of(w).config),
        weights=cli_options({"weights_dir": zoo_weights_dir(PARAMS)}) + (" --download" if zoo_downloads(PARAMS) else ""),
        run_dir=lambda w: run_dir(w.run_id),
    conda:
        "../../environment.yml"
    shell:
        "study zoo-run --run-config {params.config} {params.weights} --run-dir {params.run_dir:q} 2> {log:q}"


_ZOO_RECORDS = [eval_file(r.run_id, ev) for r in ZOO for ev in r.evaluations]


rule zoo_tables:
    input:
        records=_ZOO_RECORDS,
        stamp=gathered("zoo_tables", _ZOO_RECORDS, [ZOO_TABLES["zoo_classwise"], ZOO_TABLES["zoo_robustbench"]]),
    output:
        classwise=ZOO_TABLES["zoo_classwise"],
        robustbench=ZOO_TABLES["zoo_robustbench"],
    log:
        f"{PRESET_RESULTS}/logs/zoo/tables.log",
    benchmark:
        f"{PRESET_RESULTS}/benchmarks/zoo/tables.tsv",
    params:
        out_dir=folder_of("classwise"),  # results/<preset>/zoo/tables
    conda:
        "../../environment.yml"
    shell:
        "study tables --records {input.records:q} --out-dir {params.out_dir:q} 2> {log:q}"
        " && study zoo-table --classwise {output.classwise:q} --out {output.robustbench:q} 2>> {log:q}"


_ZOO_ROBUSTNESS_INPUT = {
    "records": _ZOO_RECORDS,
    "checks": [f"{evaluations_dir(r.run_id)}/checks.json" for r in ZOO_CHECKED],
    "corruptions": [f"{evaluations_dir(r.run_id)}/corruptions.parquet" for r in ZOO_CORRUPTED],
}


rule zoo_robustness_tables:
    input:
        **_ZOO_ROBUSTNESS_INPUT,
        stamp=gathered("zoo_robustness_tables", _ZOO_ROBUSTNESS_INPUT,
                       [ZOO_TABLES["zoo_checks"], ZOO_TABLES["zoo_corruptions"]]),
    output:
        checks=ZOO_TABLES["zoo_checks"],
        corruptions=ZOO_TABLES["zoo_corruptions"],
    log:
        f"{PRESET_RESULTS}/logs/zoo/robustness_tables.log",
    benchmark:
        f"{PRESET_RESULTS}/benchmarks/zoo/robustness_tables.tsv",
    params:
        out_dir=folder_of("checks"),  # results/<preset>/zoo/tables
        checks=lambda w, input: shlex.join(input.checks),
        corruptions=lambda w, input: shlex.join(input.corruptions),
    conda:
        "../../environment.yml"
    shell:
        "study robustness-tables --records {input.records:q} --checks {params.checks}"
        " --corruptions {params.corruptions} --out-dir {params.out_dir:q} 2> {log:q}"


rule zoo_all:
    input:
        ZOO_TARGETS,
