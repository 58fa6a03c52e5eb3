"""The price before the run (study.cost, `study plan --cost`, the preflight screen, the README's
table of the presets) and the benchmark file of every rule."""

from __future__ import annotations

import math
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from study.config import load_params, plan_runs
from study.config.zoo import plan_zoo
from study.cost import (
    ASSUMED,
    AUTOATTACK_ROW,
    DEVICES,
    GPU_DAY_HOURS,
    MEASURED,
    SCALED,
    TABLE,
    THROUGHPUT_TABLE,
    Totals,
    apply_measurements,
    benchmark_of,
    by_rule,
    gpu_day_line,
    load_throughput,
    plan_jobs,
    presets_markdown,
    price,
    price_block,
    render_cost,
    rewrite_prices,
    rewrite_section,
    totals,
)
from study.models.registry import MODELS
from study.record_names import record_name

ROOT = Path(__file__).resolve().parents[2]


def _params(preset: str) -> dict:
    return load_params(ROOT / "params.yaml", {"preset": preset}, presets_dir=ROOT / "workflow/presets",
                       schema_path=ROOT / "workflow/schemas/params.schema.yaml")


def test_every_row_of_the_throughput_table_names_who_measured_it():
    from tools.bench.run import ALL_TASKS

    data = yaml.safe_load((ROOT / THROUGHPUT_TABLE).read_text())
    assert set(data["job_start_s"]) == set(DEVICES)
    for row in data["rows"]:
        assert row["model"] in MODELS and row["task"] in ALL_TASKS and row["device"] in DEVICES, row
        assert all(str(row[k]).strip() for k in ("hardware", "torch", "date")), row
        assert str(row.get("commit", "")).strip() or str(row.get("engine", "")).strip(), row
        assert row.get("basis", "measured") == "measured" or str(row.get("assumption", "")).strip(), row
        assert re.fullmatch(r"\d{4}-\d{2}-\d{2}", str(row["date"])), row
        assert row["images_per_s"] > 0 and row["gflop_per_s"] > 0


@pytest.mark.parametrize("preset", ["ci", "demo", "paper"])
def test_every_run_is_priced_finite_and_positive_on_every_device(preset):
    params = _params(preset)
    runs, zoo = plan_runs(params), plan_zoo(params)
    table = load_throughput(ROOT / THROUGHPUT_TABLE)
    jobs = plan_jobs(params, runs, zoo, table)
    assert {j.benchmark for j in jobs if j.rule == "train"} == {f"results/benchmarks/train/{r.run_id}.tsv"
                                                                for r in runs}
    for job in jobs:
        assert all(math.isfinite(job.seconds[d]) and job.seconds[d] > 0 for d in DEVICES), job
    total = totals(jobs)
    assert total.hours["cpu-2core"] > 0 and total.disk["checkpoints"] > 0 and total.disk["prepared"] > 0
    # the preact_resnet18 rows are its own; small models are scaled from the nearest measured one
    assert {j.basis["cpu-2core"] for j in jobs} <= {TABLE, SCALED}


def test_evaluate_jobs_mirror_the_workflows_logs():
    """A job's benchmark file is its log's path under benchmarks/ (the rules write both)."""
    params = _params("ci")
    runs = plan_runs(params)
    jobs = plan_jobs(params, runs, [], load_throughput(ROOT / THROUGHPUT_TABLE))
    shards = {e: params.evaluations[e].shards if e in params.evaluations else 1 for r in runs for e in r.evaluations}
    expected = set()
    for r in runs:
        for cp in r.checkpoints:
            whole = sorted(e for e in r.evaluations if cp != "last" or shards[e] <= 1)
            if whole:
                expected.add(f"results/logs/evaluate/{r.run_id}/{record_name('+'.join(whole), cp)}.log")
            for e in (e for e in r.evaluations if cp == "last" and shards[e] > 1):
                expected |= {f"results/logs/evaluate/{r.run_id}/shards/{e}/{i}-of-{shards[e]}.log"
                             for i in range(shards[e])}
    assert {j.benchmark for j in jobs if j.rule.startswith("evaluate")} == {benchmark_of(log) for log in expected}


