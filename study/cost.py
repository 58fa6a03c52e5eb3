"""The price of a planned study before it runs (`study plan --cost`, the preflight screen):
device-hours per experiment group and in total, on a CPU of 2 cores and on one H100, and the
disk its checkpoints, records and prepared data take.

Each model job is priced from the useful FLOPs it computes at the rates of the throughput table
(study.workload: the bench's FLOP convention, the rows of workflow/throughput.yaml, every rate
with its provenance, and AutoAttack priced as its cascade runs). `root` (price, plan_jobs) is the
project whose per-sample records give AutoAttack's shares (`broken_by`); without it, the expected
accuracies (study.workload.EXPECTED_ACCURACY). Each job adds a process start (the table's
`job_start_s`); the price lists the row of every rate it used.

Where a run left Snakemake benchmark files (results/benchmarks/<rule>/..., the mirror of the
job's log path: every rule of workflow/rules writes one), the measured seconds replace the
estimate on the device kind they were measured on (`measured`).

Priced: prepare, train, evaluate (and its shards). Not priced: checks, corruptions,
constructions, tables and figures (CPU jobs of seconds, or model jobs with their own settings);
the estimate-against-benchmark report (tests/workflow/test_workflow.py) gives their measured share.

Torch-free: the plan is priced in a second.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from study.config.evaluations import AnyEvaluation, AutoAttackEvaluation
from study.config.plan import RunSpec, prepared_name
from study.config.spec import EvaluationSpec
from study.config.types import Params, RunConfig, ZooRunConfig
from study.data.registry import get_dataset_info
from study.io import replace_marked
from study.record_names import record_name
from study.workload import (
    ASSUMED,
    MEASURED,
    SCALED,
    TABLE,
    THROUGHPUT_TABLE,
    CascadeShares,
    Row,
    Throughput,
    checkpoint_bytes,
    data_facts,
    eval_work,
    evaluated_model,
    expected_shares,
    load_throughput,
    shares_from_records,
    train_work,
    work_seconds,
)

BENCHMARKS = "benchmarks"
#: the device kinds priced: a CPU of 2 cores (this project's machine) and one H100
DEVICES = ("cpu-2core", "h100")
#: bytes of one per-sample record row (an image of an evaluation), measured on the demo's parquet files
RECORD_BYTES = 70

@dataclass
class Job:
    """One priced job: its rule (as its benchmark folder names it), group, benchmark file,
    seconds and basis per device kind, and the bytes it writes (checkpoints, records, prepared)."""

    rule: str
    group: str
    benchmark: str
    seconds: dict[str, float]
    basis: dict[str, str]
    disk: dict[str, float] = field(default_factory=dict)
    #: the rows its rates came from, per device kind
    rows: dict[str, tuple[Row, ...]] = field(default_factory=dict)
    #: the AutoAttack cascade's shares it was priced with (CascadeShares.describe), if any
    cascade: tuple[str, ...] = ()
    #: whether it prices AutoAttack evaluations alone (the ratio report's AutoAttack row)
    autoattack: bool = False


def benchmark_of(log: str) -> str:
    """A job's benchmark file: its log's path with logs/ -> benchmarks/ and .log -> .tsv."""
    head, sep, tail = log.rpartition("/logs/")
    return f"{head}/{BENCHMARKS}/{tail.removesuffix('.log')}.tsv" if sep else log


def _priced(work: Sequence[tuple[float, str]], table: Throughput, model: str,
            precision: str = "fp32") -> tuple[dict, dict, dict]:
    """(seconds, basis, rows) per device of a job doing `work`: (FLOPs, bench task) pairs."""
    seconds, basis, rows = {}, {}, {}
    for device in DEVICES:
        total, basis[device], rows[device] = work_seconds(work, table, model, device, precision)
        seconds[device] = table.job_start_s.get(device, 0.0) + total
    return seconds, basis, rows


def train_job(run: RunSpec, group: str, table: Throughput, results: str = "results",
              constructed: Mapping[str, int] | None = None) -> Job:
    """A run's training job; `constructed`: the images of each constructed dataset (kind-key),
    which a run trained on one sees instead of its dataset's."""
    cfg = run.trained
    if cfg is None:
        raise ValueError(f"{run.run_id}: a zoo model is evaluated, never trained: it has no training job")
    train, *_ = data_facts(cfg)
    con = cfg.constructed
    if con and constructed and f"{con.kind}-{con.key}" in constructed:
        train = constructed[f"{con.kind}-{con.key}"]
    work = train_work(cfg, train)
    seconds, basis, rows = _priced(work, table, cfg.model, cfg.precision)
    return Job("train", group, benchmark_of(f"{results}/logs/train/{run.run_id}.log"), seconds, basis,
               {"checkpoints": checkpoint_bytes(run.run)}, rows)


