"""Rows of the throughput table (workflow/throughput.yaml, read by study.cost) from `study bench`
reports: the engine's images/s and useful GFLOP/s of each task, the best over the reports of the
same model and device kind (a shared machine only ever slows a repeat down), with the hardware,
torch version, commit and date that measured it.

    python -m tools.bench.throughput --device cpu-2core results/bench/a.json results/bench/b.json
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Sequence
from pathlib import Path

import yaml


def _engine_sides(r: dict) -> list[tuple[str, dict]]:
    """(training precision, engine record) of each precision a task ran in: its headline, and the
    fastest compile setting of each other precision (`engine_by_precision`, e.g. bf16 beside fp32)."""
    sides = [(r.get("precision", "fp32"), r["engine"])]
    for precision, by_mode in (r.get("engine_by_precision") or {}).items():
        timed = [c for c in by_mode.values() if c and not c.get("failed") and c.get("images_per_s")]
        if timed:
            sides.append((precision, max(timed, key=lambda c: c["images_per_s"])))
    return sides


def rows(reports: Sequence[dict], device: str, note: str = "") -> list[dict]:
    """One row per (model, task, training precision): the report whose engine ran it fastest."""
    best: dict[tuple[str, str, str], tuple[dict, dict]] = {}
    for report in reports:
        for task, r in report["tasks"].items():
            if r.get("failed"):
                continue
            for precision, engine in _engine_sides(r):
                key = (report["settings"]["model"], task, precision)
                if key not in best or engine["images_per_s"] > best[key][1]["images_per_s"]:
                    best[key] = (report, engine)
    out = []
    for (model, task, precision), (report, engine) in sorted(best.items()):
        hw = report["hardware"]
        repeats = sum(other["settings"]["model"] == model and "engine" in (other["tasks"].get(task) or {})
                      for other in reports)
        prov = hw.get("provenance") or {}
        commit = str(prov.get("commit") or prov.get("git_commit") or "unknown")[:7]
        started = report.get("started") or prov.get("time") or time.strftime("%Y-%m-%d")
        out.append({"model": model, "task": task, "device": device,
                    **({"precision": precision} if precision != "fp32" else {}),
                    "images_per_s": round(engine["images_per_s"], 3),
                    "gflop_per_s": round(engine["flop_per_s"] / 1e9, 2),
                    "hardware": f"{hw['cpu_model']}, {hw['threads']} threads"
                                + (f", {hw['cuda_name']}" if hw.get("cuda_name") else ""),
                    "torch": hw["torch"], "commit": commit, "date": str(started)[:10],
                    "note": f"best of {repeats} bench run(s): {report['settings']['train_images']} train / "
                            f"{report['settings']['test_images']} test images" + (f"; {note}" if note else "")})
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m tools.bench.throughput", description=__doc__)
    p.add_argument("reports", nargs="+", help="study bench JSON reports")
    p.add_argument("--device", required=True, help="the device kind they ran on (cpu-2core, h100)")
    p.add_argument("--note", default="", help="what the rows should say about how they were measured")
    args = p.parse_args(argv)
    reports = [json.loads(Path(r).read_text()) for r in args.reports]
    print(yaml.safe_dump(rows(reports, args.device, args.note), sort_keys=False, width=120), end="")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
