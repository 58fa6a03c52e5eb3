"""The bench's numbers: one side's throughput record, the accuracy check, the Markdown table."""

from __future__ import annotations

import math
from collections.abc import Mapping
from pathlib import Path


def side_record(images: int, seconds: float, flops_per_image: float, basis: str) -> dict:
    """Throughput and achieved FLOP/s of one side of a task (`add_fractions` adds the fraction
    of peak once the peak is final)."""
    rate = images / seconds
    return {"images": int(images), "seconds": float(seconds), "images_per_s": rate,
            "flops_per_image": float(flops_per_image), "flop_per_s": flops_per_image * rate, "peak_basis": basis}


def add_fractions(tasks: Mapping[str, dict], peak: Mapping[str, float]) -> None:
    """Each side's FLOP/s over the measured peak of its basis (failed tasks have none)."""
    for r in tasks.values():
        if r.get("failed"):
            continue
        for rec in (r["engine"], r["reference"], *(r.get("engine_by_compile") or {}).values()):
            rec["fraction_of_peak"] = rec["flop_per_s"] / peak[rec["peak_basis"]]


def accuracy_check(engine: Mapping[str, float], reference: Mapping[str, float], n: int) -> dict:
    """Differences of the two models' accuracies against 3 binomial standard errors of a
    difference of two independent accuracies on n images (floor 0.02)."""
    out: dict = {"n": n, "engine": dict(engine), "reference": dict(reference), "metrics": {}}
    ok = True
    for metric in engine:
        p = (engine[metric] + reference[metric]) / 2
        tol = max(0.02, 3 * math.sqrt(2) * math.sqrt(p * (1 - p) / n))
        diff = engine[metric] - reference[metric]
        out["metrics"][metric] = {"difference": diff, "tolerance": tol, "ok": abs(diff) <= tol}
        ok &= abs(diff) <= tol
    out["ok"] = bool(ok)
    return out


def _load(x: float | None) -> str:
    return "n/a" if x is None else f"{x:.2f}"


def _num(x: float) -> str:
    return f"{x:.3g}" if x < 1000 else f"{x:,.0f}"


