"""The bench's numbers: one side's throughput record, the accuracy checks (engine against
reference; bf16 against fp32), the Markdown table."""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path

import numpy as np


def side_record(images: int, seconds: float, flops_per_image: float, basis: str) -> dict:
    """Throughput and achieved FLOP/s of one side of a task (`add_fractions` adds the fraction
    of peak once the peak is final)."""
    rate = images / seconds
    return {"images": int(images), "seconds": float(seconds), "images_per_s": rate,
            "flops_per_image": float(flops_per_image), "flop_per_s": flops_per_image * rate, "peak_basis": basis}


def timed_records(r: Mapping) -> Iterator[dict]:
    """Every timed record of a task: both sides' headline, the engine's other compile settings
    and the engine's other precisions (each of its compile settings)."""
    yield r["engine"]
    yield r["reference"]
    yield from (r.get("engine_by_compile") or {}).values()
    for by_mode in (r.get("engine_by_precision") or {}).values():
        yield from by_mode.values()


def named_records(tasks: Mapping[str, dict]) -> Iterator[dict]:
    """timed_records of every task that ran, each with its task and side named (what
    tools.bench.peak.honest_peak says when a record lifts the peak)."""
    for task, r in tasks.items():
        if r.get("failed"):
            continue
        sides = [("engine", r["engine"]), ("reference", r["reference"])]
        sides += [(f"engine, compile {m}", c) for m, c in (r.get("engine_by_compile") or {}).items()]
        sides += [(f"engine {p}, compile {m}", c) for p, by_mode in (r.get("engine_by_precision") or {}).items()
                  for m, c in by_mode.items()]
        for side, rec in sides:
            yield {**rec, "task": task, "side": side}


def add_fractions(tasks: Mapping[str, dict], peak: Mapping[str, float]) -> None:
    """Each side's FLOP/s over the peak of its basis (failed tasks have none); `peak` is
    tools.bench.peak.honest_peak's, which no record exceeds."""
    for r in tasks.values():
        if r.get("failed"):
            continue
        for rec in timed_records(r):
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


#: z of a two-sided 95% interval
Z95 = 1.959964
AGREEMENT_RULE = ("bf16 matches fp32 when, in every class, each side's robust (PGD-20) accuracy lies within the "
                  "95% Wilson score interval of the other's on that class's test images: the two differ by no "
                  "more than one run's binomial noise on those images (seed noise), class by class")


def wilson_interval(p: float, n: int, z: float = Z95) -> tuple[float, float]:
    """The Wilson score interval of an accuracy `p` measured on `n` images."""
    if n < 1:
        return 0.0, 1.0
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z / denom * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    # the interval holds its own estimate; at p = 0 or 1 rounding would leave p a hair outside
    # (1.0 > 0.9999999999999999), and two identical accuracies would "disagree"
    return max(0.0, min(p, centre - half)), min(1.0, max(p, centre + half))


def classwise_accuracy(pred: np.ndarray, labels: np.ndarray, num_classes: int) -> tuple[list[float], list[int]]:
    """(accuracy of each class, its number of images); nan for a class without images."""
    pred, labels = np.asarray(pred), np.asarray(labels)
    counts = [int((labels == c).sum()) for c in range(num_classes)]
    accs = [float((pred[labels == c] == c).mean()) if n else float("nan") for c, n in enumerate(counts)]
    return accs, counts


def precision_agreement(fp32: Sequence[float], bf16: Sequence[float], counts: Sequence[int],
                        names: Sequence[str] | None = None) -> dict:
    """bf16 against fp32, class by class, under AGREEMENT_RULE: each class's accuracies, their
    Wilson intervals and whether they agree; `matches` when every class does."""
    names = list(names) if names is not None else [str(c) for c in range(len(counts))]
    classes = []
    for name, a, b, n in zip(names, fp32, bf16, counts, strict=True):
        ia, ib = wilson_interval(a, n), wilson_interval(b, n)
        agree = bool(ia[0] <= b <= ia[1] and ib[0] <= a <= ib[1])
        classes.append({"class": name, "n": int(n), "fp32": float(a), "bf16": float(b), "difference": b - a,
                        "fp32_interval": list(ia), "bf16_interval": list(ib), "agree": agree})
    worst = min(classes, key=lambda c: c["difference"])
    return {"rule": AGREEMENT_RULE, "metric": "pgd20", "classes": classes,
            "fp32_mean": float(np.mean(fp32)), "bf16_mean": float(np.mean(bf16)),
            "worst_class": worst["class"], "worst_difference": worst["difference"],
            "matches": all(c["agree"] for c in classes)}


def _load(x: float | None) -> str:
    return "n/a" if x is None else f"{x:.2f}"


def _num(x: float) -> str:
    return f"{x:.3g}" if x < 1000 else f"{x:,.0f}"


