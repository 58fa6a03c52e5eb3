# All helper Python of the workflow. Science and path-free logic live in the `study`
# package; this file only maps the configured study onto files and command arguments.
import json
import shlex
from pathlib import Path

from snakemake.exceptions import WorkflowError

from study.config import ConfigError, constructions, load_params, plan_runs, prepared_name, resolve_evaluation
from study import resources as resources_estimate

_BASE = Path(workflow.basedir)

# params.yaml < preset overlay < command-line --config (so `--config preset=demo x=y` works).
try:
    _resolved = load_params(
        base=config,
        overrides=dict(workflow.config_settings.overwrite_config or {}),
        presets_dir=_BASE / "workflow/presets",
        schema_path=_BASE / "workflow/schemas/params.schema.yaml",
    )
except ConfigError as err:
    raise WorkflowError(str(err)) from None
config.clear()
config.update(_resolved)

DATA = config["data"]["root"]
RUNS = {run.run_id: run for run in plan_runs(config)}
RESULTS = "results"


wildcard_constraints:
    run_id=r"[A-Za-z0-9_.\-]+",
    evaluation=r"[A-Za-z0-9_]+",
    dataset=r"[a-z0-9]+",
    variant=r"[a-z0-9]+",
    model=r"[a-z0-9_]+",
    method=r"[a-z0-9_]+",


# ---------------------------------------------------------------- data
def prepared_file(dataset, variant):
    return f"{DATA}/prepared/{prepared_name(dataset, variant)}.pt"


def all_prepared():
    return sorted({prepared_file(r.dataset, r.variant) for r in RUNS.values()})


def mirror_arg(wildcards):
    mirror = config["data"].get("mirror")
    return f"--mirror {shlex.quote(str(mirror))}" if mirror else ""


def synthetic_arg(wildcards):
    if wildcards.dataset != "synthetic":
        return ""
    return "--synthetic " + shlex.quote(json.dumps(config["data"]["synthetic"], sort_keys=True))


# ---------------------------------------------------------------- runs
def run_of(wildcards):
    try:
        return RUNS[wildcards.run_id]
    except KeyError:
        raise WorkflowError(
            f"run {wildcards.run_id!r} is not part of preset {config['preset']!r}; `study plan` lists its runs"
        ) from None


def run_data(wildcards):
    run = run_of(wildcards)
    con = run.config.get("constructed")
    if con:
        return constructed_file(f"{con['kind']}-{con['key']}")
    return prepared_file(run.dataset, run.variant)


def run_config_arg(wildcards):
    return shlex.quote(json.dumps(run_of(wildcards).config, sort_keys=True))


def run_dir(run_id):
    return f"{RESULTS}/runs/{run_id}"


def train_runtime(wildcards):
    """Minutes for the scheduler, from the model's FLOPs, the data size, epochs and attack steps."""
    return resources_estimate.train_minutes(run_of(wildcards).config)


def train_mem_mb(wildcards):
    return resources_estimate.mem_mb(run_of(wildcards).config, floor=8000)


def evaluate_runtime(wildcards):
    run = run_of(wildcards)
    shards = int(wildcards.shards) if "shards" in wildcards.keys() else 1
    return resources_estimate.evaluate_minutes(
        run.config, resolve_evaluation(config, wildcards.evaluation, dataset=run.dataset), shards=shards)


def evaluate_mem_mb(wildcards):
    return resources_estimate.mem_mb(run_of(wildcards).config, floor=6000)


# Runs of the `mitigation*` groups (figure 13) stay out of the other figures.
def is_mitigation_run(run):
    return any(g.startswith("mitigation") for g in run.groups)


def all_models():
    return [f"{run_dir(rid)}/model.pt" for rid in RUNS]


# ---------------------------------------------------------------- evaluations
def eval_file(run_id, evaluation):
    return f"{RESULTS}/evaluations/{run_id}/{evaluation}.parquet"


def all_evaluations():
    return [
        eval_file(rid, ev) for rid, run in RUNS.items() if "last" in run.checkpoints for ev in run.evaluations
    ] + best_evaluations()


