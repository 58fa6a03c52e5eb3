"""Checks against false robustness (gradient masking, a weak attack, records that are not the model's).

Two kinds. Checks of the checkpoint itself, run on a small stratified test subset:

- `records_reproduce`: the evaluation's own clean records agree with a fresh clean pass of
  the checkpoint on (at most `per_class` per class of) their samples: same label, same
  prediction. A prediction that differs only by a near tie of the fresh logits (GPU vs CPU
  arithmetic) is not counted. Fail when any other differs; flag when the records hold no
  clean evaluation, as nothing then ties them to the checkpoint.
- `outputs_logits`: the outputs are logits, not probabilities (attacks' losses need logits).
- `batch_independent`: a sample's output does not depend on its batch (BatchNorm in
  training mode, a randomized model).
- `falls_with_eps`: reference-PGD accuracy does not rise by more than 2 points as eps grows.
- `large_eps_breaks`: PGD at 16x the reference eps, capped where the ball covers the whole
  [0, 1] cube (eps 1 for L-inf, sqrt(pixels) for L2), leaves at most 5% accuracy; more is
  the mark of gradient masking (flag).
- `more_steps_no_stronger`: PGD-100 with 2 restarts and step eps/4 is not more than 3
  points below the reference PGD's accuracy; else the reported PGD is too weak (flag).

Checks of the per-sample records: robust accuracy never above clean accuracy per class,
AutoAttack never weaker than PGD per class on the same samples, a black-box attack not
beating the white-box ones by more than 5 points.

Each check has a status: 'pass', 'fail' (the results can't be trusted: `study check
--strict` exits non-zero) or 'flag' (suspicious, reported, not fatal), and the names of
the evaluations a status other than pass puts in doubt (`evaluations`): a model check names
them through its `scope` (SCOPES), resolved against the checked checkpoint's evaluations by
`resolve_scopes`; the robustness tables mark those evaluations untrusted.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field

import numpy as np
import pandas as pd
import torch
from torch import nn

from study.attacks.pgd import pgd_attack
from study.config.evaluations import PgdEvaluation
from study.data.augment import to_float
from study.predict import predict
from study.record_names import split_record_name

WHITE_BOX = ("pgd", "autoattack")
SCOPES = {
    "all": "every evaluation of the checked checkpoint",
    "attacks": "every evaluation under attack",
    "gradient": "the gradient-based (white-box) attacks: " + ", ".join(WHITE_BOX),
    "reference": "the reference PGD, and PGD evaluations of its budget with no more steps x restarts",
    "evaluations": "exactly the evaluations the check names",
}


@dataclass
class Check:
    name: str
    status: str  # pass | fail | flag
    detail: str
    values: dict = field(default_factory=dict)
    scope: str = "evaluations"  # which evaluations a status other than pass concerns (SCOPES)
    evaluations: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class Thresholds:
    """Settings and tolerances of the model checks (fractions of samples, not points)."""

    falls_tolerance: float = 0.02  # a rise of accuracy with eps larger than this fails falls_with_eps
    large_eps_factor: float = 16.0  # large_eps_breaks attacks at this multiple of the reference eps
    large_eps_steps: int = 20  # at least this many steps there (the reference's when more)
    large_eps_max_acc: float = 0.05  # accuracy left at the large eps above this: gradient masking
    strong_steps: int = 100
    strong_restarts: int = 2
    strong_alpha: float = 0.25  # step of the strong PGD, a fraction of eps
    strong_tolerance: float = 0.03  # the strong PGD more than this below the reference: too weak
    tie_tolerance: float = 1e-2  # logit gap, relative to 1 + the largest |logit|, counted as a tie


DEFAULT_THRESHOLDS = Thresholds()


def _status(ok: bool, bad: str = "fail") -> str:
    return "pass" if ok else bad


# --------------------------------------------------------------------------- the model


class PGDAccuracy:
    """Accuracy of `model` on float images `x` in [0, 1] with labels `y` under a PGD attack,
    each distinct attack run once."""

    def __init__(self, model: nn.Module, x: torch.Tensor, y: torch.Tensor, seed: int = 0):
        self.model, self.x, self.y, self.seed = model, x, y, seed
        self._done: dict[str, float] = {}

    def __call__(self, attack: PgdEvaluation) -> float:
        key = attack.model_dump_json()
        if key not in self._done:
            g = torch.Generator(device=self.x.device).manual_seed(self.seed)
            adv = pgd_attack(self.model, self.x, self.y, eps=attack.eps, alpha=attack.alpha, steps=attack.steps,
                             restarts=attack.restarts, norm=attack.norm, random_start=attack.random_start,
                             generator=g)
            with torch.no_grad():
                pred = self.model(adv).argmax(1)
            self._done[key] = float((pred == self.y).float().mean())
        return self._done[key]


def _scaled(pgd: PgdEvaluation, eps: float) -> PgdEvaluation:
    """The reference attack at another eps, its step scaled alike."""
    if eps == pgd.eps:
        return pgd  # the very attack, so that its accuracy is computed once
    return pgd.model_copy(update={"eps": eps, "alpha": pgd.alpha * eps / pgd.eps})


def model_checks(
    model: nn.Module, images: torch.Tensor, labels: torch.Tensor, pgd: PgdEvaluation,
    eps_factors: Sequence[float],
    *, thresholds: Thresholds = DEFAULT_THRESHOLDS, seed: int = 0,
) -> list[Check]:
    """Run the model on uint8 `images` (a small subset, on the model's device) as the
    evaluation does, with `pgd` the reference PGD evaluation (type, norm, eps, alpha, steps)."""
    x, y = to_float(images), labels
    with torch.no_grad():
        logits = model(x).float()
        alone = model(x[:4]).float()
    prob_like = bool((logits >= 0).all() and torch.allclose(logits.sum(1), torch.ones(len(x)), atol=1e-3))
    checks = [Check("outputs_logits", _status(not prob_like),
                    "outputs are probabilities (non-negative, rows sum to 1); attacks need logits"
                    if prob_like else "outputs are logits, not probabilities", scope="attacks")]
    same = torch.allclose(alone, logits[:4], atol=1e-4, rtol=1e-4)
    checks.append(Check("batch_independent", _status(same),
                        "a sample's output does not depend on its batch" if same else
                        "outputs change with the batch: training-mode BatchNorm or a randomized model", scope="all"))
    accuracy = PGDAccuracy(model, x, y, seed)
    eps_grid = [pgd.eps * f for f in sorted(eps_factors)]
    accs = [accuracy(_scaled(pgd, e)) for e in eps_grid]
    rises = [(eps_grid[i], eps_grid[i + 1]) for i in range(len(accs) - 1)
             if accs[i + 1] > accs[i] + thresholds.falls_tolerance]
    checks.append(Check("falls_with_eps", _status(not rises),
                        "PGD accuracy falls (or stays) as eps grows" if not rises else
                        f"PGD accuracy rises with eps between {rises}",
                        {"eps": eps_grid, "accuracy": accs}, scope="gradient"))
    checks.append(large_eps_breaks(accuracy, pgd, thresholds))
    checks.append(more_steps_no_stronger(accuracy, pgd, thresholds))
    return checks


def large_eps_breaks(accuracy: PGDAccuracy, pgd: PgdEvaluation, thresholds: Thresholds = DEFAULT_THRESHOLDS) -> Check:
    """PGD at a very large eps must break about every sample: any model is fooled once the
    attacker may move that far, unless its gradients do not lead anywhere (masking)."""
    norm = pgd.norm
    # Beyond this radius the ball holds the whole [0, 1] cube: a larger eps adds nothing.
    cover = 1.0 if norm == "linf" else math.sqrt(accuracy.x[0].numel())
    eps = min(thresholds.large_eps_factor * pgd.eps, cover)
    steps = max(pgd.steps, thresholds.large_eps_steps)
    attack = pgd.model_copy(update={"eps": eps, "alpha": 2.5 * eps / steps, "steps": steps, "restarts": 1})
    acc, limit = accuracy(attack), thresholds.large_eps_max_acc
    values = {"eps": eps, "steps": steps, "accuracy": acc, "max_accuracy": limit, "n": len(accuracy.y)}
    detail = (f"PGD-{steps} at eps {eps:.4g} ({norm}) leaves {100 * acc:.1f}% accuracy "
              f"(at most {100 * limit:.0f}% expected)")
    if acc > limit:
        detail += ": the attack does not get through, a sign of gradient masking"
    return Check("large_eps_breaks", _status(acc <= limit, "flag"), detail, values, scope="gradient")


def more_steps_no_stronger(accuracy: PGDAccuracy, pgd: PgdEvaluation,
                           thresholds: Thresholds = DEFAULT_THRESHOLDS) -> Check:
    """A much stronger PGD (more steps, restarts) must not find many more adversarial
    examples than the reference PGD: if it does, the reported PGD accuracy is too high."""
    strong = pgd.model_copy(update={"steps": thresholds.strong_steps, "restarts": thresholds.strong_restarts,
                                    "alpha": thresholds.strong_alpha * pgd.eps, "random_start": True})
    ref, acc, tol = accuracy(pgd), accuracy(strong), thresholds.strong_tolerance
    values = {"reference_accuracy": ref, "strong_accuracy": acc, "tolerance": tol, "n": len(accuracy.y),
              "strong": {"steps": strong.steps, "restarts": strong.restarts, "alpha": strong.alpha}}
    detail = (f"PGD-{strong.steps} x {strong.restarts} restarts: {100 * acc:.1f}% vs the reference "
              f"PGD-{pgd.steps}'s {100 * ref:.1f}% (tolerance {100 * tol:.0f} points)")
    if acc < ref - tol:
        detail += ": the reference PGD is too weak"
    return Check("more_steps_no_stronger", _status(acc >= ref - tol, "flag"), detail, values, scope="reference")


# --------------------------------------------------------------------------- records vs the checkpoint


def _first_per_class(frame: pd.DataFrame, per_class: int) -> pd.DataFrame:
    return frame.sort_values("index").groupby("label", sort=False).head(per_class).sort_values("index")


def _reproduce_one(model: nn.Module, test_x: torch.Tensor, test_y: torch.Tensor, frame: pd.DataFrame,
                   per_class: int, tie_tolerance: float, device: torch.device | str) -> dict:
    """Counts of the checked samples of one clean record that the checkpoint does not reproduce."""
    rows = _first_per_class(frame, per_class)
    index = rows["index"].to_numpy()
    outside = int(((index < 0) | (index >= len(test_y))).sum())
    if outside:
        return {"n": len(rows), "outside_test_set": outside, "label_differs": 0, "pred_differs": 0, "ties": 0}
    idx = torch.tensor(index, dtype=torch.int64)
    fresh = predict(model, test_x[idx], test_y[idx], batch_size=256, device=device, keep_logits=True)
    recorded = rows["pred"].to_numpy()
    differ = fresh.pred != recorded
    logits, rows_at = fresh.logits, np.arange(len(rows))
    if logits is None:  # keep_logits=True above
        raise RuntimeError("predict kept no logits though asked to")
    valid = (recorded >= 0) & (recorded < logits.shape[1])
    gap = logits[rows_at, fresh.pred] - logits[rows_at, np.where(valid, recorded, 0)]
    # GPU and CPU arithmetic may order two near-equal logits differently: not a different model.
    tie = differ & valid & (gap <= tie_tolerance * (1 + np.abs(logits).max(1)))
    return {"n": len(rows), "outside_test_set": 0,
            "label_differs": int((test_y[idx].numpy() != rows["label"].to_numpy()).sum()),
            "pred_differs": int((differ & ~tie).sum()), "ties": int(tie.sum())}


def records_reproduce(
    model: nn.Module, test_x: torch.Tensor, test_y: torch.Tensor, records: Mapping[str, tuple[pd.DataFrame, dict]],
    per_class: int, *, tie_tolerance: float = DEFAULT_THRESHOLDS.tie_tolerance, device: torch.device | str = "cpu",
) -> Check:
    """The clean records among `records` (evaluation name -> (frame, its evaluation config),
    all of the checked checkpoint) must be what `model` predicts on the uint8 test images
    `test_x` they index: the first `per_class` recorded samples of each class are redone."""
    clean = [name for name, (_, ev) in records.items() if ev.get("type", "clean") == "clean"]
    if not clean:
        return Check("records_reproduce", "flag", f"no clean records among {sorted(records)}: nothing ties the "
                     "records to the checkpoint", scope="all")
    counts = {name: _reproduce_one(model, test_x, test_y, records[name][0], per_class, tie_tolerance, device)
              for name in clean}
    bad = {name: c for name, c in counts.items()
           if c["outside_test_set"] or c["label_differs"] or c["pred_differs"]}
    if bad:
        detail = "; ".join(f"{name}: of {c['n']} samples {c['pred_differs']} predictions and {c['label_differs']} "
                           f"labels differ, {c['outside_test_set']} indices outside the test set of {len(test_y)}"
                           for name, c in bad.items())
        detail = f"the records are not the checkpoint's: {detail}"
    else:
        detail = f"the checkpoint reproduces the clean records {', '.join(clean)} on " + ", ".join(
            f"{c['n']} samples ({c['ties']} near ties)" for c in counts.values())
    return Check("records_reproduce", _status(not bad), detail, {"records": counts, "per_class": per_class},
                 scope="all")


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
             bad: str, doubted: str, tolerance: float = 0.0, overall: bool = False) -> Check:
    """Pass when class accuracy under `lo` <= under `hi` (+ tolerance) for every class, on
    common samples; with `overall`, compare the accuracy over all common samples instead.
    `doubted`: the evaluation a status other than pass puts in doubt."""
    lo, hi = _common(lo, hi)
    if lo.empty:
        return Check(name, "flag", f"{what}: no samples in common", evaluations=[doubted])
    c = len(class_names)
    a, b = _per_class(lo, c), _per_class(hi, c)
    values = {"classes": list(class_names), "lower": a.tolist(), "upper": b.tolist(), "n": len(lo)}
    if overall:
        acc_lo, acc_hi = float((lo["pred"] == lo["label"]).mean()), float((hi["pred"] == hi["label"]).mean())
        values.update(overall_lower=acc_lo, overall_upper=acc_hi, tolerance=tolerance)
        ok = acc_lo <= acc_hi + tolerance
        return Check(name, _status(ok, bad), f"{what} on {len(lo)} common samples: "
                     f"{100 * acc_lo:.1f}% vs {100 * acc_hi:.1f}% (tolerance {100 * tolerance:.0f} points)", values,
                     evaluations=[doubted])
    worse = [class_names[k] for k in range(c) if a[k] > b[k] + tolerance]
    detail = f"{what} on {len(lo)} common samples, every class" if not worse else f"{what} fails for {worse}"
    return Check(name, _status(not worse, bad), detail, values, evaluations=[doubted])


def record_checks(
    records: Mapping[str, tuple[pd.DataFrame, dict]], class_names: Sequence[str], *, blackbox_tolerance: float = 0.05
) -> list[Check]:
    """`records`: evaluation name -> (per-sample frame, its evaluation config), all of one checkpoint.

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
                                       f"{name} accuracy <= {clean} accuracy", class_names, "fail", name))
    for aa in by_type.get("autoattack", []):
        for pgd in by_type.get("pgd", []):
            if _same_budget(records[aa][1], records[pgd][1]):
                checks.append(_compare(f"autoattack_le_pgd:{aa}:{pgd}", records[aa][0], records[pgd][0],
                                       f"{aa} accuracy <= {pgd} accuracy", class_names, "fail", aa))
    for sq in by_type.get("square", []):
        for wb in [n for t in WHITE_BOX for n in by_type.get(t, [])]:
            if _same_budget(records[sq][1], records[wb][1]):
                checks.append(_compare(f"whitebox_le_square:{wb}:{sq}", records[wb][0], records[sq][0],
                                       f"white-box {wb} at least as strong as black-box {sq}", class_names,
                                       "flag", wb, blackbox_tolerance, overall=True))
    return checks


