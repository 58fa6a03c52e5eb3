"""A Snakemake logger plugin for the tests: Snakemake's own structured log records of a run
(its `--logger` plugin interface, snakemake-interface-logger-plugins), written as JSON lines to
`--logger-dagjson-path`, so that the tests read the DAG as Snakemake describes each job (rule,
files, resources, shell command, group) instead of parsing its printed log.

Snakemake finds it by its package name, once tests/helpers/snakemake_plugins is on the
PYTHONPATH of the `snakemake` process (tests/helpers/dag.py sets that)."""

import json
from dataclasses import dataclass, field
from logging import LogRecord
from typing import Optional

from snakemake_interface_logger_plugins.base import LogHandlerBase
from snakemake_interface_logger_plugins.common import LogEvent
from snakemake_interface_logger_plugins.settings import LogHandlerSettingsBase


@dataclass
class LogHandlerSettings(LogHandlerSettingsBase):
    # (Optional, not `str | None`: the settings parser unwraps typing.Optional only)
    path: Optional[str] = field(  # noqa: UP045
        default=None, metadata={"help": "the JSON-lines file to append the records to", "required": True})


def _files(files) -> list[str]:
    return [str(f) for f in files or ()]


def _record(record: LogRecord) -> dict | None:
    event = getattr(record, "event", None)
    if event == LogEvent.JOB_INFO:
        return {"event": "job", "jobid": record.jobid, "rule": record.rule_name,
                "input": _files(record.input), "output": _files(record.output), "log": _files(record.log),
                "wildcards": dict(record.wildcards or {}), "threads": record.threads,
                "resources": {k: v for k, v in dict(record.resources or {}).items() if not k.startswith("_")},
                "shell": record.shellcmd or "", "in_group": bool(record.indent)}
    if event == LogEvent.GROUP_INFO:
        return {"event": "group", "group": record.group_id, "jobs": sorted(j.jobid for j in record.jobs)}
    if event == LogEvent.RUN_INFO:
        return {"event": "stats", "stats": {k: int(v) for k, v in record.stats.items()}}
    return None


class LogHandler(LogHandlerBase):
    def emit(self, record: LogRecord) -> None:
        entry = _record(record)
        if entry is not None:
            with open(self.settings.path, "a") as out:
                out.write(json.dumps(entry, default=str) + "\n")

    @property
    def writes_to_stream(self) -> bool:
        return False

    @property
    def writes_to_file(self) -> bool:
        return False

    @property
    def has_filter(self) -> bool:
        return True

    @property
    def has_formatter(self) -> bool:
        return True

    @property
    def needs_rulegraph(self) -> bool:
        return False
