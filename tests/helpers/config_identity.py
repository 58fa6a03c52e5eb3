"""The pins of tests/integration/test_config_identity.py, in tests/data/run_ids.txt: one line per
run of every preset (its id, the hash of its config.json, of its evaluations' `--evaluation` JSON,
its groups, evaluations and checkpoints), one per constructed dataset, and the records of one tiny
run of the ci preset, as hashes. A line reads

    <preset> <run id> config:<sha> evaluations:<sha> groups=<a,b> evaluate=<e,f> checkpoints=<last,best>

A refactoring of the configuration code must leave all of them unchanged; a deliberate change
regenerates them from the code as it is checked out:

    .venv/bin/python tests/helpers/config_identity.py

`--presets` limits the rewrite to some presets (the others' lines are kept), `--no-records`
keeps the records' lines. The run ids of the change that made a run id the hash of the typed
value's canonical form (its old id -> new id) are tests/data/run_ids_renamed.txt
(tools/run_id_table.py).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PINS = ROOT / "tests/data/run_ids.txt"
PRESETS = ("ci", "demo", "paper", "laptop", "reproduce")
#: floats of the records are compared at this many decimals: the pins name what the
#: configuration makes of a run, not the last bit of a CPU's float reductions
DECIMALS = 4


def sha(obj: object) -> str:
    return hashlib.sha256(json.dumps(obj, sort_keys=True, separators=(",", ":")).encode()).hexdigest()[:16]


def load(root: Path, preset: str) -> dict:
    import yaml

    from study.config import load_params

    # A variant `auto` resolves by what data/raw and the mirror hold on this machine: the pins
    # take the JPEG variant for it, whatever is at hand.
    variants = (yaml.safe_load((root / f"workflow/presets/{preset}.yaml").read_text()).get("data") or {}).get(
        "variants") or {}
    fixed = {name: "jpeg" for name, variant in variants.items() if variant == "auto"}
    overrides = {"preset": preset, **({"data": {"variants": fixed}} if fixed else {})}
    return load_params(root / "params.yaml", overrides, presets_dir=root / "workflow/presets",
                       schema_path=root / "workflow/schemas/params.schema.yaml")


def plan_pins(root: Path, preset: str) -> dict:
    """Every run of the preset (trained and zoo) with its groups, evaluations, checkpoints, the
    hash of its config.json and of each evaluation as the evaluate rule passes it."""
    from study.config import constructions, plan_runs, resolve_evaluation
    from study.config.zoo import plan_zoo

    params = load(root, preset)
    plan = plan_runs(params)
    runs = {}
    # the plan with every hand-placed input in place (an empty ImageNet folder will do for planning),
    # so that the pins do not depend on what this machine holds
    with tempfile.TemporaryDirectory() as placed:
        (Path(placed) / params.data.root / "raw" / "imagenet" / "val").mkdir(parents=True)
        zoo = plan_zoo(params, root=placed)
    for run in plan + zoo:
        runs[run.run_id] = {
            "groups": run.groups, "evaluations": run.evaluations, "checkpoints": run.checkpoints,
            "config": sha(run.config),
            "evaluation_args": {e: sha(resolve_evaluation(params, e, dataset=run.dataset)) for e in run.evaluations},
        }
    cons = [c.name for c in constructions(params, plan)] if params.features is not None else []
    return {"runs": runs, "constructions": cons}


def _rounded_csv(frame) -> str:
    return frame.round(DECIMALS).to_csv(index=False)


def record_pins(root: Path) -> dict:
    """One epoch of the ci preset's PGD-AT run on a few synthetic images and its PGD record:
    the files the configuration reaches (config.json, epochs.csv, the record and its metadata)."""
    import torch

    from study.config import plan_runs, resolve_evaluation
    from study.config.spec import EvaluationSpec
    from study.data.prepared import load_prepared, prepare_dataset
    from study.evaluate.checkpoint_eval import evaluate_checkpoint
    from study.evaluate.records import read_records
    from study.train.engine import train_run

    torch.set_num_threads(1)
    params = load(root, "ci")
    run = next(r for r in plan_runs(params) if r.config["method"] == "pgd_at" and "baseline" in r.groups)
    cfg = {**run.config, "epochs": 1, "train_per_class": 6, "epoch_eval": {**run.config["epoch_eval"], "per_class": 2}}
    evaluation = {**resolve_evaluation(params, "pgd3", dataset=run.dataset), "test_per_class": 2}
    with tempfile.TemporaryDirectory() as tmp:
        data = Path(tmp) / "synthetic-default.pt"
        synthetic = params.data.synthetic.model_dump(exclude_unset=True)
        prepare_dataset("synthetic", "default", Path(tmp) / "raw", None, data, synthetic=synthetic)
        splits = load_prepared(data)
        run_dir = Path(tmp) / "run"
        train_run(cfg, splits, run_dir, device="cpu", progress=False)
        (out,) = evaluate_checkpoint(run_dir, splits, [(EvaluationSpec.parse(evaluation), Path(tmp) / "pgd3.parquet")],
                                     device="cpu",
                                     progress=False)
        import pandas as pd

        frame, meta = read_records(out)
        meta.pop("seconds", None)
        epochs = pd.read_csv(run_dir / "epochs.csv")
        return {
            "config.json": hashlib.sha256((run_dir / "config.json").read_bytes()).hexdigest()[:16],
            "epochs.csv": hashlib.sha256(_rounded_csv(epochs).encode()).hexdigest()[:16],
            "record": hashlib.sha256(_rounded_csv(frame.drop(columns=["logits"], errors="ignore")).encode())
            .hexdigest()[:16],
            "record_meta": sha({k: meta[k] for k in ("run_id", "run_config", "evaluation", "dataset", "data_variant")}),
        }


def plan_lines(root: Path, preset: str) -> list[str]:
    """The pins of a preset's plan, one line per run and per constructed dataset."""
    pins = plan_pins(root, preset)
    lines = [f"{preset} {run_id} config:{run['config']} evaluations:{sha(run['evaluation_args'])} "
             f"groups={','.join(run['groups'])} evaluate={','.join(run['evaluations'])} "
             f"checkpoints={','.join(run['checkpoints'])}" for run_id, run in sorted(pins["runs"].items())]
    return lines + [f"{preset} construction {name}" for name in pins["constructions"]]