def test_a_jobs_benchmark_file_replaces_its_estimate(tmp_path):
    params = _params("ci")
    runs = plan_runs(params)
    jobs = plan_jobs(params, runs, [], load_throughput(ROOT / THROUGHPUT_TABLE))
    job = next(j for j in jobs if j.rule == "train")
    bench = tmp_path / job.benchmark
    bench.parent.mkdir(parents=True)
    bench.write_text("s\th:m:s\tmax_rss\n12.5\t0:00:12\t300\n")
    assert apply_measurements(jobs, tmp_path, "cpu-2core") == 1
    assert job.seconds["cpu-2core"] == 12.5 and job.basis["cpu-2core"] == MEASURED
    assert job.basis["h100"] != MEASURED
    text = render_cost("ci", jobs, load_throughput(ROOT / THROUGHPUT_TABLE))
    assert "(m)" in text and "1 measured" in text


def test_the_ratio_report_holds_the_estimate_against_each_rules_benchmarks(tmp_path):
    from study.cost import ratio_report

    params = _params("ci")
    jobs = plan_jobs(params, plan_runs(params), [], load_throughput(ROOT / THROUGHPUT_TABLE))
    for job in jobs:
        (tmp_path / job.benchmark).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / job.benchmark).write_text(f"s\th:m:s\n{job.seconds['cpu-2core'] * 2:.4f}\t0:00:01\n")
    figure = tmp_path / "results/ci/benchmarks/figures/fig01/x.tsv"  # a preset summary job's
    figure.parent.mkdir(parents=True)
    figure.write_text("s\th:m:s\n3.0\t0:00:03\n")
    text, ratios = ratio_report(jobs, tmp_path, "cpu-2core")
    # the ci's AutoAttack is sharded: its jobs price AutoAttack alone, and get the cascade rule's row
    assert any(j.autoattack for j in jobs)
    assert set(ratios) == {j.rule for j in jobs} | {"total", AUTOATTACK_ROW}
    assert all(r == pytest.approx(0.5, rel=1e-3) for r in ratios.values())
    assert f"| {AUTOATTACK_ROW} | {sum(j.autoattack for j in jobs)} |" in text
    assert "| total (priced) |" in text and "figures 3.0 s" in text

def test_plan_cost_prints_each_group_and_the_total():
    out = subprocess.run([sys.executable, "-m", "study.cli", "plan", "--cost", "--preset", "ci"], cwd=ROOT,
                         capture_output=True, text=True, check=True).stdout
    for group in {r.groups[0] for r in plan_runs(_params("ci"))}:
        assert re.search(rf"^{group}\s+\d+\s", out, re.M), group
    assert re.search(r"^total\s+\d+\s", out, re.M) and "Estimated price:" in out and "rates used" in out
    assert re.search(r"^- \w+ \w+ on cpu-2core \(fp32\): [\d,]+ GFLOP/s, measured: ", out, re.M)


def test_the_preflight_screen_shows_the_price():
    from study.preflight import preflight, price_line, render

    params = _params("ci")
    runs, zoo = plan_runs(params), plan_zoo(params)
    line = price_line(params, runs, zoo, ROOT)
    assert line.startswith("Estimated price:") and "H100" in line
    screen = render(params, preflight(params, runs, zoo, ROOT), len(runs), len(zoo), line)
    assert screen.splitlines()[1] == f"  {line}"


def test_readme_table_of_the_presets_is_the_generators():
    readme = (ROOT / "README.md").read_text()
    expected = rewrite_section(readme, presets_markdown(ROOT))
    assert readme == expected, "README.md's preset prices are stale: run `study plan --cost --write README.md`"
    presets = sorted(p.stem for p in (ROOT / "workflow/presets").glob("*.yaml"))
    assert [re.match(r"\| `(\w+)`", line).group(1) for line in presets_markdown(ROOT).splitlines()[2:]] == presets


def test_the_docs_price_of_the_reproduce_preset_is_the_generators():
    doc = (ROOT / "docs/usage.md").read_text()
    assert "<!-- price of preset reproduce: start -->" in doc
    stale = "docs/usage.md's price blocks are stale: run `study plan --cost --write docs/usage.md`"
    assert doc == rewrite_prices(doc, ROOT), stale


def test_a_price_block_is_rewritten_with_its_presets_table(tmp_path):
    doc = tmp_path / "prices.md"
    doc.write_text("intro\n<!-- price of preset ci: start -->\nSTALE-PRICE\n<!-- price of preset ci: end -->\noutro\n")
    subprocess.run([sys.executable, "-m", "study.cli", "plan", "--cost", "--write", str(doc)], cwd=ROOT, check=True)
    text = doc.read_text()
    assert "STALE-PRICE" not in text and text.startswith("intro\n") and text.endswith("outro\n")
    assert price_block("ci", ROOT) in text and "Price of preset ci" in text


