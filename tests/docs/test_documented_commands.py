"""Every shell command the documentation shows works as written.

Commands are taken from fenced code blocks (bash, sh, console, shell; plain blocks whose
lines start with a known program) of README.md, docs/*.md, data/README* and
results/README*, and from the comments of the Snakefile and the Snakemake profiles. Each
one must match a row of CLASSES, which says how it is checked: cheap `study` commands run
as written; Snakemake calls run as dry runs (-n, everything else verbatim; the paper
preset's whole DAG as the ci preset's, tests/workflow/test_workflow.py dry-runs the paper DAG);
expensive ones (`make demo`, `study bench`, `dvc repro`) only show that the target or
stage exists and that their arguments parse. A command no row matches fails the test with
its file and line, so a new kind of documented command cannot go unchecked."""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml
from helpers.workflow import BIN, command_env, copy_project

ROOT = Path(__file__).resolve().parents[2]
MARKDOWN = ["README.md", "docs/*.md", "data/README*", "results/README*"]
COMMENTED = ["Snakefile", "workflow/profiles/*/config*.yaml"]
PROGRAMS = ("study", "snakemake", "dvc", "make")
SHELL_FENCES = {"bash", "sh", "console", "shell"}

# How each documented command is checked: the first row whose pattern matches the whole
# command (programs without their `.venv/bin/` prefix) decides.
CLASSES = [
    (r"study (--help|[\w-]+ --help)", "run"),
    (r"study plan( --preset \w+)?", "run"),
    (r"study plan --cost( --preset \w+)?( --config-overrides .+)?", "run"),  # torch-free: seconds
    # rewrites the file's generated prices (tests/workflow/test_cost.py checks both files)
    (r"study plan --cost --write (README|docs/usage)\.md", "parse"),
    (r"study preflight( --preset \w+)?", "run"),  # reads files only: under a second
    (r"study comparisons", "run"),
    (r"study comparisons --write", "parse"),  # rewrites docs/methods.md (tests/unit/test_declared_comparisons.py)
    (r"study bench .*", "parse"),  # trains a PreAct ResNet-18 for minutes (or needs the GPU)
    (r"study readme-numbers .*", "parse"),  # reads the demo's results (tests/docs/test_readme_numbers.py runs it)
    # renames a results folder made before (tests/integration/test_rename_runs.py runs it)
    (r"study rename-runs( --dry-run)?", "parse"),
    # minutes to hours, or a GPU machine: the target exists, its recipe expands
    (r"make (demo|test|test-pipeline|test-compile|lint|setup|paper|gpu-check|gpu-bundle|plots|pull|pull-records"
     r"|report( PRESET=\w+)?)",
     "make"),
    (r"dvc repro", "dvc"),  # the whole study: its stages exist and name Snakemake targets that exist
    (r"dvc exp run( -n \w+)?( -S \S+)*( \w+)?", "dvc"),
    # the comparison of two experiments: tests/pipeline/test_dvc_exp_run.py runs them on the ci preset
    (r"dvc (exp show|exp diff|metrics diff|metrics show)( .*)?", "dvc"),
    # sharing results: tests/pipeline/test_dvc_share.py pushes and pulls through a real SSH server
    (r"dvc (push|pull|status|remote add -d \w+ \S+|remote modify --local \w+ keyfile \S+)", "dvc"),
    (r"snakemake (?!.*preset=)(.* )?(results/figures/all|all)( .*)?", "snakemake as ci"),  # the paper DAG
    (r"snakemake .*", "snakemake"),  # the demo and ci presets, and the paper's small targets
]


@dataclass(frozen=True)
class Documented:
    file: str
    line: int
    argv: tuple[str, ...]

    @property
    def text(self) -> str:
        return shlex.join(self.argv)

    def where(self) -> str:
        return f"{self.file}:{self.line}: `{self.text}`"


def _argv(text: str) -> tuple[str, ...]:
    argv = shlex.split(text, comments=True)
    if argv and argv[0].startswith(".venv/bin/"):
        argv[0] = argv[0].removeprefix(".venv/bin/")
    return tuple(argv)


def _fenced(path: Path) -> Iterator[Documented]:
    fence, start, pending = None, 0, ""
    for number, line in enumerate(path.read_text().splitlines(), start=1):
        if line.strip().startswith("```"):
            fence = line.strip()[3:].strip() if fence is None else None
            continue
        if fence is None or (fence and fence not in SHELL_FENCES):
            continue
        if fence == "console" and not pending and not line.strip().startswith("$ "):
            continue  # a console block's output
        text = line.strip().removeprefix("$ ")
        start = start if pending else number
        if text.endswith("\\"):
            pending += text[:-1] + " "
            continue
        text, pending = pending + text, ""
        words = text.split()
        # a plain ``` block: only lines that start with a known program
        if words and (fence or words[0].removeprefix(".venv/bin/") in PROGRAMS):
            yield Documented(str(path.relative_to(ROOT)), start, _argv(text))


