"""The first epochs of a preset's runs, timed, and the preset's price from them (`make gpu-check`,
part `preset`; docs/performance.md, "On a GPU machine").

For each kind of training the preset plans (by its method's resolved adversary and loss: standard,
PGD-AT, TRADES, ...), the first run of that kind is trained for `--epochs` epochs on
`--train-per-class` images per class, with its own run config otherwise (model, method, optimizer,
batch), on the data the check holds (the JPEG CIFAR-10 of gpu-bundle/: the machine has no network,
so a preset's official archive is replaced by it, and said so). Its seconds per training image,
read off `meta.json`'s epoch times where it wrote them and the job's wall time otherwise, price every
run of that kind: epochs x training images. `--precision fp32 bf16` times each kind in each training
precision (the label of a bf16 run ends in `-bf16`), so that the price is given in both. Written:
<out>/timing.json and timing.md.

Run by tools/gpu/check.py after part setup has installed the bundle; `--dry-run` prints the
commands without running them (tests/workflow/test_gpu_check.py)."""

from __future__ import annotations

import argparse
import json
import shlex
import subprocess
import sys
import time
from collections.abc import Mapping
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))


def training_kind(config: Mapping) -> str:
    """What a run's training costs per image follows from: its adversary (type, steps) and loss."""
    method = config.get("method_config") or {}
    adversary, loss = method.get("adversary"), (method.get("loss") or {}).get("type", "ce")
    if not adversary:
        return "standard"
    return f"{adversary.get('type', 'pgd')}{adversary.get('steps', '')}-{loss}"


def train_images(config: Mapping, dataset_per_class: int = 5000, classes: int = 10) -> int:
    """Training images per epoch of a run: its subset or the whole set, less its validation split."""
    per_class = config.get("train_per_class") or dataset_per_class
    validation = config.get("validation") or {}
    held = round(per_class * validation["fraction"]) if "fraction" in validation else validation.get("per_class", 0)
    return classes * (per_class - held)


def first_runs(preset: str) -> dict[str, tuple[Mapping, list[Mapping]]]:
    """kind -> (the first run config of that kind, every run config of that kind) of the preset's plan."""
    from study.config import load_params, plan_runs

    params = load_params(ROOT / "params.yaml", {"preset": preset}, presets_dir=ROOT / "workflow/presets",
                         schema_path=ROOT / "workflow/schemas/params.schema.yaml")
    kinds: dict[str, tuple[Mapping, list[Mapping]]] = {}
    for run in plan_runs(params):
        if run.trained is None:  # a zoo model: evaluated, never trained
            continue
        config = run.config  # the run config as `study train --run-config` takes it (timed_config shortens it)
        kind = training_kind(config)
        kinds.setdefault(kind, (config, []))[1].append(config)
    return kinds


def timed_config(config: Mapping, epochs: int, train_per_class: int, variant: str,
                 eval_per_class: int | None = None) -> dict:
    """The run config, shortened to `epochs` on `train_per_class` images per class, on `variant`
    (and its per-epoch evaluation to `eval_per_class` images per class, where given)."""
    out = json.loads(json.dumps(config))
    out.update(epochs=epochs, train_per_class=train_per_class, data_variant=variant)
    if eval_per_class is not None:
        out["epoch_eval"] = {**out["epoch_eval"], "per_class": eval_per_class}
    # no fine-tune parent on the check's machine: a run that fine-tunes is timed from scratch
    out.pop("init_from", None)
    return out


PRECISIONS = ("fp32", "bf16")


def label(kind: str, precision: str) -> str:
    """A timed run's name: its kind, `-bf16` added for a bf16 run."""
    return kind if precision == "fp32" else f"{kind}-{precision}"


def commands(preset: str, data: Path, out: Path, epochs: int, train_per_class: int, device: str,
             variant: str = "jpeg", eval_per_class: int | None = None,
             precisions: tuple[str, ...] = ("fp32",)) -> list[tuple[str, dict, list[str]]]:
    """(label, shortened run config, `study train` argv) for the first run of each kind, in each
    training precision of `precisions` (whatever the preset's own)."""
    bad = [p for p in precisions if p not in PRECISIONS]
    if bad or not precisions:
        raise ValueError(f"unknown precision(s) {bad or list(precisions)}; valid: {', '.join(PRECISIONS)}")
    made = []
    for kind, (config, _) in first_runs(preset).items():
        for precision in precisions:
            cfg = timed_config(config, epochs, train_per_class, variant, eval_per_class)
            cfg.pop("precision", None)  # fp32 is the default, and an fp32 run config names none
            if precision != "fp32":
                cfg["precision"] = precision
            name = label(kind, precision)
            argv = [sys.executable, "-m", "study.cli", "train", "--data", str(data), "--run-dir", str(out / name),
                    "--run-config", json.dumps(cfg), "--device", device, "--compile", "auto", "--no-progress"]
            made.append((name, cfg, argv))
    return made


