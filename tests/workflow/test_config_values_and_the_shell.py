"""No configuration value reaches a shell (docs/reliability.md, "Configuration values and the shell").

Every string a user can set is tried, enumerated from the configuration's schema
(workflow/schemas/params.schema.yaml, generated from study.config.types) over the ci preset:
shell code (`$(...)`, backticks, `;`), spaces and quotes. A value is either refused in one line
that names it, before any job exists, or it is planned; the jobs of everything that was planned,
all such values at once, are read from a Snakemake dry run and their printed shell commands run
through bash, `study`, `cp` and `cat` there being shell functions that only write down the words bash
gives them: no marker file appears, the files already there stay, and the words arrive whole.
Every `{field}` of every rule file's `shell:` is quoted (`:q`) or built quoted by common.smk."""

from __future__ import annotations

import copy
import re
import subprocess
from pathlib import Path

import pytest
import yaml
from helpers.workflow import BIN, ROOT, command_env, copy_project, project_dry_run

from study.config import ConfigError, Params, constructions, load_params, plan_runs
from study.config.zoo import plan_zoo

MARK = "MARK"
#: each way a word turns into shell code or splits, and all of them in one value
PAYLOADS = [f"x$(touch {MARK})", f"x`touch {MARK}`", f"x;touch {MARK}", "x y", "x'y", 'x"y']
COMBINED = f"""x y'z"w;v$(touch {MARK})u`touch {MARK}`"""
SCHEMA = yaml.safe_load((ROOT / "workflow/schemas/params.schema.yaml").read_text())


def _ci() -> dict:
    """The ci params as loaded (the mapping each payload is written into, then loaded again)."""
    return dict(load_params(ROOT / "params.yaml", {"preset": "ci"}, presets_dir=ROOT / "workflow/presets",
                            schema_path=ROOT / "workflow/schemas/params.schema.yaml").set_fields())


def _children(schema: dict) -> list[dict]:
    """The schemas a node's value may take: itself, and a union's alternatives."""
    return [schema, *(s for key in ("oneOf", "anyOf") for s in schema.get(key, []))]


def _sub(schema: dict, key) -> tuple[dict, str]:
    """The schema of `key` inside `schema`, and the key's name in a schema path (`*`: any name)."""
    for alt in _children(schema):
        if isinstance(key, int) and isinstance(alt.get("items"), dict):
            return alt["items"], "[]"
        if key in alt.get("properties", {}):
            return alt["properties"][key], str(key)
        if isinstance(alt.get("additionalProperties"), dict):
            return alt["additionalProperties"], "*"
    return {}, str(key)


def positions(value, schema: dict, path: tuple = (), spath: tuple = ()):
    """(kind, path in the config, path in the schema) of every string a user can write: each value,
    and each key of a mapping whose keys are names (additionalProperties)."""
    if isinstance(value, str):
        yield "value", path, spath
    elif isinstance(value, dict):
        if value and any(isinstance(a.get("additionalProperties"), dict) for a in _children(schema)):
            yield "key", path, spath
        for key, item in value.items():
            sub, name = _sub(schema, key)
            yield from positions(item, sub, (*path, key), (*spath, name))
    elif isinstance(value, list):
        for i, item in enumerate(value):
            sub, name = _sub(schema, i)
            yield from positions(item, sub, (*path, i), (*spath, name))


def _with(params: dict, kind: str, path: tuple, text: str) -> dict:
    out = copy.deepcopy(params)
    node = out
    for key in path[:-1] if kind == "value" else path:
        node = node[key]
    if kind == "value":
        node[path[-1]] = text
    else:  # a new name, with the settings of the first one
        node[text] = copy.deepcopy(next(iter(node.values())))
    return out


def _planned(params: dict) -> Params | None:
    """The params as the workflow plans them, or None when refused (a ConfigError's one line)."""
    try:
        loaded = load_params(base={**params, "preset": None}, presets_dir=ROOT / "workflow/presets",
                             schema_path=ROOT / "workflow/schemas/params.schema.yaml")
        plan = plan_runs(loaded)
        plan_zoo(loaded, root=ROOT)
        if loaded.features is not None:
            constructions(loaded, plan)
    except ConfigError as err:
        assert "\n" not in str(err)
        return None
    return loaded


def _one_per_schema_path(params: dict) -> list[tuple]:
    seen, out = set(), []
    for kind, path, spath in positions(params, SCHEMA):
        if path[:1] != ("preset",) and (kind, spath) not in seen:
            seen.add((kind, spath))
            out.append((kind, path, spath))
    return out


