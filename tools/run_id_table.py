"""The old -> new run id of every run of every preset across the change that made a run id the
hash of the typed value's canonical form (study.config.spec) instead of the config as written:
tests/data/run_ids_renamed.txt, one line per run whose id changed (`<preset> <old id> <new id>`),
the same pairs `study rename-runs` renames a results folder by.

The old plan is read by the old code, in a git worktree of BASE (its configs as written); each
is parsed by today's code, with the runs and constructed datasets it names renamed first; every
new id must be one of today's plan. Run from the checkout:

    .venv/bin/python tools/run_id_table.py            # (a few seconds; writes the table)
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
BASE = "d9552b4"
OUT = ROOT / "tests/data/run_ids_renamed.txt"

#: run in the old checkout: every preset's runs (id -> config as written) and constructions
_OLD_PLAN = """
import json, sys, tempfile
from pathlib import Path
root = Path(sys.argv[1])
sys.path.insert(0, str(root / "tests/helpers"))
from config_identity import PRESETS, load
from study.config import constructions, plan_runs
from study.config.zoo import plan_zoo
out = {}
for preset in PRESETS:
    params = load(root, preset)
    plan = plan_runs(params)
    with tempfile.TemporaryDirectory() as placed:
        (Path(placed) / params["data"]["root"] / "raw" / "imagenet" / "val").mkdir(parents=True)
        zoo = plan_zoo(params, root=placed)
    cons = {c.kind: c.name for c in constructions(params, plan)} if params.get("features") else {}
    out[preset] = {"runs": {r.run_id: json.loads(json.dumps(r.config)) for r in plan + zoo}, "constructions": cons}
print(json.dumps(out))
"""


def old_plans(base: str) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        tree = Path(tmp) / "base"
        subprocess.run(["git", "-C", ROOT, "worktree", "add", "-q", "--detach", tree, base], check=True)
        try:
            env = {**os.environ, "PYTHONPATH": str(tree)}
            # run in the old tree: `python -c` puts the working directory first on its path
            proc = subprocess.run([sys.executable, "-c", _OLD_PLAN, tree], env=env, cwd=tree, capture_output=True,
                                  text=True, check=True)
        finally:
            subprocess.run(["git", "-C", ROOT, "worktree", "remove", "--force", tree], check=True)
    return json.loads(proc.stdout)


def _translated(raw: dict, runs: dict[str, str], cons: dict[str, str]) -> dict:
    out = dict(raw)
    if out.get("init_from"):
        out["init_from"] = runs[out["init_from"]]
    if out.get("constructed"):
        kind = out["constructed"]["kind"]
        out["constructed"] = {**out["constructed"], "key": cons[kind].rsplit("-", 1)[1],
                              "source_run": runs[out["constructed"]["source_run"]]}
    return out


def renamed(preset: str, old: dict) -> dict[str, str]:
    """Old id -> new id of every run of the preset's old plan."""
    from helpers.config_identity import load

    from study.config import ConfigSpec, constructions, plan_runs
    from study.run_directory import expected_run_id

    params = load(ROOT, preset)
    plan = plan_runs(params)
    new_cons = {c.kind: c.name for c in constructions(params, plan)} if params.get("features") else {}
    runs: dict[str, str] = {}
    # the plain runs first: a fine-tuning run and a run on constructed data name them
    for dependent in (False, True):
        for old_id, raw in old["runs"].items():
            if bool(raw.get("init_from") or raw.get("constructed")) == dependent:
                raw = _translated(raw, runs, new_cons) if dependent else raw
                runs[old_id] = expected_run_id(ConfigSpec.parse(raw, f"{preset} {old_id}"))
    return runs


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--base", default=BASE, help="the commit of the old identity")
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args(argv)
    from helpers.config_identity import read_pins

    lines, total = [], 0
    pinned = {line.split()[1] for lines_ in read_pins().values() for line in lines_}
    for preset, old in old_plans(args.base).items():
        runs = renamed(preset, old)
        missing = sorted(set(runs.values()) - pinned)
        if missing:
            raise SystemExit(f"{preset}: {len(missing)} new ids are no run of today's pins, e.g. {missing[0]}")
        total += len(runs)
        lines += [f"{preset} {o} {n}" for o, n in sorted(runs.items()) if o != n]
    header = (f"# run ids renamed by the canonical identity (tools/run_id_table.py, from commit {args.base}):\n"
              f"# <preset> <old id> <new id>; {len(lines)} of {total} runs changed, the others kept their ids\n")
    args.out.write_text(header + "".join(line + "\n" for line in lines))
    print(f"wrote {args.out}: {len(lines)} of {total} run ids changed", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