def _epoch_seconds(run_dir: Path, wall: float, epochs: int) -> tuple[float, str]:
    """Seconds of one training epoch: the last epoch's time from meta.json where it has one (after the
    start-up and the first epoch's warm-up), else the wall time over the epochs."""
    meta = run_dir / "meta.json"
    if meta.is_file():
        times = json.loads(meta.read_text()).get("epoch_seconds")
        if isinstance(times, list) and times:
            return float(times[-1]), "the last epoch (meta.json)"
    return wall / epochs, "wall time over the epochs (start-up included)"


def price(preset: str, timed: Mapping[str, float],
          precisions: tuple[str, ...] = ("fp32",)) -> tuple[list[dict], dict[str, float]]:
    """Per kind and precision: runs, epochs x images, measured s/image and projected GPU-hours;
    and the total of each precision (every run of the preset trained in it)."""
    rows, totals = [], dict.fromkeys(precisions, 0.0)
    for kind, (_, configs) in first_runs(preset).items():
        images = sum(int(c["epochs"]) * train_images(c) for c in configs)
        for precision in precisions:
            per_image = timed.get(label(kind, precision))
            hours = images * per_image / 3600 if per_image is not None else float("nan")
            totals[precision] += hours if per_image is not None else 0.0
            rows.append({"kind": kind, "precision": precision, "runs": len(configs), "epoch_images": images,
                         "s_per_image": per_image, "hours": hours})
    return rows, totals


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--preset", default="reproduce")
    p.add_argument("--data", required=True, help="the prepared CIFAR-10 the check holds")
    p.add_argument("--out", required=True)
    p.add_argument("--epochs", type=int, default=2)
    p.add_argument("--train-per-class", type=int, default=1000)
    p.add_argument("--device", default="cuda")
    p.add_argument("--eval-per-class", type=int, default=None,
                   help="test images per class of the per-epoch evaluation (default: the run's own)")
    p.add_argument("--precision", nargs="+", default=["fp32"], choices=PRECISIONS,
                   help="training precisions to time each kind in (fp32 bf16: both, for the price in each)")
    p.add_argument("--dry-run", action="store_true", help="print the commands, run nothing")
    args = p.parse_args(argv)
    out = Path(args.out)
    precisions = tuple(dict.fromkeys(args.precision))
    made = commands(args.preset, Path(args.data), out, args.epochs, args.train_per_class, args.device,
                    eval_per_class=args.eval_per_class, precisions=precisions)
    if args.dry_run:
        for kind, _, command in made:
            print(f"{kind}: {shlex.join(command)}")
        return 0
    out.mkdir(parents=True, exist_ok=True)
    timed, lines, failed = {}, [], 0
    for kind, cfg, command in made:
        start = time.monotonic()
        rc = subprocess.run(command, cwd=ROOT).returncode
        wall = time.monotonic() - start
        if rc != 0:
            failed += 1
            lines.append(f"| {kind} | failed (exit {rc}) | | |")
            continue
        seconds, how = _epoch_seconds(out / kind, wall, args.epochs)
        timed[kind] = seconds / train_images(cfg)
        lines.append(f"| {kind} | {wall:.1f} s for {args.epochs} epochs | {seconds:.1f} s per epoch ({how}) | "
                     f"{1 / timed[kind]:.0f} images/s |")
    rows, totals = price(args.preset, timed, precisions)
    (out / "timing.json").write_text(json.dumps({"preset": args.preset, "epochs": args.epochs,
                                                 "train_per_class": args.train_per_class, "kinds": rows,
                                                 "total_hours": totals}, indent=1))
    md = [f"### The {args.preset} preset's first epochs ({args.epochs} epochs on {args.train_per_class} "
          "images per class, the JPEG CIFAR-10)", "", "| training kind | job | epoch | throughput |",
          "|---|---|---|---|", *lines, "",
          "| training kind | precision | runs | epochs x images | projected GPU-hours |", "|---|---|---|---|---|"]
    md += [f"| {r['kind']} | {r['precision']} | {r['runs']} | {r['epoch_images']:,} | {r['hours']:.1f} |"
           for r in rows]
    md += [""] + [f"Projected training in {p}: **{h:.1f} GPU-hours** one run at a time (evaluations not included)."
                  for p, h in totals.items()]
    (out / "timing.md").write_text("\n".join(md) + "\n")
    print("\n".join(md))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