def _commented(path: Path) -> Iterator[Documented]:
    for number, line in enumerate(path.read_text().splitlines(), start=1):
        match = re.match(r"#\s+((?:\.venv/bin/)?(?:" + "|".join(PROGRAMS) + r")\s.*)", line)
        if match:
            # `cmd    (what it does)`: the explanation after two spaces is not part of it
            text = re.split(r"\s{2,}\(", match.group(1))[0]
            yield Documented(str(path.relative_to(ROOT)), number, _argv(text))


def documented_commands() -> list[Documented]:
    found = []
    for pattern in MARKDOWN:
        for path in sorted(ROOT.glob(pattern)):
            found += _fenced(path)
    for pattern in COMMENTED:
        for path in sorted(ROOT.glob(pattern)):
            found += _commented(path)
    return found


def classify(cmd: Documented) -> str | None:
    return next((how for pattern, how in CLASSES if re.fullmatch(pattern, cmd.text)), None)


COMMANDS = documented_commands()


def test_the_documentation_shows_commands_and_every_one_is_classified():
    files = {c.file for c in COMMANDS}
    assert {"README.md", "Snakefile"} <= files and any(f.startswith("workflow/profiles/") for f in files)
    unclassified = [c.where() for c in COMMANDS if classify(c) is None]
    assert not unclassified, "documented commands with no row in CLASSES (add one, or fix the doc):\n" + "\n".join(
        unclassified)


def test_extraction_reads_fences_continuations_and_comments(tmp_path, monkeypatch):
    doc = tmp_path / "doc.md"
    doc.write_text("```bash\nstudy bench --out x.json \\\n    --images 4   # comment\n```\n"
                   "```\nsnakemake -n all\nnot a command\n```\n```python\nstudy = 1\n```\n"
                   "```console\n$ study --help\nusage: study ...\n```\n")
    monkeypatch.setattr(sys.modules[__name__], "ROOT", tmp_path)
    found = list(_fenced(doc))
    assert [(c.line, c.argv) for c in found] == [(2, ("study", "bench", "--out", "x.json", "--images", "4")),
                                                 (6, ("snakemake", "-n", "all")), (13, ("study", "--help"))]
    (tmp_path / "Snakefile").write_text("#   snakemake --cores 2 x    (what it does)\n# not a command\n")
    assert [c.argv for c in _commented(tmp_path / "Snakefile")] == [("snakemake", "--cores", "2", "x")]
    assert classify(Documented("f", 1, ("rm", "-rf", "/"))) is None


def _of(how: str) -> list[Documented]:
    return [c for c in COMMANDS if classify(c) == how]


@pytest.mark.parametrize("cmd", _of("run"), ids=lambda c: c.text)
def test_cheap_study_commands_run_as_written(cmd, monkeypatch, capsys):
    from study.cli import main

    monkeypatch.chdir(ROOT)
    try:
        rc = main(list(cmd.argv[1:]))
    except SystemExit as stop:  # --help
        rc = stop.code
    out = capsys.readouterr()
    assert rc == 0, f"{cmd.where()} failed:\n{out.err}"
    assert out.out.strip(), cmd.where()


@pytest.mark.parametrize("cmd", _of("parse"), ids=lambda c: c.text)
def test_expensive_study_commands_parse(cmd):
    from study.cli import build_parser

    args = build_parser().parse_args(list(cmd.argv[1:]))
    assert args.command == cmd.argv[1]


def test_make_targets_exist_and_expand():
    cmds = _of("make")
    assert cmds
    for cmd in cmds:
        proc = subprocess.run(["make", "-n", *cmd.argv[1:]], cwd=ROOT, capture_output=True, text=True, timeout=60)
        assert proc.returncode == 0 and proc.stdout.strip(), f"{cmd.where()}: make -n failed:\n{proc.stderr}"