def evaluation_arg(wildcards):
    # Settings as resolved for the run's dataset (per_dataset: MNIST's budget).
    dataset = run_of(wildcards).dataset if "run_id" in wildcards.keys() else None  # pretrained: no run
    ev = resolve_evaluation(config, wildcards.evaluation, dataset=dataset)
    return shlex.quote(json.dumps(ev, sort_keys=True))


TABLES = {
    "classwise": f"{RESULTS}/tables/classwise.csv",
    "summary": f"{RESULTS}/tables/summary.csv",
    "classwise_seeds": f"{RESULTS}/tables/classwise_seeds.csv",
    "epochs": f"{RESULTS}/tables/epochs.csv",
}


# ---------------------------------------------------------------- figures
# figure id -> (kind, method filter or None for every method, caption file)
FIGURES = {
    "fig01_classwise_standard": ("classwise", "standard"),
    "fig02_classwise_adversarial": ("classwise", "pgd_at"),
    "fig07_epochs": ("epochs", None),
    # Explanations: for figures 4-6 the second field names the experiment group they draw.
    "fig04_discrepancy_datasets": ("discrepancy", "datasets"),
    "fig05_discrepancy_models": ("discrepancy", "models"),
    "fig06_discrepancy_optimization": ("discrepancy", "optimization"),
    "fig08_rank_agreement": ("rank_agreement", None),
    "fig09_confusion": ("confusion", None),
    "fig10_logit_similarity": ("logit_similarity", None),
    "fig13_mitigation": ("mitigation", None),
    "fig13_policy_epochs": ("policy_epochs", None),
}


def figure_panels(fig):
    """(dataset, model, method) combinations a figure is drawn for."""
    kind, method = FIGURES[fig]
    if kind in MITIGATION_PANELS:
        return MITIGATION_PANELS[kind]()
    keys = {
        (r.dataset, r.config["model"], r.config["method"])
        for r in RUNS.values()
        if (method is None or r.config["method"] == method) and not r.config.get("constructed")
        and not is_mitigation_run(r)
    }
    return sorted(keys)


def figure_stem(fig, dataset, model, method):
    return f"{RESULTS}/figures/{fig}/{dataset}__{model}__{method}"


def all_figures():
    files = []
    for fig in config["figures"]:
        if fig == "fig12_features":
            for dataset, model in feature_panels():
                for stem in (f"{RESULTS}/figures/{fig}/{dataset}__{model}", f"{RESULTS}/figures/{fig}/{dataset}__{model}__examples"):
                    files += [f"{stem}.png", f"{stem}.pdf"]
            continue
        if fig in EXPLAIN_FIGURES:
            files += explain_figure_files(fig)
            continue
        for dataset, model, method in figure_panels(fig):
            stem = figure_stem(fig, dataset, model, method)
            files += [f"{stem}.png", f"{stem}.pdf"]
    return files


def figure_evaluations(wildcards):
    """Evaluations shown in a class-wise figure: those of the runs it draws."""
    return evaluation_names_arg(panel_runs(wildcards))


# ---------------------------------------------------------------- explanation figures (4-6, 8-10)
# Indexes built once, so input functions stay O(1) per job for thousands of runs.
EXPLAIN_FIGURES = {fig for fig, (kind, _) in FIGURES.items()
                   if kind in ("discrepancy", "rank_agreement", "confusion", "logit_similarity")}
DISCREPANCY_BY = {
    "fig04_discrepancy_datasets": "dataset",
    "fig05_discrepancy_models": "model",
    "fig06_discrepancy_optimization": "setting",
}


def _setting(run):
    c = run.config
    return (c["optimizer"]["name"], c["optimizer"]["lr"], c["schedule"]["name"],
            c["optimizer"]["weight_decay"], c["epochs"], c.get("train_per_class"))