@pytest.mark.parametrize("content", [None, "no markers here\n"])
def test_plan_write_names_the_file_it_cannot_rewrite_in_one_line(tmp_path, content):
    doc = tmp_path / "doc.md"
    if content is not None:
        doc.write_text(content)
    r = subprocess.run([sys.executable, "-m", "study.cli", "plan", "--cost", "--write", str(doc)], cwd=ROOT,
                       capture_output=True, text=True)
    assert r.returncode != 0 and "Traceback" not in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1 and str(doc) in r.stderr
    if content is not None:
        assert doc.read_text() == content and "price of preset NAME" in r.stderr


def test_the_rule_lines_add_up_to_the_total():
    params = _params("reproduce")
    jobs, _ = price(params, plan_runs(params), plan_zoo(params), ROOT, measured=False)
    rules = by_rule(jobs)
    assert set(rules) == {j.rule for j in jobs}
    for device in DEVICES:
        assert sum(t.hours[device] for t in rules.values()) == pytest.approx(totals(jobs).hours[device])
    assert sum(t.jobs for t in rules.values()) == len(jobs)


def _hours_totals(h100_hours: float, basis: str) -> Totals:
    return Totals(1, {"cpu-2core": 1.0, "h100": h100_hours}, {"cpu-2core": TABLE, "h100": basis}, {}, 0)


def test_one_gpu_day_is_held_to_the_priced_hours():
    assert "holds it by this estimate" in gpu_day_line(_hours_totals(GPU_DAY_HOURS, TABLE))
    line = gpu_day_line(_hours_totals(3 * GPU_DAY_HOURS, ASSUMED))
    assert "does not hold it" in line and "3.0 GPU-days" in line and "3.0x" in line


def test_the_readme_prices_ignore_this_machines_benchmarks(tmp_path, monkeypatch):
    params = _params("ci")
    runs = plan_runs(params)
    jobs, _ = price(params, runs, [], ROOT, measured=False)
    assert all(b != MEASURED for j in jobs for b in j.basis.values())


# ---------------------------------------------------------------- every rule writes a benchmark
def _rule_blocks() -> list[tuple[str, str]]:
    blocks = []
    for path in sorted((ROOT / "workflow/rules").glob("*.smk")):
        text = path.read_text()
        starts = [m.start() for m in re.finditer(r"^( *)rule\b.*:$", text, re.M)] + [len(text)]
        blocks += [(f"{path.name}:{text[a:b].splitlines()[0].strip()}", text[a:b])
                   for a, b in zip(starts, starts[1:], strict=False)]
    return blocks


def test_every_rule_that_runs_a_command_writes_its_benchmark_beside_its_log():
    """Each rule with a shell command (the targets that only gather files run none) declares a
    Snakemake benchmark file, its log's path under benchmarks/ with .tsv (study.cost.benchmark_of)."""
    blocks = [(name, b) for name, b in _rule_blocks() if re.search(r"^\s+shell:$", b, re.M)]
    assert len(blocks) >= 15
    for name, block in blocks:
        log = re.search(r"^\s+log:\n\s+(.+),\n", block, re.M)
        bench = re.search(r"^\s+benchmark:\n\s+(.+),\n", block, re.M)
        assert log and bench, f"{name}: no log or no benchmark"
        assert bench.group(1) == log.group(1).replace("/logs/", "/benchmarks/", 1)[: -len('.log"')] + '.tsv"', name


# ---------------------------------------------------------------- rates with provenance (issue 43)
def _row(**change) -> dict:
    row = {"model": "preact_resnet18", "task": "pgd10_at_epoch", "device": "h100", "images_per_s": 1.0,
           "gflop_per_s": 1.0, "hardware": "H", "torch": "2.11", "date": "2026-11-22", "commit": "abc1234"}
    return {k: v for k, v in {**row, **change}.items() if v is not None}