def record_lines(root: Path) -> list[str]:
    return [f"records {name} {digest}" for name, digest in sorted(record_pins(root).items())]


def read_pins(path: Path = PINS) -> dict[str, list[str]]:
    """The pinned lines by preset (`records`: the ci run's records), comments left out."""
    out: dict[str, list[str]] = {}
    for line in path.read_text().splitlines() if path.exists() else []:
        if line and not line.startswith("#"):
            out.setdefault(line.split(" ", 1)[0], []).append(line)
    return out


HEADER = ("# run id pins of tests/integration/test_config_identity.py (tests/helpers/config_identity.py);\n"
          "# <preset> <run id> config:<sha of config.json> evaluations:<sha of its evaluations' JSON> groups= "
          "evaluate= checkpoints=\n")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--root", type=Path, default=ROOT, help="the checkout whose params and presets are read")
    parser.add_argument("--out", type=Path, default=PINS)
    parser.add_argument("--presets", nargs="+", default=list(PRESETS), choices=PRESETS)
    parser.add_argument("--no-records", action="store_true", help="keep the pinned records as they are")
    args = parser.parse_args(argv)
    pins = read_pins(args.out)
    for preset in args.presets:
        pins[preset] = plan_lines(args.root, preset)
    if not args.no_records:
        pins["records"] = record_lines(args.root)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    order = [*PRESETS, "records"]
    args.out.write_text(HEADER + "".join(line + "\n" for key in order for line in pins.get(key, [])))
    counts = ", ".join(f"{p} {sum(' construction ' not in line for line in pins[p])} runs" for p in args.presets)
    print(f"wrote {args.out}: {counts}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