def _index_runs():
    groups, panels, datasets = {}, {}, {}
    for rid, run in RUNS.items():
        for g in run.groups:
            groups.setdefault(g, []).append(rid)
        if run.config.get("constructed") or is_mitigation_run(run):  # figure 12's and figure 13's
            continue
        panels.setdefault((run.dataset, run.config["model"], run.config["method"]), []).append(rid)
        datasets.setdefault(run.dataset, []).append(rid)
    # A (dataset, model, method) panel draws one training setting: that of its first planned run
    # (the baseline's, as groups are planned in order); the other settings are figure 6's.
    panels = {key: [r for r in rids if _setting(RUNS[r]) == _setting(RUNS[rids[0]])]
              for key, rids in panels.items()}
    return groups, panels, datasets


GROUP_RUNS, PANEL_RUNS, DATASET_RUNS = _index_runs()


def panel_runs(wildcards):
    return PANEL_RUNS[(wildcards.dataset, wildcards.model, wildcards.method)]


def panel_runs_arg(wildcards):
    return " ".join(panel_runs(wildcards))


def group_runs_arg(wildcards):
    return " ".join(GROUP_RUNS[FIGURES[wildcards.fig][1]])


def dataset_runs_arg(wildcards):
    return " ".join(DATASET_RUNS[wildcards.dataset])


def panel_records(wildcards):
    return [eval_file(rid, ev) for rid in panel_runs(wildcards) for ev in RUNS[rid].evaluations]


def evaluation_names_arg(runs):
    names = []
    for rid in runs:
        names += [e for e in RUNS[rid].evaluations if e not in names]
    return " ".join(names)


def explain_figure_files(fig):
    kind, group = FIGURES[fig]
    if kind == "discrepancy":
        if group not in GROUP_RUNS:
            raise WorkflowError(
                f"figure {fig} draws experiment group {group!r}, which preset {config['preset']!r} lacks; "
                f"its groups: {', '.join(sorted(GROUP_RUNS))}"
            )
        stems = [f"{RESULTS}/figures/{fig}/{group}"]
    elif kind == "rank_agreement":
        # Only datasets with at least two configurations to compare.
        stems = [f"{RESULTS}/figures/{fig}/{ds}" for ds, rids in sorted(DATASET_RUNS.items())
                 if len({(RUNS[r].config["model"], RUNS[r].config["method"], _setting(RUNS[r])) for r in rids}) > 1]
    else:
        stems = [figure_stem(fig, *key) for key in sorted(PANEL_RUNS)]
    return [f"{stem}.{ext}" for stem in stems for ext in ("png", "pdf")]


# ---------------------------------------------------------------- pretrained ImageNet models
# Evaluated, never trained (workflow/rules/pretrained.smk); off unless pretrained.enabled.
PRETRAINED = config["pretrained"]
PRETRAINED_DATA = f"{DATA}/prepared/imagenet-val.pt"


def _check_pretrained_evaluations():
    unknown = [e for e in PRETRAINED["evaluations"] if e not in config["evaluations"]]
    if unknown:
        raise WorkflowError(
            f"pretrained.evaluations names {unknown}, not in evaluations: {sorted(config['evaluations'])}"
        )


_check_pretrained_evaluations()


def pretrained_eval_file(model, evaluation):
    return f"{RESULTS}/pretrained/evaluations/{model}/{evaluation}.parquet"


def all_pretrained_evaluations():
    return [pretrained_eval_file(m, e) for m in PRETRAINED["models"] for e in PRETRAINED["evaluations"]]


PRETRAINED_TABLES = {
    "classwise": f"{RESULTS}/pretrained/tables/classwise.csv",
    "summary": f"{RESULTS}/pretrained/tables/summary.csv",
}
PRETRAINED_TARGETS = list(PRETRAINED_TABLES.values()) if PRETRAINED["enabled"] else []


def imagenet_options_arg(wildcards):
    options = {"per_class": PRETRAINED.get("per_class"), "image_size": PRETRAINED.get("image_size", 224)}
    return shlex.quote(json.dumps(options, sort_keys=True))


def weights_dir_arg(wildcards):
    weights = PRETRAINED.get("weights_dir")
    return f"--weights-dir {shlex.quote(str(weights))}" if weights else ""
# ---------------------------------------------------------------- constructed datasets
CONSTRUCTIONS = {c.name: c for c in constructions(config, list(RUNS.values()))} if config.get("features") else {}


def constructed_file(name):
    return f"{DATA}/constructed/{name}.pt"