def markdown(report: Mapping) -> str:
    """A table of the tasks with the settings and hardware above it and the accuracy check below."""
    s, hw, peak = report["settings"], report["hardware"], report["peak"]
    matmul = peak.get("matmul", peak["flops"])
    matmuls = ", ".join(f"{k} {v / 1e9:.1f} GFLOP/s" + (f" (start {peak['start'][k] / 1e9:.1f}, end "
                                                         f"{peak['end'][k] / 1e9:.1f})" if "start" in peak else "")
                        for k, v in matmul.items())
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
        f"- measured matmul ({peak['method']}): {matmuls}",
        *_peak_lines(peak),
        f"- peak basis: {', '.join(peak.get('basis_used') or ['none'])} ({peak.get('basis_rule', '')})",
        "- training tasks: the second epoch (the first carries warm-up); images/s are training "
        "images per second, evaluations test images per second",
        "",
        "- precision: the engine's training in each row's precision (the reference trains in fp32); "
        "evaluations are fp32 by design (`predict`), whatever --precision says",
        "",
        "| task | precision | engine img/s | reference img/s | speedup | engine s | reference s | GFLOP/img "
        "| engine GFLOP/s (of peak) | reference GFLOP/s (of peak) |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for task, r in report["tasks"].items():
        lines += _task_rows(task, r)
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
        lines += ["", f"accuracy_ok: {str(report['accuracy_ok']).lower()}"] + _precision_lines(acc)
    return "\n".join(lines) + "\n"


def _peak_lines(peak: Mapping) -> list[str]:
    """The peak each fraction is taken of, and where it comes from (tools.bench.peak.honest_peak)."""
    hw = peak.get("hardware")
    lines = [f"- hardware peak: {hw['flops'] / 1e9:.1f} GFLOP/s fp32 = {hw['method']}" if hw else
             "- hardware peak: not read (a GPU, or no clock reported): the matmul and the tasks set the peak"]
    for basis, value in peak["flops"].items():
        source = (peak.get("source") or {}).get(basis, "matmul")
        line = f"- peak {basis}: {value / 1e9:.1f} GFLOP/s, from the {source}"
        raised = (peak.get("raised_by") or {}).get(basis)
        if raised:
            above = ", ".join(f"{k} {v / 1e9:.1f}" for k, v in raised["above"].items())
            line += (f" ({raised['task']}, {raised['side']}, ran faster than the {above} GFLOP/s: its kernel is the "
                     "peak, 100% of it)")
        lines.append(line)
    return lines


def _task_rows(task: str, r: Mapping) -> list[str]:
    """A task's headline row, then the engine's other compile settings and other precisions."""
    if r.get("failed"):
        return [f"| {task} | failed: {r['error'].replace('|', '/')} | | | | | | | | |"]
    e, ref, precision = r["engine"], r["reference"], r.get("precision", "fp32")
    rows = [f"| {task} | {precision} | {_num(e['images_per_s'])} | {_num(ref['images_per_s'])} | {r['speedup']:.2f}x "
            f"| {e['seconds']:.2f} | {ref['seconds']:.2f} | {e['flops_per_image'] / 1e9:.3g} "
            f"| {e['flop_per_s'] / 1e9:.3g} ({100 * e['fraction_of_peak']:.1f}% {e['peak_basis']}) "
            f"| {ref['flop_per_s'] / 1e9:.3g} ({100 * ref['fraction_of_peak']:.1f}% {ref['peak_basis']}) |"]
    others = [(precision, mode, c) for mode, c in (r.get("engine_by_compile") or {}).items()]
    others += [(p, mode, c) for p, by_mode in (r.get("engine_by_precision") or {}).items()
               for mode, c in by_mode.items()]
    for p, mode, c in others:
        peak = f" ({100 * c['fraction_of_peak']:.1f}% {c['peak_basis']})" if "fraction_of_peak" in c else ""
        rows.append(f"| {task}, compile {mode} | {p} | {_num(c['images_per_s'])} | {_num(ref['images_per_s'])} "
                    f"| {c['speedup']:.2f}x | {c['seconds']:.2f} | {ref['seconds']:.2f} "
                    f"| {c['flops_per_image'] / 1e9:.3g} | {c['flop_per_s'] / 1e9:.3g}{peak} | |")
    return rows


def _precision_lines(acc: Mapping) -> list[str]:
    """bf16 against fp32: each class's PGD-20 accuracy of the two engine models and the verdict."""
    agreement = acc.get("bf16_vs_fp32")
    if not agreement:
        return ["", "bf16_matches_fp32: n/a (bf16 and fp32 were not both trained in this run)"]
    lines = ["", f"bf16 against fp32, the engine's PGD-10 AT models of this run (class-wise PGD-20 accuracy, "
             f"evaluated in fp32): {agreement['rule']}.", "",
             "| class | images | fp32 | bf16 | difference | fp32 95% interval | bf16 95% interval | agree |",
             "|---|---:|---:|---:|---:|---|---|---|"]
    for c in agreement["classes"]:
        lines.append(f"| {c['class']} | {c['n']} | {c['fp32']:.3f} | {c['bf16']:.3f} | {c['difference']:+.3f} "
                     f"| {c['fp32_interval'][0]:.3f}-{c['fp32_interval'][1]:.3f} "
                     f"| {c['bf16_interval'][0]:.3f}-{c['bf16_interval'][1]:.3f} | {'yes' if c['agree'] else 'no'} |")
    lines += ["", f"Mean over classes: fp32 {agreement['fp32_mean']:.3f}, bf16 {agreement['bf16_mean']:.3f}; "
              f"worst class for bf16: {agreement['worst_class']} ({agreement['worst_difference']:+.3f}).", "",
              f"bf16_matches_fp32: {str(acc['bf16_matches_fp32']).lower()}"]
    return lines


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