def _test_images(run: RunSpec, ev: AnyEvaluation) -> int:
    from study.data.registry import get_dataset_info

    _, test, _, _ = data_facts(run.run)
    if ev.test_per_class:
        test = min(test, ev.test_per_class * get_dataset_info(run.dataset).num_classes)
    return test


def model_kind(run: RunSpec) -> str:
    """The kind of model EXPECTED_ACCURACY holds for a run: adversarial where it trains against an
    adversary, and a RobustBench zoo model (robust models, an upper bound for the zoo's `Standard`)."""
    if isinstance(run.run, ZooRunConfig):
        return "adversarial"
    return "adversarial" if run.run.method_config.adversary is not None else "standard"


def cascade_shares(run: RunSpec, ev: AutoAttackEvaluation, name: str, checkpoint: str,
                   records: Path | None) -> CascadeShares:
    """The shares an AutoAttack evaluation's cascade starts each attack on: from the run's own
    record of it under `records` (a results folder's evaluations/) where it exists, else expected."""
    if records is not None:
        path = records / run.run_id / f"{record_name(name, checkpoint)}.parquet"
        if path.is_file():
            import pyarrow.parquet as pq

            table = pq.read_table(path)
            if "broken_by" in table.column_names:
                return shares_from_records(ev, table.column("broken_by").to_pylist(),
                                           f"this run's records, {path.name}")
    return expected_shares(ev, model_kind(run))


def evaluate_jobs(run: RunSpec, group: str, params: Params, table: Throughput, results: str = "results",
                  root: str | Path | None = None) -> list[Job]:
    """The evaluate jobs of a run (common.smk's EVALUATION_SETS): one per checkpoint for its
    evaluations, a sharded evaluation of the last checkpoint one per shard. `root`: the project
    folder whose records give the AutoAttack cascade's shares (None: the expected shares)."""
    from study.config import resolve_evaluation

    base = f"{results}/zoo" if isinstance(run.run, ZooRunConfig) else results
    model, forward = evaluated_model(run.run)
    evs = {e: EvaluationSpec.parse(resolve_evaluation(params, e, dataset=run.dataset)).config for e in run.evaluations}
    shards = {e: params.evaluations[e].shards if e in params.evaluations else 1 for e in run.evaluations}
    logs = f"{base}/logs/evaluate/{run.run_id}"
    records = Path(root) / base / "evaluations" if root is not None else None
    jobs = []
    for cp in run.checkpoints:
        shares = {e: cascade_shares(run, ev, e, cp, records) for e, ev in evs.items()
                  if isinstance(ev, AutoAttackEvaluation)}
        names = sorted(e for e in run.evaluations if cp != "last" or shards[e] <= 1)
        if names:
            work = [eval_work(evs[e], _test_images(run, evs[e]), forward, shares.get(e)) for e in names]
            seconds, basis, rows = _priced(work, table, model)
            images = sum(_test_images(run, evs[e]) for e in names) * RECORD_BYTES
            jobs.append(Job("evaluate", group, benchmark_of(f"{logs}/{record_name('+'.join(names), cp)}.log"),
                            seconds, basis, {"records": images}, rows,
                            tuple(shares[e].describe() for e in names if e in shares),
                            all(e in shares for e in names)))
        for e in (e for e in run.evaluations if cp == "last" and shards[e] > 1):
            images = math.ceil(_test_images(run, evs[e]) / shards[e])
            seconds, basis, rows = _priced([eval_work(evs[e], images, forward, shares.get(e))], table, model)
            jobs += [Job("evaluate_shard", group, benchmark_of(f"{logs}/shards/{e}/{i}-of-{shards[e]}.log"),
                         seconds, basis, {"records": images * RECORD_BYTES}, rows,
                         (shares[e].describe(),) if e in shares else (), e in shares) for i in range(shards[e])]
    return jobs