def test_dvc_commands_parse_and_their_stages_run_existing_targets(tmp_path):
    from dvc.cli import parse_args

    cmds = _of("dvc")
    assert cmds
    for cmd in cmds:
        parse_args(list(cmd.argv[1:]))  # SystemExit on a bad argument
    stages = yaml.safe_load((ROOT / "dvc.yaml").read_text())["stages"]
    assert stages
    rules_text = "\n".join(p.read_text() for p in [ROOT / "Snakefile", *(ROOT / "workflow/rules").glob("*.smk")])
    rules = set(re.findall(r"^(?:local)?rule (\w+):", rules_text, re.M))
    project = copy_project(tmp_path)
    for name, stage in stages.items():
        # `python -m study.stage TARGET...` runs Snakemake on the targets (study/stage.py)
        argv = _argv(stage["cmd"].split("&&")[0])
        assert argv[:3] == ("python", "-m", "study.stage"), name
        from study.stage import build_parser

        args = build_parser().parse_args(list(argv[3:]))
        targets = tuple(args.targets)
        assert targets or args.write_params, name  # the resolve stage writes the configuration only
        for target in targets:
            if target in rules:
                continue
            # a file of the preset's own folder (`${preset}`, DVC's templating from params.yaml):
            # one the workflow makes, for the ci preset, in a dry run
            assert "${preset}" in target, f"dvc.yaml stage {name}: no target {target!r}"
            file = target.replace("${preset}", "ci")
            proc = subprocess.run([BIN / "snakemake", "-n", "--cores", "1", "--config", "preset=ci", "--", file],
                                  cwd=project, capture_output=True, text=True, timeout=120, env=command_env())
            assert proc.returncode == 0, f"dvc.yaml stage {name}: no rule makes {file}: {proc.stderr[-1500:]}"


def _split_snakemake(argv: tuple[str, ...]) -> tuple[tuple[str, ...], tuple[str, ...], tuple[str, ...]]:
    """(options, --config values, targets) of a snakemake command line."""
    options, config, targets = [], [], []
    args = list(argv[1:])
    i = 0
    while i < len(args):
        arg = args[i]
        if arg == "--":
            targets += args[i + 1:]
            break
        if arg == "--config":
            i += 1
            while i < len(args) and not args[i].startswith("-"):
                config.append(args[i])
                i += 1
            continue
        if arg.startswith("-"):
            options.append(arg)
            if i + 1 < len(args) and not args[i + 1].startswith("-") and arg not in ("-n", "-p", "--dry-run"):
                options.append(args[i + 1])
                i += 1
        else:
            targets.append(arg)
        i += 1
    return tuple(options), tuple(config), tuple(targets)


def _dry_run_argv(cmd: Documented) -> list[str]:
    """The command with -n, and with the ci preset where it would dry-run the paper DAG."""
    options, config, targets = _split_snakemake(cmd.argv)
    if classify(cmd) == "snakemake as ci":
        config = ("preset=ci", *config)
    dry = [] if {"-n", "--dry-run"} & set(options) else ["-n"]
    return [*dry, *options, *(("--config", *config) if config else ()), "--", *targets]


def test_snakemake_commands_dry_run(tmp_path, monkeypatch):
    """One dry run per distinct configuration (of all its commands' targets), two at a time;
    every other command of the same configuration has its options (profile, cores) checked
    by Snakemake's own parser."""
    from snakemake.cli import parse_args

    cmds = _of("snakemake") + _of("snakemake as ci")
    assert cmds
    groups: dict[tuple, list[Documented]] = {}
    for cmd in cmds:
        _, config, _ = _split_snakemake(cmd.argv)
        groups.setdefault((classify(cmd), tuple(sorted(config))), []).append(cmd)

    def dry_run(i_group):
        """The group's first command, with the targets of all its commands (one DAG)."""
        i, group = i_group
        (tmp_path / f"p{i}").mkdir()
        project = copy_project(tmp_path / f"p{i}")
        targets = list(dict.fromkeys(t for cmd in group for t in _split_snakemake(cmd.argv)[2]))
        argv = _dry_run_argv(group[0])
        argv = argv[:argv.index("--") + 1] + targets
        proc = subprocess.run([BIN / "snakemake", *argv], cwd=project, env=command_env(), capture_output=True,
                              text=True, timeout=300)
        return group, proc

    with ThreadPoolExecutor(max_workers=2) as pool:
        results = list(pool.map(dry_run, enumerate(groups.values())))
    for group, proc in results:
        out = proc.stdout + proc.stderr
        where = "\n".join(cmd.where() for cmd in group)
        assert proc.returncode == 0 and "This was a dry-run" in out, f"{where}:\n{out[-3000:]}"
    (tmp_path / "parse").mkdir()
    project = copy_project(tmp_path / "parse")
    monkeypatch.chdir(project)
    for group in groups.values():
        for cmd in group[1:]:
            parse_args(_dry_run_argv(cmd))  # SystemExit on an unknown option or a missing profile