@pytest.mark.parametrize(("change", "message"), [
    ({"hardware": " "}, r"has no hardware: every rate names its provenance"),
    ({"torch": None}, r"missing|has no torch"),
    ({"commit": None}, r"has no commit or engine"),
    ({"basis": "assumed"}, r"is assumed but names no assumption"),
    ({"basis": "guessed"}, r"unknown basis 'guessed'; valid: measured, assumed"),
    ({"precision": "fp16"}, r"unknown precision 'fp16'; valid: fp32, bf16"),
    ({"gflop_per_s": 0}, r"rates must be positive"),
])
def test_a_row_without_its_provenance_is_refused_in_one_line(tmp_path, change, message):
    table = tmp_path / "throughput.yaml"
    table.write_text(yaml.safe_dump({"job_start_s": {"cpu-2core": 1.0, "h100": 1.0}, "rows": [_row(**change)]}))
    with pytest.raises((ValueError, TypeError), match=message) as err:
        load_throughput(table)
    assert "\n" not in str(err.value)
    # an engine names the code measured where no commit was recorded, and is enough
    table.write_text(yaml.safe_dump({"job_start_s": {}, "rows": [_row(commit=None, engine="before the rewrite")]}))
    assert load_throughput(table).rows[0].engine == "before the rewrite"


@pytest.mark.parametrize("preset", ["ci", "demo", "laptop", "paper", "reproduce"])
def test_every_price_takes_each_rate_from_a_row_that_names_its_provenance(preset):
    from study.workload import PROVENANCE

    params = _params(preset)
    table = load_throughput(ROOT / THROUGHPUT_TABLE)
    jobs = plan_jobs(params, plan_runs(params), plan_zoo(params), table)
    text = render_cost(preset, jobs, table)
    for job in (j for j in jobs if j.rule != "prepare"):
        for device in DEVICES:
            assert job.rows[device], (job.benchmark, device)
            for row in job.rows[device]:
                assert row in table.rows and all(str(getattr(row, k)).strip() for k in PROVENANCE)
                assert row.basis == "measured" or row.assumption
                # the price prints the basis of each rate it used
                assert f"- {row.provenance()}" in text
            assert (job.basis[device] == ASSUMED) == any(r.basis == "assumed" for r in job.rows[device])


def test_a_task_without_a_row_for_the_device_is_an_error_not_a_default(tmp_path):
    table = tmp_path / "throughput.yaml"
    table.write_text(yaml.safe_dump({"job_start_s": {}, "rows": [_row(device="cpu-2core")]}))
    with pytest.raises(ValueError, match=r"no h100 row for task 'pgd10_at_epoch'; rows exist for cpu-2core"):
        load_throughput(table).rate("preact_resnet18", "pgd10_at_epoch", "h100")


def test_a_bf16_run_is_priced_at_the_bf16_row_where_one_exists_else_at_fp32(tmp_path):
    rows = [_row(device="h100", gflop_per_s=10.0), _row(device="h100", precision="bf16", gflop_per_s=15.0,
                                                         basis="assumed", assumption="1.5x"),
            _row(device="cpu-2core", gflop_per_s=2.0)]
    table = tmp_path / "throughput.yaml"
    table.write_text(yaml.safe_dump({"job_start_s": {}, "rows": rows}))
    t = load_throughput(table)
    assert t.rate("preact_resnet18", "pgd10_at_epoch", "h100", "bf16") == (15e9, ASSUMED)
    assert t.rate("preact_resnet18", "pgd10_at_epoch", "h100", "fp32") == (10e9, TABLE)
    assert t.rate("preact_resnet18", "pgd10_at_epoch", "cpu-2core", "bf16") == (2e9, TABLE)


# ---------------------------------------------------------------- AutoAttack priced as its cascade runs
def _custom_autoattack():
    from study.config.evaluations import AutoAttackEvaluation

    return AutoAttackEvaluation(type="autoattack", norm="linf", eps=8 / 255, version="custom",
                                attacks=["apgd-ce", "apgd-t"], iterations=10, targets=3)


def test_autoattack_is_charged_each_attack_on_the_share_still_robust_when_it_starts():
    from study.workload import autoattack_forwards, eval_work, shares_from_records

    ev = _custom_autoattack()
    # 10 images: 2 wrong before any attack, 3 broken by APGD-CE, 1 by APGD-T, 4 robust
    broken_by = ["clean"] * 2 + ["apgd-ce"] * 3 + ["apgd-t"] + [""] * 4
    shares = shares_from_records(ev, broken_by, "hand")
    assert shares.shares == (("apgd-ce", 0.8), ("apgd-t", 0.5))
    # by hand: 1 clean forward + 2 x (0.8 x 10 APGD-CE steps + 0.5 x 3 targets x 10 APGD-T steps) = 47
    assert autoattack_forwards(ev, shares) == pytest.approx(47.0)
    flops, task = eval_work(ev, 100, 2.0, shares)
    assert task == "autoattack_eval" and flops == pytest.approx(100 * 47.0 * 2.0)
    # without shares (the scheduler's bound): every attack on every image, 1 + 2 x 40 = 81
    assert eval_work(ev, 100, 2.0)[0] == pytest.approx(100 * 81 * 2.0)