def prepare_jobs(runs: Sequence[RunSpec], table: Throughput, results: str = "results") -> list[Job]:
    """One per prepared dataset (uint8 train and test sets): a process start; its bytes on disk."""
    jobs, seen = [], set()
    for run in runs:
        key = (run.dataset, run.variant)
        if key in seen or run.dataset == "imagenet" or (run.trained is not None and run.trained.constructed):
            continue
        seen.add(key)
        train, test, channels, side = data_facts(run.run)
        if not isinstance(run.run, RunConfig) or run.run.train_per_class:
            # the prepared file holds the whole dataset, whatever a run subsamples
            info = get_dataset_info(run.dataset)
            train = info.train_size if info.train_size is not None else train
            test = info.test_size if info.test_size is not None else test
        seconds = {d: table.job_start_s.get(d, 0.0) for d in DEVICES}
        jobs.append(Job("prepare", "data", benchmark_of(f"{results}/logs/prepare/{prepared_name(*key)}.log"),
                        seconds, dict.fromkeys(DEVICES, TABLE),
                        {"prepared": (train + test) * channels * side * side}))
    return jobs


def plan_jobs(params: Params, runs: Sequence[RunSpec], zoo: Sequence[RunSpec], table: Throughput,
              results: str = "results", root: str | Path | None = None) -> list[Job]:
    """Every priced job of the plan; a run counts under the first of its groups, a zoo model under
    `zoo`. `root`: the project folder whose evaluation records price AutoAttack's cascade (None:
    the expected shares alone, as the generated docs are priced)."""
    from study.config import constructions
    from study.data.registry import get_dataset_info

    jobs = prepare_jobs([*runs, *zoo], table, results)
    # per_class null: the source run's whole training set (data_facts already counts it)
    constructed = ({f"{c.kind}-{c.key}": c.settings["per_class"] * get_dataset_info(c.source_run.dataset).num_classes
                    for c in constructions(params, list(runs)) if c.settings.get("per_class")}
                   if params.features is not None else {})
    for run in runs:
        group = run.groups[0] if run.groups else "other"
        jobs.append(train_job(run, group, table, results, constructed))
        jobs += evaluate_jobs(run, group, params, table, results, root)
    for run in zoo:
        jobs += evaluate_jobs(run, "zoo", params, table, results, root)
    return jobs


def read_benchmark(path: str | Path) -> float | None:
    """The seconds of a Snakemake benchmark file (its `s` column, the mean of its repeats); None if absent."""
    path = Path(path)
    if not path.is_file():
        return None
    lines = [line.split("\t") for line in path.read_text().splitlines() if line.strip()]
    if len(lines) < 2 or "s" not in lines[0]:
        return None
    col = lines[0].index("s")
    return sum(float(line[col]) for line in lines[1:]) / (len(lines) - 1)


def apply_measurements(jobs: Sequence[Job], root: str | Path, device: str) -> int:
    """Replace the estimate on `device` by the benchmark file's seconds wherever a job left one
    (under the project folder `root`); the number of jobs measured."""
    measured = 0
    for job in jobs:
        seconds = read_benchmark(Path(root) / job.benchmark)
        if seconds is not None and device in job.seconds:
            job.seconds[device], job.basis[device] = seconds, MEASURED
            measured += 1
    return measured


def local_device() -> str:
    """The device kind of this machine, as the table names kinds: h100 where the NVIDIA driver
    reports one, else cpu-<cores>core (torch-free: /proc/driver/nvidia)."""
    for info in Path("/proc/driver/nvidia/gpus").glob("*/information"):
        if "H100" in info.read_text():
            return "h100"
    import os

    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    return f"cpu-{cores}core"


@dataclass(frozen=True)
class Totals:
    jobs: int
    hours: Mapping[str, float]
    basis: Mapping[str, str]  # the weakest basis of the device's numbers
    disk: Mapping[str, float]
    measured: int


def totals(jobs: Sequence[Job]) -> Totals:
    order = [MEASURED, TABLE, SCALED, ASSUMED]  # weakest last
    hours = {d: sum(j.seconds[d] for j in jobs) / 3600 for d in DEVICES}
    basis = {d: max((j.basis[d] for j in jobs), key=order.index, default=TABLE) for d in DEVICES}
    disk = {k: sum(j.disk.get(k, 0.0) for j in jobs) for k in ("checkpoints", "records", "prepared")}
    return Totals(len(jobs), hours, basis, disk, sum(any(b == MEASURED for b in j.basis.values()) for j in jobs))