@pytest.fixture(scope="module")
def tried():
    """The ci params, {(kind, path): the payloads planned there} over every string position of them,
    and the positions whose schema has a pattern."""
    params = _ci()
    accepted, patterned = {}, set()
    for kind, path, spath in _one_per_schema_path(params):
        # a name a mapping defines, or a position whose schema has a pattern: each payload (a space
        # may pass a path's pattern, a `$` not); elsewhere all of them in one value
        if kind == "key" or "pattern" in str(_schema_at(spath)):
            patterned.add((kind, path))
        for text in PAYLOADS if (kind, path) in patterned else [COMBINED]:
            if _planned(_with(params, kind, path, text)) is not None:
                accepted.setdefault((kind, path), []).append(text)
    return params, accepted, patterned


def _schema_at(spath: tuple) -> dict:
    node = SCHEMA
    for name in spath:
        node, _ = _sub(node, 0 if name == "[]" else name) if name != "*" else (_children(node)[0].get(
            "additionalProperties") or {}, "*")
    return node


def test_every_position_is_tried_and_the_names_that_become_paths_are_refused(tried):
    params, accepted, patterned = tried
    tried_paths = {spath for _, _, spath in _one_per_schema_path(params)}
    # the enumeration reaches the names that become file names, wildcards and folders
    for spath in [("data", "root"), ("evaluations", "*"), ("methods", "*"), ("experiments", "[]", "group"),
                  ("experiments", "[]", "models", "[]"), ("robustness", "corruptions", "datasets", "[]"),
                  ("zoo", "models", "[]", "data")]:
        assert spath in tried_paths or spath[:-1] in tried_paths, spath
    assert ("value", ("data", "root")) in patterned and ("key", ("evaluations",)) in patterned
    for (kind, path), texts in accepted.items():
        # no name a mapping defines (an evaluation's, a method's) takes any of them; a path's pattern
        # takes a space; what else is planned with shell code in it is text that no rule reads as a
        # path (test_the_planned_values_never_run_as_shell_code runs it through the rules' commands)
        assert kind == "value", (path, texts)
        assert (kind, path) not in patterned or texts == ["x y"], (path, texts)
    assert accepted.get(("value", ("data", "root"))) == ["x y"], "a data folder with a space is planned"


@pytest.mark.parametrize("override, message", [
    ({"data": '{root: "d$(touch MARK)"}'},
     "data.root: 'd$(touch MARK)' is not valid; expected a string matching ^[A-Za-z0-9_.,+=@%:/ -]+$"),
    ({"evaluations": '{"c$(touch MARK)": {type: clean}}'},
     "evaluations: the name 'c$(touch MARK)' is not valid; expected a name matching ^[A-Za-z0-9_]+$"),
    ({"methods": "{\"at'x\": {base: at}}"},
     "methods: the name \"at'x\" is not valid; expected a name matching ^[a-z0-9]+(_[a-z0-9]+)*$"),
    ({"data": "{mirror: 'm;touch MARK'}"},
     "data.mirror: 'm;touch MARK' is not valid; expected a string or null matching ^[A-Za-z0-9_.,+=@%:/ -]+$"),
])
def test_a_name_with_shell_code_is_refused_in_one_line(override, message):
    with pytest.raises(ConfigError) as err:
        load_params(ROOT / "params.yaml", {"preset": "ci", **override}, presets_dir=ROOT / "workflow/presets",
                    schema_path=ROOT / "workflow/schemas/params.schema.yaml")
    assert str(err.value).endswith(message) and "\n" not in str(err.value), str(err.value)


def _snakemake_one_line(project: Path, *config: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(BIN / "snakemake"), "-n", "--cores", "1", "--config", "preset=ci", *config],
                          cwd=project, env=command_env(), capture_output=True, text=True, timeout=300)


def test_snakemake_refuses_shell_code_in_a_name_before_any_job(tmp_path):
    project = copy_project(tmp_path)
    proc = _snakemake_one_line(project, 'evaluations={"c$(touch MARK)": {type: clean}}')
    assert proc.returncode != 0
    assert ("evaluations: the name 'c$(touch MARK)' is not valid; expected a name matching ^[A-Za-z0-9_]+$"
            in proc.stdout + proc.stderr)
    assert not (project / MARK).exists() and not (project / "results").exists()