def test_autoattack_without_records_takes_the_expected_accuracies_and_says_so():
    from study.workload import EXPECTED_ACCURACY, autoattack_forwards, expected_shares

    ev = _custom_autoattack()
    clean, robust, source = EXPECTED_ACCURACY["adversarial"]
    shares = expected_shares(ev, "adversarial")
    assert shares.shares == (("apgd-ce", clean), ("apgd-t", robust)) and source in shares.describe()
    assert autoattack_forwards(ev, shares) == pytest.approx(1 + 2 * (clean * 10 + robust * 30))
    assert autoattack_forwards(ev, expected_shares(ev, "standard")) == pytest.approx(
        1 + 2 * EXPECTED_ACCURACY["standard"][0] * 10)
    with pytest.raises(ValueError, match=r"unknown kind of model 'robust'; valid: adversarial, standard"):
        expected_shares(ev, "robust")
    with pytest.raises(ValueError, match=r"broken_by values \['fab'\] are no attack of this cascade"):
        from study.workload import shares_from_records

        shares_from_records(ev, ["fab", ""], "hand")


def test_a_runs_own_autoattack_records_price_its_cascade(tmp_path):
    """Where the run's AutoAttack record exists, its broken_by gives the shares (the ci's sharded
    AutoAttack of its PGD-AT run): the job's price follows them, and says where they came from."""
    import pandas as pd

    from study.evaluate.records import write_records
    from study.workload import autoattack_forwards, expected_shares, shares_from_records

    params = _params("ci")
    runs = plan_runs(params)
    table = load_throughput(ROOT / THROUGHPUT_TABLE)
    run = next(r for r in runs if r.config["method"] == "pgd_at" and "autoattack" in r.evaluations)
    expected = [j for j in plan_jobs(params, runs, [], table) if j.autoattack and run.run_id in j.benchmark]
    broken_by = ["clean"] * 10 + ["apgd-ce"] * 25 + [""] * 5  # 40 images: ci's 4 per class
    path = tmp_path / "results/evaluations" / run.run_id / f"{record_name('autoattack', 'last')}.parquet"
    path.parent.mkdir(parents=True)
    frame = pd.DataFrame({"index": range(40), "label": [i % 10 for i in range(40)], "pred": [0] * 40,
                          "broken_by": broken_by})
    write_records(frame, path, {"run_id": run.run_id})
    measured = [j for j in plan_jobs(params, runs, [], table, root=tmp_path)
                if j.autoattack and run.run_id in j.benchmark]
    assert expected and len(measured) == len(expected)
    from study.config import resolve_evaluation
    from study.config.spec import EvaluationSpec

    ev = EvaluationSpec.parse(resolve_evaluation(params, "autoattack", dataset=run.dataset)).config
    shares = shares_from_records(ev, broken_by, "x")
    assert shares.shares == (("apgd-ce", 0.75), ("apgd-t", 0.125))
    start = table.job_start_s["cpu-2core"]
    ratio = autoattack_forwards(ev, shares) / autoattack_forwards(ev, expected_shares(ev, "adversarial"))
    for a, b in zip(expected, measured, strict=True):
        assert b.seconds["cpu-2core"] - start == pytest.approx((a.seconds["cpu-2core"] - start) * ratio)
        assert b.cascade and "this run's records" in b.cascade[0]