def _totals_by(jobs: Sequence[Job], key: str) -> dict[str, Totals]:
    parts: dict[str, list[Job]] = {}
    for job in jobs:
        parts.setdefault(getattr(job, key), []).append(job)
    return {name: totals(js) for name, js in parts.items()}


def by_group(jobs: Sequence[Job]) -> dict[str, Totals]:
    return _totals_by(jobs, "group")


def by_rule(jobs: Sequence[Job]) -> dict[str, Totals]:
    """Totals per rule (prepare, train, evaluate, evaluate_shard): where the hours go."""
    return _totals_by(jobs, "rule")


#: the budget a preset "sized for one GPU-day" has to fit (issue: the reproduce preset)
GPU_DAY_HOURS = 24.0


def gpu_day_line(total: Totals, device: str = "h100") -> str:
    """Whether one H100 day holds the priced jobs run one after another, and, where it does not,
    the factor on the priced rates that would."""
    hours = total.hours[device]
    if hours <= GPU_DAY_HOURS:
        return (f"One H100 day ({GPU_DAY_HOURS:.0f} h) holds it by this estimate: {_hours(hours)}, "
                "one job after another.")
    factor = hours / GPU_DAY_HOURS
    return (f"One H100 day ({GPU_DAY_HOURS:.0f} h) does not hold it by this estimate: {factor:.1f} GPU-days one job "
            f"after another; a day holds it at {factor:.1f}x the rates priced here.")


def _hours(h: float) -> str:
    if h < 1 / 60:
        return f"{h * 3600:.0f} s"
    if h < 1:
        return f"{h * 60:.1f} min"
    return f"{h:,.1f} h"


def _bytes(b: float) -> str:
    for unit, size in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if b >= size:
            return f"{b / size:,.1f} {unit}"
    return f"{b:.0f} B"


def _mark(basis: str) -> str:
    return {MEASURED: " (m)", TABLE: "", SCALED: " (s)", ASSUMED: " (a)"}[basis]


def render_cost(preset: str | None, jobs: Sequence[Job], table: Throughput) -> str:
    """The price table: a line per experiment group and the total, then what each mark means."""
    def header(title: str) -> str:
        return (f"{title:<22} {'jobs':>5} {'CPU h (2 cores)':>18} {'H100 h':>14} {'checkpoints':>12} "
                f"{'records':>10} {'prepared':>10}")

    lines = [f"Price of preset {preset} (device-hours of the priced jobs, run one after another):", header("group")]

    def line(name: str, t: Totals) -> str:
        return (f"{name:<22} {t.jobs:>5} {_hours(t.hours['cpu-2core']) + _mark(t.basis['cpu-2core']):>18} "
                f"{_hours(t.hours['h100']) + _mark(t.basis['h100']):>14} {_bytes(t.disk['checkpoints']):>12} "
                f"{_bytes(t.disk['records']):>10} {_bytes(t.disk['prepared']):>10}")

    for name, t in by_group(jobs).items():
        lines.append(line(name, t))
    total = totals(jobs)
    lines.append(line("total", total))
    lines.append(summary_line(total))
    lines += ["", header("rule")]
    lines += [line(name, t) for name, t in by_rule(jobs).items()]
    lines += [gpu_day_line(total), ""]
    lines += ["marks: (m) measured by the jobs' benchmark files, (s) scaled from FLOPs (the rate of the "
              "model nearest in FLOPs), (a) a rate assumed, its assumption below; unmarked: the model's own "
              f"measured row of {THROUGHPUT_TABLE}",
              "not priced: checks, corruptions, constructions, tables, figures (see docs/usage.md)"]
    lines += rate_lines(jobs, table)
    return "\n".join(lines)


def rate_lines(jobs: Sequence[Job], table: Throughput) -> list[str]:
    """The basis of each rate the price used (its row's provenance), the process starts, and the
    shares AutoAttack's cascades were priced with."""
    used = {row: None for job in jobs for rows in job.rows.values() for row in rows}
    lines = ["rates used (per device kind, the rows of the throughput table):"]
    lines += [f"- {row.provenance()}" for row in sorted(used, key=lambda r: (r.device, r.model, r.task, r.precision))]
    lines.append("- process start per job: " + ", ".join(f"{d} {s:g} s" for d, s in table.job_start_s.items())
                 + f" ({THROUGHPUT_TABLE}, job_start_s)")
    shares = sorted({c for job in jobs for c in job.cascade})
    if shares:
        lines.append("AutoAttack priced as its cascade runs (each attack on the share still robust when it starts):")
        lines += [f"- {c}" for c in shares]
    return lines


