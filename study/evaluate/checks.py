"""Checks against false robustness (gradient masking, a weak attack, a model run wrongly).

Two kinds: checks of the model itself (eval mode, logits not probabilities, eps 0 leaves
predictions unchanged, robustness falls as eps grows), which run it on a small test subset,
and checks of the per-sample records (robust accuracy never above clean accuracy per class,
AutoAttack never weaker than PGD per class on the same samples, a black-box attack beating
the white-box ones). Each check has a status: 'pass', 'fail' (the results can't be
trusted: `study check` exits non-zero) or 'flag' (suspicious, reported, not fatal).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field

import numpy as np
import pandas as pd
import torch
from torch import nn

from study.attacks.pgd import pgd_attack
from study.data.augment import to_float

WHITE_BOX = ("pgd", "autoattack")


@dataclass
class Check:
    name: str
    status: str  # pass | fail | flag
    detail: str
    values: dict = field(default_factory=dict)


def _status(ok: bool, bad: str = "fail") -> str:
    return "pass" if ok else bad


# --------------------------------------------------------------------------- the model


def model_checks(
    model: nn.Module, images: torch.Tensor, labels: torch.Tensor, pgd: Mapping, eps_factors: Sequence[float],
    *, tolerance: float = 0.02, seed: int = 0,
) -> list[Check]:
    """Run the model on uint8 `images` (a small subset) as the evaluation does."""
    x, y = to_float(images), labels
    checks = [Check("eval_mode", _status(not model.training),
                    "the model is in eval mode" if not model.training else
                    "the model is in training mode: BatchNorm and dropout act per batch")]
    with torch.no_grad():
        logits = model(x).float()
        alone = model(x[:4]).float()
    prob_like = bool((logits >= 0).all() and torch.allclose(logits.sum(1), torch.ones(len(x)), atol=1e-3))
    checks.append(Check("outputs_logits", _status(not prob_like),
                        "outputs are probabilities (non-negative, rows sum to 1); attacks need logits"
                        if prob_like else "outputs are logits, not probabilities"))
    same = torch.allclose(alone, logits[:4], atol=1e-4, rtol=1e-4)
    checks.append(Check("batch_independent", _status(same),
                        "a sample's output does not depend on its batch" if same else
                        "outputs change with the batch: training-mode BatchNorm or a randomized model"))
    clean_pred = logits.argmax(1)

    def robust_acc(eps: float) -> tuple[float, torch.Tensor]:
        g = torch.Generator().manual_seed(seed)
        adv = pgd_attack(model, x, y, eps=eps, alpha=pgd["alpha"] * eps / pgd["eps"], steps=pgd["steps"],
                         restarts=pgd.get("restarts", 1), norm=pgd.get("norm", "linf"),
                         random_start=pgd.get("random_start", True), generator=g)
        with torch.no_grad():
            pred = model(adv).argmax(1)
        return float((pred == y).float().mean()), pred

    _, pred0 = robust_acc(0.0)
    changed = int((pred0 != clean_pred).sum())
    checks.append(Check("eps0_unchanged", _status(changed == 0),
                        f"PGD with eps 0 changed {changed} of {len(y)} predictions",
                        {"changed": changed, "n": len(y)}))
    eps_grid = [pgd["eps"] * f for f in sorted(eps_factors)]
    accs = [robust_acc(e)[0] for e in eps_grid]
    rises = [(eps_grid[i], eps_grid[i + 1]) for i in range(len(accs) - 1) if accs[i + 1] > accs[i] + tolerance]
    checks.append(Check("falls_with_eps", _status(not rises),
                        "PGD accuracy falls (or stays) as eps grows" if not rises else
                        f"PGD accuracy rises with eps between {rises}",
                        {"eps": eps_grid, "accuracy": accs}))
    return checks


# --------------------------------------------------------------------------- the records


def _common(a: pd.DataFrame, b: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    keep = set(a["index"]) & set(b["index"])
    return (a[a["index"].isin(keep)].sort_values("index"), b[b["index"].isin(keep)].sort_values("index"))


def _per_class(frame: pd.DataFrame, num_classes: int) -> np.ndarray:
    n = np.bincount(frame["label"], minlength=num_classes)
    ok = np.bincount(frame["label"][frame["pred"] == frame["label"]], minlength=num_classes)
    with np.errstate(invalid="ignore", divide="ignore"):
        return ok / n


def _compare(name: str, lo: pd.DataFrame, hi: pd.DataFrame, what: str, class_names: Sequence[str],
             bad: str, tolerance: float = 0.0, overall: bool = False) -> Check:
    """Pass when class accuracy under `lo` <= under `hi` (+ tolerance) for every class, on
    common samples; with `overall`, compare the accuracy over all common samples instead."""
    lo, hi = _common(lo, hi)
    if lo.empty:
        return Check(name, "flag", f"{what}: no samples in common")
    c = len(class_names)
    a, b = _per_class(lo, c), _per_class(hi, c)
    values = {"classes": list(class_names), "lower": a.tolist(), "upper": b.tolist(), "n": len(lo)}
    if overall:
        acc_lo, acc_hi = float((lo["pred"] == lo["label"]).mean()), float((hi["pred"] == hi["label"]).mean())
        values.update(overall_lower=acc_lo, overall_upper=acc_hi, tolerance=tolerance)
        ok = acc_lo <= acc_hi + tolerance
        return Check(name, _status(ok, bad), f"{what} on {len(lo)} common samples: "
                     f"{100 * acc_lo:.1f}% vs {100 * acc_hi:.1f}% (tolerance {100 * tolerance:.0f} points)", values)
    worse = [class_names[k] for k in range(c) if a[k] > b[k] + tolerance]
    detail = f"{what} on {len(lo)} common samples, every class" if not worse else f"{what} fails for {worse}"
    return Check(name, _status(not worse, bad), detail, values)


def record_checks(
    records: Mapping[str, tuple[pd.DataFrame, dict]], class_names: Sequence[str], *, blackbox_tolerance: float = 0.05
) -> list[Check]:
    """`records`: evaluation name -> (per-sample frame, its evaluation config).

    Black-box vs white-box is compared over all common samples, with a tolerance: per class
    and on small subsets the two attacks' noise alone would raise flags."""
    by_type: dict[str, list[str]] = {}
    for name, (_, ev) in records.items():
        by_type.setdefault(ev.get("type", "clean"), []).append(name)
    checks = []
    for clean in by_type.get("clean", []):
        for name, (frame, ev) in records.items():
            if ev.get("type") != "clean":
                checks.append(_compare(f"robust_le_clean:{name}", frame, records[clean][0],
                                       f"{name} accuracy <= {clean} accuracy", class_names, "fail"))
    for aa in by_type.get("autoattack", []):
        for pgd in by_type.get("pgd", []):
            if _same_budget(records[aa][1], records[pgd][1]):
                checks.append(_compare(f"autoattack_le_pgd:{aa}:{pgd}", records[aa][0], records[pgd][0],
                                       f"{aa} accuracy <= {pgd} accuracy", class_names, "fail"))
    for sq in by_type.get("square", []):
        for wb in [n for t in WHITE_BOX for n in by_type.get(t, [])]:
            if _same_budget(records[sq][1], records[wb][1]):
                checks.append(_compare(f"whitebox_le_square:{wb}:{sq}", records[wb][0], records[sq][0],
                                       f"white-box {wb} at least as strong as black-box {sq}", class_names,
                                       "flag", blackbox_tolerance, overall=True))
    return checks


def _same_budget(a: Mapping, b: Mapping) -> bool:
    return a.get("norm", "linf") == b.get("norm", "linf") and abs(float(a["eps"]) - float(b["eps"])) < 1e-9


def summarize(checks: Sequence[Check]) -> dict:
    status = "fail" if any(c.status == "fail" for c in checks) else \
        "flag" if any(c.status == "flag" for c in checks) else "pass"
    return {"status": status, "checks": [asdict(c) for c in checks]}
