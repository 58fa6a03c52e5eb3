"""Renaming a results folder whose run ids were made by an older identity (the hash of a run
config as written) to the ids of today's (the hash of the typed value's canonical form:
study.config.spec). Nothing is trained again and nothing trained is lost: every file that
names a run by its id or key is rewritten in place (its time stamp kept, so that Snakemake
sees the same order of inputs and outputs) and every path named by an id is moved.

What names a run: its folder `runs/<id>/` (config.json, the model files' and checkpoint's
`run_key`, the id in its JSON and CSV files), its records `evaluations/<id>/` (the records'
`run_id`, `run_config` and `evaluation` metadata), its logs and benchmarks, the tables that
list it, the constructed datasets built from it (`<kind>-<key>`, the key a hash of the source
run's id) and the runs trained on them or fine-tuned from it (their configs name it).
Everything is checked before anything is moved: a target that exists is refused.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from study.config.spec import ConfigSpec, construction_key
from study.run_directory import CONFIG_FILE, expected_run_id
from study.versions import output_of

#: files rewritten as text where they name an old id (logs keep what happened, as it happened)
TEXT_SUFFIXES = (".json", ".csv", ".tsv", ".yaml", ".md", ".txt")
_CONSTRUCTION_ROLE = {"d_r": "robust"}  # every other kind is built from the standard model


@dataclass
class Renames:
    """The renames a results folder needs: run ids and construction names, old -> new, the
    old run key of each renamed run, and the config.json files to rewrite canonically."""

    runs: dict[str, str] = field(default_factory=dict)
    keys: dict[str, str] = field(default_factory=dict)  # old run key -> new, of runs renamed or rewritten
    constructions: dict[str, str] = field(default_factory=dict)
    configs: dict[Path, ConfigSpec] = field(default_factory=dict)  # config.json -> its spec (new names)

    def names(self) -> dict[str, str]:
        return {**self.runs, **self.constructions}


def written_key(raw: object) -> str:
    """The run key an older study gave a config: the hash of the mapping as written."""
    return hashlib.sha256(json.dumps(raw, sort_keys=True, separators=(",", ":")).encode()).hexdigest()[:8]


def _translated(raw: dict, renames: Renames) -> dict:
    """A run config with the runs and constructions it names under their new names."""
    out = dict(raw)
    if isinstance(out.get("init_from"), str):
        out["init_from"] = renames.runs.get(out["init_from"], out["init_from"])
    con = out.get("constructed")
    if isinstance(con, dict):
        name = renames.constructions.get(f"{con['kind']}-{con['key']}", f"{con['kind']}-{con['key']}")
        out["constructed"] = {**con, "key": name.rsplit("-", 1)[1],
                              "source_run": renames.runs.get(con["source_run"], con["source_run"])}
    return out


def _construction_meta(path: Path) -> dict:
    from study.io import load_torch

    meta = load_torch(path, mmap=True).get("meta", {}).get("constructed")
    if not isinstance(meta, dict) or not {"kind", "key", "source_run", "settings"} <= set(meta):
        raise ValueError(f"{path} is no constructed dataset of `study construct` (no constructed kind, key, "
                         "source_run, settings in its meta); move it out of the data folder")
    return meta


def plan_renames(results: Path, data: Path) -> Renames:
    """What `rename_results` would rename; ValueError of one line where a folder cannot be
    renamed (a config that does not parse, a target that exists)."""
    renames = Renames()
    runs = results / "runs"
    folders = sorted(p for p in runs.iterdir() if (p / CONFIG_FILE).is_file()) if runs.is_dir() else []
    raws = {p: _read_json(p / CONFIG_FILE) for p in folders}
    # a run's id can depend on others' (its constructed set's source, its parent): the plain runs
    # first, then the constructions from them, then the runs on those (twice: a fine-tuning run
    # may start from a run that depends on another)
    for stage in ("plain", "constructions", "dependent", "dependent"):
        if stage == "constructions":
            _plan_constructions(data / "constructed", renames)
            continue
        for folder, raw in raws.items():
            depends = isinstance(raw, dict) and bool(raw.get("constructed") or raw.get("init_from"))
            if depends == (stage == "dependent"):
                _plan_run(folder, raw, renames)
    _refuse_existing_targets(results, data, renames)
    affected = _affected(renames)
    for folder in (results / "runs", results / "evaluations"):  # every record read before any is written
        for run in (folder / name for name in affected):
            for path in run.rglob("*.parquet") if run.is_dir() else []:
                _record_meta(path, renames)
    return renames


def _affected(renames: Renames) -> set[str]:
    """The runs whose files `rename_results` rewrites."""
    return set(renames.runs) | {path.parent.name for path in renames.configs}


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text())
    except ValueError as err:
        raise ValueError(f"{path} is not JSON ({err}): put the run's own config.json back, or move the run "
                         "folder out of the results folder; nothing was renamed") from None


def _plan_run(folder: Path, raw: Any, renames: Renames) -> None:
    where = str(folder / CONFIG_FILE)
    spec = ConfigSpec.parse(_translated(raw, renames) if isinstance(raw, dict) else raw, where)
    new = expected_run_id(spec)
    renames.runs.pop(folder.name, None)  # planned again: what its dependencies' names now make
    if new != folder.name:
        renames.runs[folder.name] = new
    if (folder / CONFIG_FILE).read_bytes() != spec.json.encode() and "zoo" not in raw:
        renames.configs[folder / CONFIG_FILE] = spec
        renames.keys[written_key(raw)] = spec.key


def _plan_constructions(folder: Path, renames: Renames) -> None:
    for path in sorted(folder.glob("d_*-*.pt")) if folder.is_dir() else []:
        meta = _construction_meta(path)
        role = _CONSTRUCTION_ROLE.get(meta["kind"], "standard")
        if construction_key(meta["kind"], {role: meta["source_run"]}, meta["settings"]) != meta["key"]:
            raise ValueError(f"{path}: its key {meta['key']} is not the hash of its source run {meta['source_run']} "
                             "and settings; it is no construction of this study's, move it out of the data folder")
        source = renames.runs.get(meta["source_run"], meta["source_run"])
        new = f"{meta['kind']}-{construction_key(meta['kind'], {role: source}, meta['settings'])}"
        if new != path.stem:
            renames.constructions[path.stem] = new


def _refuse_existing_targets(results: Path, data: Path, renames: Renames) -> None:
    targets = [results / "runs" / new for new in renames.runs.values()]
    targets += [results / "evaluations" / new for old, new in renames.runs.items()
                if (results / "evaluations" / old).exists()]
    targets += [data / "constructed" / f"{new}.pt" for new in renames.constructions.values()]
    for target in targets:
        if target.exists():
            raise ValueError(f"{target} exists already with other content: move it aside (or remove it), then run "
                             "`study rename-runs` again; nothing was renamed")


# ---------------------------------------------------------------- applying them


def _keeping_time(path: Path, write: Callable[[], None]) -> None:
    """`write()` a new version of `path`, its modification time kept."""
    stat = path.stat()
    write()
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))


def _replace_names(text: str, names: dict[str, str]) -> str:
    if not names:
        return text
    pattern = re.compile("|".join(re.escape(old) for old in sorted(names, key=len, reverse=True)))
    return pattern.sub(lambda m: names[m.group(0)], text)


def _rewrite_text(path: Path, names: dict[str, str]) -> None:
    from study.io import atomic_write_text

    text = path.read_text()
    new = _replace_names(text, names)
    if new != text:
        _keeping_time(path, lambda: atomic_write_text(path, new))


def _rewrite_model_file(path: Path, keys: dict[str, str]) -> None:
    """A model file's or checkpoint's `run_key`, old -> new (other runs' files are left alone)."""
    from study.io import atomic_torch_save, load_torch

    blob = load_torch(path)
    if isinstance(blob, dict) and blob.get("run_key") in keys:
        blob["run_key"] = keys[blob["run_key"]]
        _keeping_time(path, lambda: atomic_torch_save(blob, path))


def _record_meta(path: Path, renames: Renames) -> tuple[dict, dict]:
    """A record's metadata and what it becomes: its run id renamed, its run config and (a job's)
    evaluation in canonical form; a record of `study corruptions` names no evaluation job."""
    import pyarrow.parquet as pq

    from study.config.core import ConfigError
    from study.config.spec import EvaluationSpec

    meta = json.loads((pq.read_schema(path).metadata or {}).get(b"study", b"{}"))
    new = dict(meta)
    if "run_id" in meta:
        new["run_id"] = renames.runs.get(meta["run_id"], meta["run_id"])
    if isinstance(meta.get("run_config"), dict):
        new["run_config"] = ConfigSpec.parse(_translated(meta["run_config"], renames), f"{path}: run_config").identity
    if isinstance(meta.get("evaluation"), dict):
        try:
            new["evaluation"] = EvaluationSpec.parse(meta["evaluation"], f"{path}: evaluation").identity
        except ConfigError:
            pass  # not an evaluation job (corruptions): kept as it is
    return meta, new


def _rewrite_record(path: Path, renames: Renames) -> None:
    from study.evaluate.records import replace_record_metadata

    meta, new = _record_meta(path, renames)
    if new != meta:
        _keeping_time(path, lambda: replace_record_metadata(path, new))


def _write_config(path: Path, spec: ConfigSpec) -> None:
    from study.io import atomic_write_text

    _keeping_time(path, lambda: atomic_write_text(path, spec.json))


def _rewrite_folder(folder: Path, renames: Renames) -> None:
    names = renames.names()
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        if path.name == CONFIG_FILE and path in renames.configs:
            _write_config(path, renames.configs[path])
        elif path.suffix == ".pt":
            _rewrite_model_file(path, renames.keys)
        elif path.suffix == ".parquet":
            _rewrite_record(path, renames)
        elif path.suffix in TEXT_SUFFIXES:
            _rewrite_text(path, names)


def _move_named(root: Path, names: dict[str, str]) -> None:
    """Every path under `root` whose name holds an old name, deepest first, to the new name."""
    if not root.is_dir() or not names:
        return
    hits = [p for p in root.rglob("*") if _replace_names(p.name, names) != p.name]
    for path in sorted(hits, key=lambda p: len(p.parts), reverse=True):
        path.rename(path.with_name(_replace_names(path.name, names)))


def _rewrite_construction(path: Path, renames: Renames, results: Path) -> None:
    """A constructed dataset's provenance: its key, its source run and that run's model file."""
    from study.checkpoints import CHECKPOINT_FILES
    from study.data.download import file_checksums
    from study.io import atomic_torch_save, load_torch

    blob = load_torch(path)
    con = blob["meta"]["constructed"]
    new = renames.constructions.get(path.stem)
    source = renames.runs.get(con["source_run"], con["source_run"])
    # the source's folder is moved after this: its model file, rewritten already, is under the old name
    model = results / "runs" / con["source_run"] / CHECKPOINT_FILES["last"]
    sha = file_checksums(model, ["sha256"])["sha256"] if model.is_file() else con.get("source_model_sha256")
    updated = {**con, "key": new.rsplit("-", 1)[1] if new else con["key"], "source_run": source,
               "source_model_sha256": sha}
    if updated != con:
        blob["meta"]["constructed"] = updated
        _keeping_time(path, lambda: atomic_torch_save(blob, path))


def rename_results(results: Path, data: Path, renames: Renames) -> None:
    """Apply `renames` (plan_renames): files rewritten in place first, then moved."""
    affected = _affected(renames)
    for folder in (results / "runs", results / "evaluations"):
        for run in sorted(folder.iterdir()) if folder.is_dir() else []:
            if run.name in affected:
                _rewrite_folder(run, renames)
    for path in sorted((data / "constructed").glob("d_*-*.pt")) if (data / "constructed").is_dir() else []:
        _rewrite_construction(path, renames, results)
    names = renames.names()
    for path in sorted(results.rglob("*")):
        top = path.relative_to(results).parts[0]
        if path.is_file() and path.suffix in TEXT_SUFFIXES and top not in ("runs", "evaluations", "logs"):
            _rewrite_text(path, names)  # tables, summaries: where they list a run
    for root in (results / "runs", results / "evaluations", results / "logs", results / "benchmarks",
                 data / "constructed"):
        _move_named(root, names)


def stand_ins_missing(results: Path, renames: Renames) -> dict[str, tuple[list[str], str]]:
    """Per run (by its new id), the checkpoint files of the one train rule that a run trained
    before it lacks, and the run key they carry (study.run_directory.missing_stand_ins): written by
    `write_stand_ins`, so that Snakemake finds the train job's files complete and retrains nothing."""
    from study.run_directory import missing_stand_ins, read_run_config

    out: dict[str, tuple[list[str], str]] = {}
    for folder in sorted((results / "runs").iterdir()) if (results / "runs").is_dir() else []:
        config = folder / CONFIG_FILE
        if not config.is_file():
            continue
        # the config as it will be written (a renamed run's new one), parsed once here
        spec = renames.configs.get(config) or read_run_config(folder)
        if names := missing_stand_ins(folder, spec):
            out[renames.runs.get(folder.name, folder.name)] = (names, spec.key)
    return out


def write_stand_ins(results: Path, missing: dict[str, tuple[list[str], str]]) -> int:
    """The stand-ins of `stand_ins_missing` written, once the runs carry their new ids; how many files."""
    from study.run_directory import write_stand_in

    for run, (names, key) in missing.items():
        for name in names:
            write_stand_in(results / "runs" / run, name, key)
    return sum(len(names) for names, _ in missing.values())


def rewrite_snakemake_records(metadata: Path, names: dict[str, str]) -> tuple[int, int]:
    """Snakemake's records of the jobs that made a results folder (`.snakemake/metadata`), read as
    the renames change them: a record of a renamed output is dropped (its new path has none, so no
    rerun is triggered by its parameters, which name the old config as written), and a record that
    names a renamed run among its inputs, parameters or command is rewritten with the new names,
    so that a job that reads a renamed run (a construction, a table) is not rerun because its
    input's path changed. Returns (rewritten, dropped)."""
    from study.io import atomic_write_text

    if not names or not metadata.is_dir():
        return 0, 0
    rewritten = dropped = 0
    for path in sorted(p for p in metadata.rglob("*") if p.is_file()):
        try:
            output = output_of(metadata, path)
        except (ValueError, UnicodeDecodeError):
            continue  # not a record of Snakemake's (a file of another tool): left alone
        if any(old in output for old in names):
            path.unlink()
            dropped += 1
            continue
        text = path.read_text()
        new = _replace_names(text, names)
        if new != text:
            atomic_write_text(path, new)
            rewritten += 1
    return rewritten, dropped