def summary_line(total: Totals) -> str:
    """One line of totals: what the preflight screen shows."""
    return (f"Estimated price: {_hours(total.hours['cpu-2core'])} on a 2-core CPU{_mark(total.basis['cpu-2core'])} "
            f"or {_hours(total.hours['h100'])} on one H100{_mark(total.basis['h100'])}, "
            f"{_bytes(sum(total.disk.values()))} of disk ({total.jobs} priced jobs, {total.measured} measured)")


def price(params: Params, runs: Sequence[RunSpec], zoo: Sequence[RunSpec], root: str | Path = ".",
          table: str | Path | None = None, measured: bool = True) -> tuple[list[Job], Throughput]:
    """The priced jobs of a plan in the project folder `root`, its benchmark files applied
    (`measured`: on the device kind of this machine, where the table prices that kind)."""
    throughput = load_throughput(Path(root) / (table or THROUGHPUT_TABLE))
    jobs = plan_jobs(params, runs, zoo, throughput, root=root if measured else None)
    device = local_device()
    if measured and device in DEVICES:
        apply_measurements(jobs, root, device)
    return jobs, throughput


# ---------------------------------------------------------------- the README's table of the presets
START, END = "<!-- preset prices: start -->", "<!-- preset prices: end -->"


def preset_summary(path: Path) -> str:
    """The first sentence of a preset file's leading comment: what the preset shows."""
    comment = []
    for line in path.read_text().splitlines():
        if not line.startswith("#"):
            break
        comment.append(line.lstrip("#").strip())
    text = " ".join(comment)
    head, dot, _ = text.partition(". ")
    return (head + "." if dot else text).replace("|", "/")


def _preset_price(root: Path, preset: str) -> tuple[int, list[Job], Throughput]:
    """(runs, priced jobs, throughput table) of a preset of the project `root`, by the table alone:
    no benchmark file of this machine enters a generated doc."""
    from study.config import load_params, plan_runs
    from study.config.zoo import plan_zoo

    params = load_params(root / "params.yaml", {"preset": preset}, presets_dir=root / "workflow/presets",
                         schema_path=root / "workflow/schemas/params.schema.yaml")
    runs = plan_runs(params)
    jobs, table = price(params, runs, plan_zoo(params), root, measured=False)
    return len(runs), jobs, table


def presets_markdown(root: str | Path = ".") -> str:
    """A row per preset file of workflow/presets (what it shows, its runs, its price by the
    table alone)."""
    from study.config.params import available_presets

    root = Path(root)
    presets = root / "workflow/presets"
    lines = ["| preset | what it shows | runs | CPU h (2 cores) | H100 h | disk |", "|---|---|---:|---:|---:|---:|"]
    for preset in available_presets(presets):
        runs, jobs, _ = _preset_price(root, preset)
        t = totals(jobs)
        lines.append(f"| `{preset}` | {preset_summary(presets / f'{preset}.yaml')} | {runs} "
                     f"| {_hours(t.hours['cpu-2core'])}{_mark(t.basis['cpu-2core'])} "
                     f"| {_hours(t.hours['h100'])}{_mark(t.basis['h100'])} | {_bytes(sum(t.disk.values()))} |")
    return "\n".join(lines) + "\n"


def rewrite_section(text: str, section: str) -> str:
    """`text` with the part between START and END replaced by `section`."""
    return replace_marked(text, START, END, section)


def _price_markers(preset: str) -> tuple[str, str]:
    """The markers of a doc's block holding `study plan --cost --preset PRESET`'s table."""
    return f"<!-- price of preset {preset}: start -->", f"<!-- price of preset {preset}: end -->"


PRICE_BLOCK = re.compile(re.escape(_price_markers("NAME")[0]).replace("NAME", r"(\w+)"))


def price_block(preset: str, root: str | Path = ".") -> str:
    """The fenced output of `study plan --cost --preset PRESET`, priced by the table alone."""
    _, jobs, table = _preset_price(Path(root), preset)
    return f"```text\n{render_cost(preset, jobs, table)}\n```\n"