def markdown(report: Mapping) -> str:
    """A table of the tasks with the settings and hardware above it and the accuracy check below."""
    s, hw, peak = report["settings"], report["hardware"], report["peak"]
    peaks = ", ".join(f"{k} {v / 1e9:.1f} GFLOP/s" + (f" (start {peak['start'][k] / 1e9:.1f}, end "
                                                       f"{peak['end'][k] / 1e9:.1f})" if "start" in peak else "")
                      for k, v in peak["flops"].items())
    lines = [
        "# study bench: our engine against a plain reference loop",
        "",
        f"- model `{s['model']}`, forward {report['model']['forward_flops'] / 1e9:.3g} GFLOPs/image; "
        f"data {s['data']} ({s['train_images']} train / {s['test_images']} test images); "
        f"batch {s['batch_size']}; seed {s['seed']}",
        f"- hardware: {hw['device_name']}; {hw['cpu_model']}; torch {hw['torch']}; "
        f"{hw['threads']} threads" + (f"; CUDA {hw['cuda_name']}" if hw.get("cuda_name") else "")
        + f"; 1-min load average {_load(hw.get('load_average_1min_start'))} at the start, "
        f"{_load(hw.get('load_average_1min_end'))} at the end",
        f"- measured peak ({peak['method']}): {peaks}",
        f"- peak basis: {', '.join(peak.get('basis_used') or ['none'])} ({peak.get('basis_rule', '')})",
        "- training tasks: the second epoch (the first carries warm-up); images/s are training "
        "images per second, evaluations test images per second",
        "",
        "| task | engine img/s | reference img/s | speedup | engine s | reference s | GFLOP/img "
        "| engine GFLOP/s (of peak) | reference GFLOP/s (of peak) |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for task, r in report["tasks"].items():
        if r.get("failed"):
            lines.append(f"| {task} | failed: {r['error'].replace('|', '/')} | | | | | | | |")
            continue
        e, ref = r["engine"], r["reference"]
        lines.append(
            f"| {task} | {_num(e['images_per_s'])} | {_num(ref['images_per_s'])} | {r['speedup']:.2f}x "
            f"| {e['seconds']:.2f} | {ref['seconds']:.2f} | {e['flops_per_image'] / 1e9:.3g} "
            f"| {e['flop_per_s'] / 1e9:.3g} ({100 * e['fraction_of_peak']:.1f}% {e['peak_basis']}) "
            f"| {ref['flop_per_s'] / 1e9:.3g} ({100 * ref['fraction_of_peak']:.1f}% {ref['peak_basis']}) |")
        for mode, c in (r.get("engine_by_compile") or {}).items():
            lines.append(f"| {task}, compile {mode} | {_num(c['images_per_s'])} | {_num(ref['images_per_s'])} "
                         f"| {c['speedup']:.2f}x | {c['seconds']:.2f} | {ref['seconds']:.2f} "
                         f"| {c['flops_per_image'] / 1e9:.3g} | {c['flop_per_s'] / 1e9:.3g} | |")
    lines += _extras_lines(report) + _epoch_lines(report) + _identity_lines(report)
    acc = report.get("accuracy")
    if acc and acc.get("failed"):
        lines += ["", f"Accuracy check failed: {acc['error']}"]
    elif acc:
        lines += ["", f"Accuracy after {s['accuracy_epochs']} epochs of PGD-10 AT, on the {acc['n']} test "
                  "images (both models evaluated with the package's `predict`):", "",
                  "| metric | engine | reference | difference | tolerance | ok |", "|---|---:|---:|---:|---:|---|"]
        for metric, m in acc["metrics"].items():
            lines.append(f"| {metric} | {acc['engine'][metric]:.3f} | {acc['reference'][metric]:.3f} "
                         f"| {m['difference']:+.3f} | {m['tolerance']:.3f} | {'yes' if m['ok'] else 'no'} |")
        lines += ["", f"accuracy_ok: {str(report['accuracy_ok']).lower()}"]
    return "\n".join(lines) + "\n"


def _epoch_lines(report: Mapping) -> list[str]:
    """The engine's timed epoch in full: the loop beside the per-epoch evaluation and checkpoint."""
    rows = {t: r for t, r in report["tasks"].items() if r.get("engine_epoch")}
    if not rows:
        return []
    lines = ["", "Engine's timed epoch in full (the loop is the engine time above; the epoch adds a clean "
             "evaluation of 1 image per class and the checkpoint write):", "",
             "| task | loop s | evaluation + checkpoint s (re-timed) | whole epoch s | share of the epoch "
             "| speedup with them |", "|---|---:|---:|---:|---:|---:|"]
    for t, r in rows.items():
        b, whole = r["engine_epoch"], r.get("speedup_whole_epoch")
        share = b["eval_and_checkpoint_fraction"]
        lines.append(f"| {t} | {b['loop_seconds']:.2f} | {b['eval_and_checkpoint_seconds']:.2f} "
                     f"({b['eval_and_checkpoint_retimed_seconds']:.2f}) | {b['epoch_seconds']:.2f} "
                     f"| {'n/a' if share is None else f'{100 * share:.1f}%'} "
                     f"| {'n/a' if whole is None else f'{whole:.2f}x'} |")
    return lines


def _identity_lines(report: Mapping) -> list[str]:
    r = report["tasks"].get("autoattack_eval") or {}
    ps = r.get("per_sample")
    if not ps:
        return []
    return ["", f"AutoAttack, both sides seed {ps['seed']['engine']}: {ps['disagreements']} of {ps['n']} samples' "
            f"robust flags differ between the engine and pyautoattack's run_standard_evaluation (robust: engine "
            f"{ps['robust_engine']}, reference {ps['robust_reference']}; identical: "
            f"{'yes' if ps['identical'] else 'no'})."]


def _extras_lines(report: dict) -> list[str]:
    """The profile summaries and the concurrent throughput, where the bench measured them."""
    lines = []
    if report["tasks"]:
        modes = {r.get("compile") for r in report["tasks"].values() if r.get("compile")}
        if modes:
            lines += ["", f"Headline engine rows: speed.compile {', '.join(sorted(modes))}."]
    for p in report.get("profile") or []:
        if p.get("failed"):
            lines += ["", f"Profile, compile {p['compile']}: failed: {p['error']}"]
            continue
        lines += ["", f"Profile of the PGD-10 AT step, compile {p['compile']}: {p['host_seconds_per_step']:.4f} s "
                  f"per step, device busy {100 * p['device_busy_fraction']:.1f}% ({p['busy_basis']}); "
                  f"top operators in `{Path(p['table']).name}`."]
    c = report.get("concurrent")
    if c and c.get("failed"):
        lines += ["", f"Concurrent training processes: failed: {c['error']}"]
    elif c:
        lines += ["", f"{c['k']} training processes at once ({c['method']}, compile {c['compile']}, "
                  f"{c['threads']['each_of_k']} threads each): {c['aggregate_images_per_s']:.3g} img/s together "
                  f"against {c['one_images_per_s']:.3g} img/s for one alone, {c['aggregate_over_one']:.2f}x, over "
                  f"their timed epochs ({c['k_processes']['span_seconds']:.2f} s from the first start to the last "
                  f"end; start-up excluded: {c['aggregate_with_startup_images_per_s']:.3g} img/s with it)."]
    return lines