def construction_of(wildcards):
    try:
        return CONSTRUCTIONS[wildcards.construction]
    except KeyError:
        raise WorkflowError(f"construction {wildcards.construction!r} is not part of preset {config['preset']!r}") from None


def feature_panels():
    """(dataset, model trained on the constructed sets) of figure 12."""
    if not CONSTRUCTIONS:
        return []
    return [(next(iter(CONSTRUCTIONS.values())).source_run.dataset, config["features"]["train"]["model"])]
    evs = []
    for r in RUNS.values():
        c = r.config
        if (r.dataset, c["model"], c["method"]) == (wildcards.dataset, wildcards.model, wildcards.method):
            evs += [e for e in r.evaluations if e not in evs]
    return " ".join(evs)


# ---------------------------------------------------------------- robustness (issue 4)
def _sharded():
    return sorted(n for n, ev in config["evaluations"].items() if int(ev.get("shards", 1)) > 1)


# An alternation that never matches when no evaluation is sharded.
SHARDED_EVALUATIONS = "|".join(_sharded()) or r"(?!x)x"


def shard_files(wildcards):
    n = int(config["evaluations"][wildcards.evaluation]["shards"])
    return [
        f"{RESULTS}/evaluations/{wildcards.run_id}/shards/{wildcards.evaluation}/{i}-of-{n}.parquet"
        for i in range(n)
    ]


ROBUSTNESS = config["robustness"]


def _robustness_runs(groups):
    """Runs of the given experiment groups (models trained on constructed data excluded)."""
    return [rid for rid, r in RUNS.items() if set(r.groups) & set(groups) and not r.config.get("constructed")]


# Runs that get the checks and appear in the robustness tables and figures 3 and 11.
ROBUSTNESS_RUNS = _robustness_runs(ROBUSTNESS["groups"])


def check_pgd_arg(wildcards):
    ev = resolve_evaluation(config, ROBUSTNESS["checks"]["reference"], dataset=run_of(wildcards).dataset)
    return shlex.quote(json.dumps(ev, sort_keys=True))


def corruption_runs():
    """Runs evaluated on CIFAR-10-C: those of the corruption groups trained on the dataset it corrupts."""
    cc = ROBUSTNESS.get("corruptions")
    if not cc:
        return []
    return [rid for rid in _robustness_runs(cc.get("groups") or ROBUSTNESS["groups"])
            if RUNS[rid].dataset in cc["datasets"]]


def all_corruption_records():
    return [f"{RESULTS}/evaluations/{rid}/corruptions.parquet" for rid in corruption_runs()]


def robustness_records():
    return [eval_file(rid, ev) for rid in ROBUSTNESS_RUNS for ev in RUNS[rid].evaluations]


def corruption_args(wildcards):
    cc = ROBUSTNESS["corruptions"]
    args = ["--corruptions", *cc["names"], "--severities", *map(str, cc["severities"]), "--seed", str(cc["seed"])]
    if cc.get("per_class"):
        args += ["--per-class", str(cc["per_class"])]
    # the official archive is looked for in the mirror, then in the raw-data folder
    args += ["--source", cc.get("source", "auto"), "--raw-dir", shlex.quote(f"{DATA}/raw")]
    return " ".join([*args, mirror_arg(wildcards)]).strip()


ROBUSTNESS_TABLES = {
    name: f"{RESULTS}/tables/{name}.csv"
    for name in ("frl", "cfp", "confusion", "attacks", "checks", "corruptions")
}
# figure id -> make_figure kind, and the table it draws
ROBUSTNESS_FIGURE_KINDS = {"fig03_frl_errors": "frl_errors", "fig11_cfp": "cfp", "fig14_corruptions": "corruptions"}
_ROBUSTNESS_FIGURE_TABLE = {"fig03_frl_errors": "frl", "fig11_cfp": "cfp", "fig14_corruptions": "corruptions"}
FIGURES.update(
    {
        "fig03_frl_errors": ("frl_errors", "all"),
        "fig11_cfp": ("cfp", "pgd_at"),
        "fig14_corruptions": ("corruptions", None),
    }
)