# The records' evaluation settings as they recorded them (a record written by an older run may
# predate a field), and the reference in the same form, compared key by key.
def _same_budget(a: Mapping, b: Mapping) -> bool:
    same_norm = a.get("norm", "linf") == b.get("norm", "linf")  # as recorded, see above
    return same_norm and abs(float(a["eps"]) - float(b["eps"])) < 1e-9


def _iterations(ev: Mapping) -> int:
    return int(ev.get("steps", 0)) * int(ev.get("restarts", 1))  # as recorded, see _same_budget


def _in_scope(scope: str, name: str, ev: Mapping, reference: Mapping) -> bool:
    kind = ev.get("type", "clean")  # as recorded, see _same_budget
    if scope == "all":
        return True
    if scope == "attacks":
        return kind != "clean"
    if scope == "gradient":
        return kind in WHITE_BOX
    if scope == "reference":
        # A PGD no stronger than the reference (same budget, no more iterations) is as suspect as it.
        return kind == "pgd" and (split_record_name(name)[0] == reference.get("name") or (  # as recorded
            _same_budget(ev, reference) and _iterations(ev) <= _iterations(reference)))
    raise ValueError(f"unknown check scope {scope!r}; valid: {', '.join(SCOPES)}")


def resolve_scopes(checks: Sequence[Check], evaluations: Mapping[str, Mapping], reference: Mapping) -> None:
    """Name, in each check's `evaluations`, those of `evaluations` (name -> evaluation config,
    of the checked checkpoint) that its scope covers; `reference`: the reference PGD."""
    for check in checks:
        if check.scope != "evaluations":
            check.evaluations = [n for n, ev in evaluations.items() if _in_scope(check.scope, n, ev, reference)]


def summarize(checks: Sequence[Check]) -> dict:
    status = "fail" if any(c.status == "fail" for c in checks) else \
        "flag" if any(c.status == "flag" for c in checks) else "pass"
    return {"status": status, "checks": [asdict(c) for c in checks]}
