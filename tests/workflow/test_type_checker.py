"""The type checker of `make lint` (mypy, configured in pyproject.toml) refuses a mapping passed
where a typed value belongs: below the place a run config or an evaluation is parsed, the
library's functions take the typed value only, and no run-time guard checks it again.

One snippet holds each such call twice, once with the typed value (which must check clean) and
once with the mapping as written (which must be an arg-type error on that very line). Only the
snippet is checked (imports followed silently), under the repository's own mypy settings."""

import re
import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

# Each call of a typed function below the boundary, on one line: with the typed value, then with
# the mapping as written (`raw`: a run config, one of its parts, or an evaluation).
CALLS = {
    "train": ("train(spec, splits, 'unused')", "train(raw, splits, 'unused')"),
    "build_optimizer": ("build_optimizer([torch.zeros(1)], run.optimizer)", "build_optimizer([torch.zeros(1)], raw)"),
    "lr_factor": ("lr_factor(run.schedule, 2, 1)", "lr_factor(raw, 2, 1)"),
    "build_policies": ("build_policies(run.method_config, 10, 2, torch.ones(10))",
                       "build_policies(raw, 10, 2, torch.ones(10))"),
    "Adversary": ("Adversary(run.method_config.adversary)", "Adversary(raw)"),
    "train_minutes": ("train_minutes(run)", "train_minutes(raw)"),
    "mem_mb": ("mem_mb(run)", "mem_mb(raw)"),
    "training_setting": ("training_setting(run)", "training_setting(raw)"),
    "identity": ("identity('run', run)", "identity('run', raw)"),
    "evaluate_minutes": ("evaluate_minutes(run, pgd)", "evaluate_minutes(run, raw)"),
    "predict": ("predict(model, images, labels, attack=pgd)", "predict(model, images, labels, attack=raw)"),
    "model_checks": ("model_checks(model, images, labels, pgd, [1.0])",
                     "model_checks(model, images, labels, raw, [1.0])"),
    # a typed evaluation of another kind where the checks' PGD reference belongs
    "model_checks of a Square evaluation": ("model_checks(model, images, labels, pgd, [1.0])",
                                            "model_checks(model, images, labels, square, [1.0])"),
}

HEADER = textwrap.dedent("""\
    from typing import Any

    import torch

    from study.config.evaluations import PgdEvaluation, SquareEvaluation
    from study.config.spec import ConfigSpec
    from study.config.types import RunConfig
    from study.data.splits import Splits
    from study.evaluate.checks import model_checks
    from study.predict import predict
    from study.resources import evaluate_minutes, mem_mb, train_minutes
    from study.run_directory import identity, training_setting
    from study.train.adversary import Adversary
    from study.train.engine import train
    from study.train.optim import build_optimizer, lr_factor
    from study.train.policies import build_policies


    def check(spec: ConfigSpec, run: RunConfig, pgd: PgdEvaluation, square: SquareEvaluation, raw: dict[str, Any],
              splits: Splits, model: torch.nn.Module, images: torch.Tensor, labels: torch.Tensor) -> None:
    """)


def _snippet() -> tuple[str, dict[int, str]]:
    lines, wrong = HEADER.splitlines(), {}
    for name, (typed, mapping) in CALLS.items():
        lines += ["    " + typed, "    " + mapping]
        wrong[len(lines)] = name
    return "\n".join(lines) + "\n", wrong


def test_a_mapping_where_a_typed_value_belongs_fails_the_type_checker(tmp_path):
    snippet, wrong = _snippet()
    path = tmp_path / "below_the_boundary.py"
    path.write_text(snippet)
    # the repository's settings (pyproject.toml), the snippet alone reported
    proc = subprocess.run(
        [sys.executable, "-m", "mypy", "--follow-imports=silent", "--cache-dir", str(tmp_path / "cache"),
         "--no-error-summary", "--show-error-codes", str(path)],
        cwd=ROOT, capture_output=True, text=True, timeout=300)
    errors = re.findall(rf"^{re.escape(str(path))}:(\d+): error: (.*)$", proc.stdout, re.M)
    assert proc.returncode == 1 and errors, proc.stdout + proc.stderr
    by_line: dict[int, list[str]] = {}
    for line, message in errors:
        by_line.setdefault(int(line), []).append(message)
    # every wrong line fails with an arg-type error; no typed line fails
    assert set(by_line) == set(wrong), (proc.stdout, wrong)
    for line, messages in by_line.items():
        assert all(m.endswith("[arg-type]") for m in messages), (wrong[line], messages)
