"""The pipeline tier: the slow end-to-end runs (the ci preset's whole DAG through Snakemake
and DVC, the zoo's and the headline's jobs, the bench's processes, the real data archives);
`make test-pipeline` runs them. Every test here is marked `pipeline`."""

import pytest
from helpers.tiers import mark_folder

#: a user property a test records (`record_property`) for the run's summary: the estimate
#: against the benchmarks, which CI's log shows whether or not the test's output is captured
SUMMARY_PROPERTY = "summary"


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    mark_folder(config, items, "pipeline", "pipeline")


def pytest_terminal_summary(terminalreporter, exitstatus: int, config: pytest.Config) -> None:
    """Print what the tests recorded for the summary (with -n too: the workers send their
    reports' user properties to the controller)."""
    for report in terminalreporter.stats.get("passed", []) + terminalreporter.stats.get("failed", []):
        for name, value in getattr(report, "user_properties", ()):
            if name == SUMMARY_PROPERTY and report.when == "call":
                terminalreporter.write_sep("-", f"{report.nodeid.split('::')[-1]}: recorded for the summary")
                terminalreporter.write_line(str(value))
