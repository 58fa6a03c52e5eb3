# All helper Python of the workflow. Science and path-free logic live in the `study`
# package; this file only maps the configured study onto files and command arguments.
import json
import shlex
from pathlib import Path

from snakemake.exceptions import WorkflowError

from study.config import ConfigError, load_params, plan_runs, prepared_name, resolve_evaluation

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
    return prepared_file(run.dataset, run.variant)


def run_config_arg(wildcards):
    return shlex.quote(json.dumps(run_of(wildcards).config, sort_keys=True))


def run_dir(run_id):
    return f"{RESULTS}/runs/{run_id}"


def train_runtime(wildcards):
    """Minutes for the scheduler: a generous bound from epochs and the attack's cost."""
    cfg = run_of(wildcards).config
    adv = cfg["method_config"].get("adversary") or {}
    per_epoch = 1 + adv.get("steps", 0)
    return max(30, int(cfg["epochs"] * per_epoch * 0.25))


def all_models():
    return [f"{run_dir(rid)}/model.pt" for rid in RUNS]


# ---------------------------------------------------------------- evaluations
def eval_file(run_id, evaluation):
    return f"{RESULTS}/evaluations/{run_id}/{evaluation}.parquet"


def all_evaluations():
    return [eval_file(rid, ev) for rid, run in RUNS.items() for ev in run.evaluations]


def evaluation_arg(wildcards):
    return shlex.quote(json.dumps(resolve_evaluation(config, wildcards.evaluation), sort_keys=True))


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
}


def figure_panels(fig):
    """(dataset, model, method) combinations a figure is drawn for."""
    kind, method = FIGURES[fig]
    keys = {
        (r.dataset, r.config["model"], r.config["method"])
        for r in RUNS.values()
        if method is None or r.config["method"] == method
    }
    return sorted(keys)


def figure_stem(fig, dataset, model, method):
    return f"{RESULTS}/figures/{fig}/{dataset}__{model}__{method}"


def all_figures():
    files = []
    for fig in config["figures"]:
        for dataset, model, method in figure_panels(fig):
            stem = figure_stem(fig, dataset, model, method)
            files += [f"{stem}.png", f"{stem}.pdf"]
    return files


def figure_evaluations(wildcards):
    """Evaluations shown in a class-wise figure: those of the runs it draws."""
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


def check_pgd_arg(wildcards):
    name = config["robustness"]["checks"]["reference"]
    return shlex.quote(json.dumps(resolve_evaluation(config, name), sort_keys=True))


def corruption_runs():
    """Runs evaluated on CIFAR-10-C: those trained on the dataset it corrupts."""
    cc = config["robustness"].get("corruptions")
    return [rid for rid, r in RUNS.items() if cc and r.dataset in cc["datasets"]]


def all_corruption_records():
    return [f"{RESULTS}/evaluations/{rid}/corruptions.parquet" for rid in corruption_runs()]


def corruption_args(wildcards):
    cc = config["robustness"]["corruptions"]
    args = ["--corruptions", *cc["names"], "--severities", *map(str, cc["severities"]), "--seed", str(cc["seed"])]
    if cc.get("per_class"):
        args += ["--per-class", str(cc["per_class"])]
    return " ".join(args)


ROBUSTNESS_TABLES = {
    name: f"{RESULTS}/tables/{name}.csv"
    for name in ("frl", "cfp", "confusion", "attacks", "checks", "corruptions")
}
# figure id -> (make_figure kind, table, method filter: a method, 'adversarial' or None = each method)
ROBUSTNESS_FIGURE_KINDS = {"fig03_frl_errors": "frl_errors", "fig11_cfp": "cfp", "fig14_corruptions": "corruptions"}
_ROBUSTNESS_FIGURE_TABLE = {"fig03_frl_errors": "frl", "fig11_cfp": "cfp", "fig14_corruptions": "corruptions"}
FIGURES.update(
    {
        "fig03_frl_errors": ("frl_errors", "all"),
        "fig11_cfp": ("cfp", "pgd_at"),
        "fig14_corruptions": ("corruptions", None),
    }
)


_classwise_figure_panels = figure_panels


def figure_panels(fig):
    """As above, plus the robustness figures: figure 3 puts every method of a (dataset,
    model) in one panel; figure 14 exists for runs evaluated on corruptions."""
    if fig == "fig03_frl_errors":
        return sorted({(r.dataset, r.config["model"], "all") for r in RUNS.values()})
    if fig == "fig14_corruptions":
        runs = [RUNS[rid] for rid in corruption_runs()]
        return sorted({(r.dataset, r.config["model"], r.config["method"]) for r in runs})
    return _classwise_figure_panels(fig)


def robustness_figure_table(wildcards):
    return ROBUSTNESS_TABLES[_ROBUSTNESS_FIGURE_TABLE[wildcards.fig]]
