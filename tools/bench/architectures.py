"""Which architecture buys the demo the most accuracy per CPU second: each candidate trained with
the demo preset's own recipe (its baseline group's standard and PGD-AT run configs, only the model
swapped), one `study train` process per run on one thread, two at a time as the demo runs them;
then each model evaluated clean and under PGD-20 (8/255) on the same test images. FLOPs per image
(`count_flops`) and each process's own CPU seconds (from the kernel, so a busy machine stretches
the wall time but not the count) stand beside the accuracies.

    python -m tools.bench.architectures --data data/prepared/cifar10-jpeg.pt \\
        --models small_cnn small_cnn_s2 --out results/bench/architectures.json

The JSON holds every number; a markdown table goes beside it (.md).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from study.config.types import RunConfig, parse
from study.io import atomic_write_json, atomic_write_text

#: the demo's published target evaluation: PGD-20, eps 8/255, step 2/255 (params.yaml `pgd20`)
PGD20 = {"name": "pgd20", "type": "pgd", "norm": "linf", "eps": 8 / 255, "alpha": 2 / 255, "steps": 20,
         "restarts": 1}
CLEAN = {"name": "clean", "type": "clean"}


def demo_run_configs(preset: str = "demo", group: str = "baseline") -> dict[str, dict]:
    """The preset's standard and PGD-AT CIFAR-10 run configs of `group`, by method."""
    from study.config import load_params, plan_runs

    runs = [spec for spec in plan_runs(load_params(overrides={"preset": preset}))
            if group in spec.groups and spec.dataset == "cifar10"]
    configs = {spec.run.method: dict(spec.config) for spec in runs}  # as `study train --run-config` takes it
    missing = {"standard", "pgd_at"} - set(configs)
    if missing:
        raise ValueError(f"preset {preset!r} group {group!r} has no CIFAR-10 {sorted(missing)} run")
    return {m: configs[m] for m in ("standard", "pgd_at")}


def _study(*args: str) -> tuple[float, float]:
    """Run `study ARGS` to completion: (wall seconds, CPU seconds of that process)."""
    start = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-m", "study.cli", *args], stderr=subprocess.PIPE, text=True)
    _, status, usage = os.wait4(proc.pid, 0)
    err = proc.stderr.read() if proc.stderr else ""
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode:
        raise RuntimeError(f"study {' '.join(args[:1])} failed ({proc.returncode}): {err.strip()[-2000:]}")
    return time.perf_counter() - start, usage.ru_utime + usage.ru_stime


def _class_accuracies(records: Path) -> list[float]:
    import pandas as pd

    from study.data.classes import CIFAR10_CLASS_NAMES
    from study.metrics.classwise import class_accuracy

    return class_accuracy(pd.read_parquet(records), CIFAR10_CLASS_NAMES)["acc"].astype(float).tolist()


def _train_and_evaluate(job: tuple[str, str, dict], data: Path, work: Path, test_per_class: int) -> dict:
    model, method, cfg = job
    run_dir = work / f"{model}-{method}"
    config = {**cfg, "model": model}
    run = parse(RunConfig, config, "architecture bench run config")
    wall, cpu = _study("train", "--threads", "1", "--no-progress", "--data", str(data),
                       "--run-dir", str(run_dir), "--run-config", json.dumps(config))
    result = {"model": model, "method": method, "train_wall_s": round(wall, 1), "train_cpu_s": round(cpu, 1),
              "epochs": run.epochs, "train_per_class": run.train_per_class}
    evaluations = [CLEAN, PGD20] if method == "pgd_at" else [CLEAN]
    for ev in evaluations:
        out = run_dir / f"{ev['name']}.parquet"
        _study("evaluate", "--threads", "1", "--no-progress", "--data", str(data), "--run-dir", str(run_dir),
               "--evaluation", json.dumps({**ev, "test_per_class": test_per_class}), "--out", str(out))
        accs = _class_accuracies(out)
        result[ev["name"]] = {"mean": sum(accs) / len(accs), "worst": min(accs), "best": max(accs),
                              "per_class": accs}
    return result