_BUILT_QUOTED = {  # params whose words common.smk builds with shlex.quote (cli_options, quoted_json, ...)
    "args", "sources", "evaluations", "checkpoint", "evaluation", "config", "init_from", "pgd", "strict",
    "strong", "settings", "options", "overrides", "weights", "copies", "corruptions", "checks", "metrics_dir"}
# numbers of a job's own (threads) and digits-only wildcards (evaluate_shard's `shard`, `shards`)
_PLAIN = {"threads", "wildcards.shard", "wildcards.shards"}


def _shell_fields() -> tuple[int, list[tuple[str, str]]]:
    """How many `shell:` the rule files have, and the fields of those read (file, field)."""
    count, fields = 0, []
    for smk in sorted((ROOT / "workflow/rules").glob("*.smk")):
        text = smk.read_text()
        count += len(re.findall(r"^\s*shell:", text, flags=re.M))
        for block in re.findall(r"\n(\s*)shell:\n((?:\1\s+(?:#.*|\".*\")\n)+)", text):
            for literal in re.findall(r'"(.*)"', block[1]):
                fields += [(smk.name, f) for f in re.findall(r"(?<!\{)\{([^{}]+)\}(?!\})", literal)]
            count -= 1
    return count, fields


def test_every_field_of_every_shell_command_is_quoted():
    unread, fields = _shell_fields()
    assert unread == 0 and len(fields) > 80, "every shell: of every rule file is read"
    unquoted = [(name, f) for name, f in fields if not f.endswith(":q") and f not in _PLAIN
                and not (f.startswith("params.") and f.removeprefix("params.") in _BUILT_QUOTED)]
    assert not unquoted, f"unquoted fields in shell commands: {unquoted}"


def _bash(shell: str, cwd: Path, argv: Path) -> subprocess.CompletedProcess:
    """A printed shell command through bash as Snakemake runs it (`set -euo pipefail`), with `study`,
    `cp` and `cat` (the copies of the selected preset's manifest and report) writing down their words
    instead of running."""
    stubs = (f'study() {{ printf "%s\\n" study "$@" >> {argv}; }}; cp() {{ printf "%s\\n" cp "$@" >> {argv}; }}; '
             f'cat() {{ printf "%s\\n" cat "$@" >> {argv}; }}; ')
    return subprocess.run(["bash", "-c", f"set -euo pipefail; {stubs}{shell}"], cwd=cwd, capture_output=True,
                          text=True, timeout=60)


def test_the_planned_values_never_run_as_shell_code(tried, tmp_path):
    params, accepted, _ = tried
    injected = params
    for (kind, path), texts in accepted.items():
        injected = _with(injected, kind, path, texts[-1])
    assert _planned(injected) is not None, "every value planned on its own is planned together"
    (tmp_path / "project").mkdir()
    project = copy_project(tmp_path / "project")
    (project / "workflow/presets/inject.yaml").write_text(yaml.safe_dump({**injected, "preset": "inject"}))
    dag = project_dry_run(["--cores", "1", "--config", "preset=inject", "--", "all", "bench_all"], project)
    assert len(dag.jobs) > 50
    assert {"prepare", "train", "merge_shards", "figures_all", "bench"} <= {j.rule for j in dag.jobs}
    keep = project / "results/keep.txt"
    keep.parent.mkdir(parents=True)
    keep.write_text("a record a failed job must not take with it\n")
    argv = tmp_path / "argv.txt"
    for job in dag.jobs:
        for file in [*job.log, *job.output]:  # (a job's shell may write into either)
            (project / file).parent.mkdir(parents=True, exist_ok=True)
        proc = _bash(job.shell, project, argv)
        assert proc.returncode == 0, (job.rule, job.shell[:300], proc.stderr)
    words = argv.read_text().splitlines()
    assert not list(project.rglob(f"*{MARK}*")) and not list(tmp_path.glob(MARK)), "no value ran as shell code"
    assert keep.read_text().startswith("a record")
    assert words.count("study") == len([j for j in dag.jobs if j.shell.startswith("study")]) + sum(
        j.shell.count("&& study") for j in dag.jobs)
    # the data folder arrives as one word, space and all
    root = injected["data"]["root"]
    assert " " in root and f"{root}/prepared/synthetic-default.pt" in words and f"{root}/raw" in words
    assert not [w for w in words if w.startswith(root.split(" ")[-1] + "/")], "no path split at its space"