def test_slurm_requests_are_the_h100_price_times_the_stated_safety_factor():
    """study.resources asks for SAFETY x what study.workload prices the job at on one H100 (the
    rows and FLOP convention study.cost prices with), plus five minutes of start, within its floor and cap."""
    from study import resources
    from study.config import resolve_evaluation
    from study.config.spec import EvaluationSpec
    from study.resources import MAX_MINUTES, SAFETY, SLURM_DEVICE
    from study.workload import eval_work, train_work, work_seconds

    params = _params("reproduce")
    table = load_throughput(ROOT / THROUGHPUT_TABLE)
    run = next(r for r in plan_runs(params) if r.config["method"] == "trades_normalized")
    seconds, basis, rows = work_seconds(train_work(run.run), table, "preact_resnet18", SLURM_DEVICE, run.run.precision)
    assert rows and all(r.device == "h100" for r in rows)
    assert resources.train_minutes(run.run) == min(MAX_MINUTES, math.ceil(SAFETY * seconds / 60) + 5)
    ev = EvaluationSpec.parse(resolve_evaluation(params, "pgd20", dataset="cifar10")).config
    seconds, _, _ = work_seconds([eval_work(ev, 10_000 // 4, 1.11e9)], table, "preact_resnet18", SLURM_DEVICE)
    assert resources.evaluate_minutes(run.run, ev, shards=4) == max(10, math.ceil(SAFETY * seconds / 60) + 5)


def test_a_bench_report_gives_an_fp32_and_a_bf16_row_of_each_task():
    """tools.bench.throughput: the headline (fp32) engine and the fastest compile setting of each
    other precision, each its own row; the fp32 row names no precision (the default)."""
    from tools.bench.throughput import rows

    side = {"images_per_s": 100.0, "flop_per_s": 2e12}
    report = {"settings": {"model": "preact_resnet18", "train_images": 50000, "test_images": 1000},
              "hardware": {"cpu_model": "EPYC", "threads": 16, "cuda_name": "NVIDIA H100", "torch": "2.11",
                           "provenance": {"git_commit": "abcdef0123"}}, "started": "2026-12-01T10:00",
              "tasks": {"pgd10_at_epoch": {"precision": "fp32", "engine": side, "engine_by_precision": {
                  "bf16": {"off": {"images_per_s": 150.0, "flop_per_s": 3e12},
                           "default": {"images_per_s": 180.0, "flop_per_s": 3.6e12}}}}}}
    out = rows([report], "h100")
    assert [(r["task"], r.get("precision", "fp32"), r["images_per_s"], r["gflop_per_s"]) for r in out] == [
        ("pgd10_at_epoch", "bf16", 180.0, 3600.0), ("pgd10_at_epoch", "fp32", 100.0, 2000.0)]
    assert all(r["commit"] == "abcdef0" and r["date"] == "2026-12-01" for r in out)


def test_training_is_priced_on_the_images_its_validation_split_leaves_and_validates_each_epoch():
    """A reproduce run with CFA's 2% split and weight averaging (pgd_at_cfa), by hand: 200 epochs of
    PGD-10 (23F) on 49,000 images; each epoch a clean pass and PGD-10 (1 + 1 + 20 = 22F) on 1,000
    test images, and on the 1,000 validation images for the model and for its average."""
    from study.workload import train_work, validation_images

    params = _params("reproduce")
    run = next(r.run for r in plan_runs(params) if r.config["method"] == "pgd_at_cfa")
    forward = MODELS["preact_resnet18"].gflops_32 * 1e9
    assert validation_images(run, 50_000) == 1_000
    work = train_work(run)
    assert work == [(pytest.approx(200 * 49_000 * 23 * forward), "pgd10_at_epoch"),
                    (pytest.approx(200 * (1_000 + 2 * 1_000) * 22 * forward), "pgd20_eval")]
    plain = next(r.run for r in plan_runs(params) if r.config["method"] == "standard")
    assert validation_images(plain, 50_000) == 0
    assert train_work(plain)[0] == (pytest.approx(200 * 50_000 * 3 * forward), "standard_epoch")


def test_without_records_each_runs_cascade_takes_its_own_kinds_expected_accuracies():
    """A standard model's AutoAttack stops after its first attack (nothing stays robust); an
    adversarially trained one's runs on: the price says which expectation it took."""
    from study.cost import model_kind
    from study.workload import EXPECTED_ACCURACY

    params = _params("ci")
    runs = [r for r in plan_runs(params) if "autoattack" in r.evaluations]
    assert {model_kind(r) for r in runs} == {"standard", "adversarial"}
    jobs = plan_jobs(params, runs, [], load_throughput(ROOT / THROUGHPUT_TABLE))
    for run in runs:
        cascades = {c for j in jobs if run.run_id in j.benchmark for c in j.cascade}
        source = EXPECTED_ACCURACY["standard" if run.config["method"] == "standard" else "adversarial"][2]
        assert cascades and all(source in c for c in cascades), (run.run_id, cascades)