def _flops(model: str) -> int:
    from study.models.registry import build_model, count_flops

    return count_flops(build_model(model, 10), (3, 32, 32))


def compare(models: Sequence[str], data: Path, work: Path, test_per_class: int, preset: str = "demo",
            parallel: int = 2) -> dict:
    """Train and evaluate every (model, method) of the preset's baseline; the report dict."""
    configs = demo_run_configs(preset)
    jobs = [(model, method, cfg) for model in models for method, cfg in configs.items()]
    # PGD-AT runs first: the longest jobs start first, as in the demo.
    jobs.sort(key=lambda job: job[1] != "pgd_at")
    start = time.perf_counter()
    with ThreadPoolExecutor(parallel) as pool:
        results = list(pool.map(lambda job: _train_and_evaluate(job, data, work, test_per_class), jobs))
    rows = []
    for model in models:
        std = next(r for r in results if r["model"] == model and r["method"] == "standard")
        at = next(r for r in results if r["model"] == model and r["method"] == "pgd_at")
        rows.append({"model": model, "mflops_per_image": _flops(model) / 1e6, "standard": std, "pgd_at": at,
                     "pgd20_points_per_cpu_minute": 100 * at["pgd20"]["mean"] / (at["train_cpu_s"] / 60)})
    return {"preset": preset, "data": str(data), "test_per_class": test_per_class, "parallel": parallel,
            "wall_s": round(time.perf_counter() - start, 1), "recipe": configs, "rows": rows}


def markdown(report: dict) -> str:
    lines = [f"Preset `{report['preset']}`'s baseline recipe, {report['parallel']} runs at a time on one thread "
             f"each; test: {report['test_per_class']} images per class; CPU s: the training process's own.", "",
             "| model | MFLOPs/image | standard: CPU s | clean | PGD-AT: CPU s | clean | PGD-20 | worst class "
             "PGD-20 | PGD-20 points per CPU min |", "|---|---|---|---|---|---|---|---|---|"]
    for row in report["rows"]:
        std, at = row["standard"], row["pgd_at"]
        cells = [row["model"], f"{row['mflops_per_image']:.1f}", f"{std['train_cpu_s']:.0f}",
                 f"{100 * std['clean']['mean']:.1f}%", f"{at['train_cpu_s']:.0f}", f"{100 * at['clean']['mean']:.1f}%",
                 f"{100 * at['pgd20']['mean']:.1f}%", f"{100 * at['pgd20']['worst']:.0f}%",
                 f"{row['pgd20_points_per_cpu_minute']:.1f}"]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.bench.architectures", description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", required=True, type=Path, help="prepared CIFAR-10 file (study prepare)")
    parser.add_argument("--models", nargs="+", default=["small_cnn", "small_cnn_s2"])
    parser.add_argument("--preset", default="demo")
    parser.add_argument("--test-per-class", type=int, default=100)
    parser.add_argument("--work", type=Path, default=Path("results/bench/architectures"),
                        help="run folders of the candidates")
    parser.add_argument("--out", type=Path, default=Path("results/bench/architectures.json"))
    args = parser.parse_args(argv)
    from study.models.registry import MODEL_NAMES

    bad = [m for m in args.models if m not in MODEL_NAMES]
    if bad:
        parser.exit(2, f"unknown model(s) {bad}; valid: {', '.join(MODEL_NAMES)}\n")
    if not args.data.exists():
        parser.exit(2, f"no prepared dataset at {args.data} (study prepare writes it)\n")
    report = compare(args.models, args.data, args.work, args.test_per_class, args.preset)
    atomic_write_json(args.out, report)
    atomic_write_text(args.out.with_suffix(".md"), markdown(report))
    print(markdown(report))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