def rewrite_prices(text: str, root: str | Path = ".") -> str:
    """`text` with its table of every preset's price (START ... END) and each preset's price block
    (`<!-- price of preset NAME: start -->` ... `: end -->`) regenerated; ValueError when it has none."""
    names = PRICE_BLOCK.findall(text)
    if START not in text and not names:
        raise ValueError(f"no {START} ... {END} markers and no '{_price_markers('NAME')[0]}' block")
    if START in text:
        text = rewrite_section(text, presets_markdown(root))
    for name in names:
        text = replace_marked(text, *_price_markers(name), price_block(name, root))
    return text


# ---------------------------------------------------------------- the estimate against the measurements
def _rule_of(benchmark: Path, base: Path) -> str:
    """The rule family of a benchmark file: the first folder under benchmarks/, or its name."""
    parts = benchmark.relative_to(base).parts
    return parts[0] if len(parts) > 1 else benchmark.stem


#: the ratio report's row of the jobs that price AutoAttack alone (counted in their rule's row too)
AUTOATTACK_ROW = "of which AutoAttack (cascade rule)"


def ratio_report(jobs: Sequence[Job], root: str | Path, device: str) -> tuple[str, dict[str, float]]:
    """(Markdown, {rule: ratio}) of the estimate on `device` over the seconds the jobs' benchmark
    files measured under `root`, per rule and in total; the rules the estimate does not price
    are listed with their measured seconds and share."""
    root = Path(root)
    est: dict[str, float] = {}
    measured: dict[str, float] = {}
    counts: dict[str, int] = {}
    aa = [0.0, 0.0, 0]  # AutoAttack's jobs: estimated s, measured s, jobs
    priced = set()
    for job in jobs:
        seconds = read_benchmark(root / job.benchmark)
        if seconds is None:
            continue
        priced.add((root / job.benchmark).resolve())
        est[job.rule] = est.get(job.rule, 0.0) + job.seconds[device]
        measured[job.rule] = measured.get(job.rule, 0.0) + seconds
        counts[job.rule] = counts.get(job.rule, 0) + 1
        if job.autoattack:
            # AutoAttack's jobs again on their own: the cascade rule's ratio, part of its rule's row
            aa[0] += job.seconds[device]
            aa[1] += seconds
            aa[2] += 1
    other: dict[str, float] = {}
    # the shared jobs' (results/benchmarks), and those of the zoo and of each preset's summary jobs
    # (results/zoo/benchmarks, results/<preset>/benchmarks)
    for base in (root / "results" / BENCHMARKS, *sorted((root / "results").glob(f"*/{BENCHMARKS}"))):
        for path in sorted(base.rglob("*.tsv")) if base.is_dir() else []:
            if path.resolve() not in priced and (seconds := read_benchmark(path)) is not None:
                other[_rule_of(path, base)] = other.get(_rule_of(path, base), 0.0) + seconds
    ratios = {rule: est[rule] / measured[rule] for rule in est if measured[rule] > 0}
    total_est, total_measured = sum(est.values()), sum(measured.values())
    if total_measured > 0:
        ratios["total"] = total_est / total_measured
    lines = [f"# Estimate against measurement ({device})", "",
             "| rule | jobs | estimated s | measured s | estimate / measured |", "|---|---:|---:|---:|---:|"]
    for rule in est:
        lines.append(f"| {rule} | {counts[rule]} | {est[rule]:.1f} | {measured[rule]:.1f} "
                     f"| {ratios.get(rule, float('nan')):.2f} |")
    if aa[2] and aa[1] > 0:
        ratios[AUTOATTACK_ROW] = aa[0] / aa[1]
        lines.append(f"| {AUTOATTACK_ROW} | {aa[2]} | {aa[0]:.1f} | {aa[1]:.1f} | {ratios[AUTOATTACK_ROW]:.2f} |")
    lines.append(f"| total (priced) | {sum(counts.values())} | {total_est:.1f} | {total_measured:.1f} "
                 f"| {ratios.get('total', float('nan')):.2f} |")
    unpriced = sum(other.values())
    share = unpriced / (unpriced + total_measured) if unpriced + total_measured > 0 else 0.0
    lines += ["", f"Not priced (measured only): {unpriced:.1f} s, {100 * share:.0f}% of the measured time: "
              + ", ".join(f"{rule} {s:.1f} s" for rule, s in sorted(other.items(), key=lambda kv: -kv[1]))]
    return "\n".join(lines) + "\n", ratios