def _robustness_panels(fig):
    """(dataset, model, method) -> the runs drawn: one training setting per panel (that of
    its first run, as for the class-wise figures). Figure 3 puts every method of a (dataset,
    model) in one panel ('all'); figure 11 draws PGD-AT; figure 14 each corrupted run's method."""
    rids = corruption_runs() if fig == "fig14_corruptions" else ROBUSTNESS_RUNS
    panels = {}
    for rid in rids:
        r = RUNS[rid]
        method = r.config["method"]
        if fig == "fig11_cfp" and method != "pgd_at":
            continue
        key = (r.dataset, r.config["model"], "all" if fig == "fig03_frl_errors" else method)
        panels.setdefault(key, []).append(rid)
    return {key: [r for r in rids if _setting(RUNS[r]) == _setting(RUNS[rids[0]])] for key, rids in panels.items()}


ROBUSTNESS_PANELS = {fig: _robustness_panels(fig) for fig in ROBUSTNESS_FIGURE_KINDS}
_classwise_figure_panels = figure_panels


def figure_panels(fig):
    """As above, plus the robustness figures 3, 11 and 14."""
    if fig in ROBUSTNESS_PANELS:
        return sorted(ROBUSTNESS_PANELS[fig])
    return _classwise_figure_panels(fig)


def robustness_panel_runs_arg(wildcards):
    return " ".join(ROBUSTNESS_PANELS[wildcards.fig][(wildcards.dataset, wildcards.model, wildcards.method)])


def robustness_figure_table(wildcards):
    return ROBUSTNESS_TABLES[_ROBUSTNESS_FIGURE_TABLE[wildcards.fig]]


# ---------------------------------------------------------------- mitigation (figure 13)
# Runs of the `mitigation*` groups: fine-tuning parents (init_from), best checkpoints
# (model_best.pt, evaluated as <evaluation>@best), and one figure-13 panel per
# (dataset, model) with every method (method wildcard `all`).
def run_parent_model(wildcards):
    parent = run_of(wildcards).init_from
    return [f"{run_dir(parent)}/model.pt"] if parent else []


def init_from_arg(wildcards, input):
    return f"--init-from {input.parent[0]}" if input.parent else ""


def best_eval_file(run_id, evaluation):
    return f"{RESULTS}/evaluations/{run_id}/{evaluation}@best.parquet"


def best_evaluations():
    return [best_eval_file(rid, ev) for rid, run in RUNS.items() if "best" in run.checkpoints for ev in run.evaluations]


def _mitigation_panels():
    return sorted({(r.dataset, r.config["model"], "all") for r in RUNS.values() if is_mitigation_run(r)})


MITIGATION_PANELS = {"mitigation": _mitigation_panels, "policy_epochs": _mitigation_panels}


def mitigation_methods(wildcards):
    """The methods of a figure-13 panel, in the order the groups list them."""
    names = []
    for r in RUNS.values():
        c = r.config
        if is_mitigation_run(r) and (r.dataset, c["model"]) == (wildcards.dataset, wildcards.model):
            if c["method"] not in names:
                names.append(c["method"])
    return " ".join(names)


# ---------------------------------------------------------------- bench (issue 7)
def bench_setting(wildcards):
    settings = config.get("bench", {}).get("settings", {})
    if wildcards.name not in settings:
        raise ValueError(f"unknown bench setting {wildcards.name!r}; params.yaml bench.settings: "
                         f"{', '.join(settings) or 'none'}")
    return settings[wildcards.name]


def bench_data(wildcards):
    data = bench_setting(wildcards).get("data")
    return [data] if data else []


def bench_args(wildcards, input):
    s = bench_setting(wildcards)
    args = ["--device", s["device"], "--model", s["model"], "--images", str(s["images"]),
            "--test-images", str(s["test_images"]), "--no-progress"]
    if input.data:
        args += ["--data", shlex.quote(input.data[0])]
    if s.get("tasks"):
        args += ["--tasks", *s["tasks"]]
    for key in ("batch_size", "accuracy_epochs", "seed"):
        if key in s:
            args += [f"--{key.replace('_', '-')}", str(s[key])]
    return " ".join(args)
