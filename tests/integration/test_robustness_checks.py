"""Checks against false robustness: a sound model passes them, broken artefacts trip them."""

import numpy as np
import pandas as pd
import pytest
import torch
from torch import nn

from study.config.evaluations import PgdJob
from study.config.spec import EvaluationSpec
from study.data.augment import to_float
from study.data.splits import stratified_subset
from study.evaluate.checks import (
    Check,
    Thresholds,
    model_checks,
    record_checks,
    records_reproduce,
    resolve_scopes,
    summarize,
)
from study.predict import predict

EPS = 24 / 255
PGD = {"name": "pgd20", "type": "pgd", "norm": "linf", "eps": EPS, "alpha": EPS / 8, "steps": 20, "restarts": 2}
SQUARE = {"name": "square", "type": "square", "norm": "linf", "eps": EPS, "queries": 200}
# One PGD step of a hundredth of eps from the clean image: it barely moves the sample.
def _typed(evaluation: dict):
    """An evaluation typed as the command line types it (study.config.spec)."""
    return EvaluationSpec.parse(evaluation).config


WEAK = {**PGD, "name": "pgd1", "steps": 1, "alpha": EPS / 100, "restarts": 1, "random_start": False}


pytestmark = pytest.mark.usefixtures("one_thread")


class NearestMean(nn.Module):
    """A differentiable classifier: logits = -squared distance to each class mean image."""

    def __init__(self, means: torch.Tensor, quantize: int | None = None, softmax: bool = False):
        super().__init__()
        self.register_buffer("means", means.flatten(1))
        self.quantize, self.softmax = quantize, softmax

    def forward(self, x):
        if self.quantize:  # rounding the input: zero gradients, the classic masking defence
            x = torch.round(x * self.quantize) / self.quantize
        f = x.flatten(1)
        distance = (f * f).sum(1, keepdim=True) - 2 * f @ self.means.T + (self.means**2).sum(1)
        logits = -distance / 500
        return logits.softmax(1) if self.softmax else logits


def _subset(splits, per_class=5):
    idx = stratified_subset(splits.test_y, per_class)
    return splits.test_x[idx], splits.test_y[idx], idx


def _means(splits):
    x = to_float(splits.train_x)
    return torch.stack([x[splits.train_y == c].mean(0) for c in range(len(splits.class_names))])


def _records(model, images, labels, idx, evaluations=({"name": "clean", "type": "clean"}, PGD, SQUARE)):
    out = {}
    for ev in evaluations:
        p = predict(model, images, labels, attack=None if ev["type"] == "clean" else _typed(ev), batch_size=len(labels))
        out[ev["name"]] = (pd.DataFrame({"index": idx.numpy(), "label": labels.numpy(), "pred": p.pred}), ev)
    return out


def _gap(check):
    return check.values["overall_lower"] - check.values["overall_upper"]


def test_sound_model_passes_every_check(synthetic_splits):
    images, labels, idx = _subset(synthetic_splits)
    sound = NearestMean(_means(synthetic_splits)).eval()
    records = _records(sound, images, labels, idx)
    checks = [records_reproduce(sound, synthetic_splits.test_x, synthetic_splits.test_y, records, per_class=3)]
    checks += model_checks(sound, images, labels, _typed(PGD), [0.25, 0.5, 1.0])
    checks += record_checks(records, list(synthetic_splits.class_names))
    by = {c.name: c for c in checks}
    expected = {"records_reproduce", "outputs_logits", "batch_independent", "falls_with_eps", "large_eps_breaks",
                "more_steps_no_stronger", "robust_le_clean:pgd20", "robust_le_clean:square"}
    assert expected <= set(by)
    assert all(by[name].status == "pass" for name in expected), [by[n] for n in expected]
    assert by["records_reproduce"].values["records"]["clean"]["n"] == 30  # 3 of each of 10 classes
    # L-inf 16 x 24/255 is capped at 1, where the ball holds every image; nothing survives it.
    assert by["large_eps_breaks"].values["eps"] == 1.0 and by["large_eps_breaks"].values["accuracy"] <= 0.05
    strong = by["more_steps_no_stronger"].values
    clean_acc = float((records["clean"][0]["pred"] == records["clean"][0]["label"]).mean())
    assert strong["strong_accuracy"] < clean_acc - 0.2  # a real attack, not a no-op that trivially matches
    assert strong["strong_accuracy"] >= strong["reference_accuracy"] - 0.03


def test_gradient_masking_is_flagged(synthetic_splits):
    images, labels, idx = _subset(synthetic_splits)
    names = list(synthetic_splits.class_names)
    means = _means(synthetic_splits)
    sound_square = {c.name: c for c in record_checks(_records(NearestMean(means), images, labels, idx), names)}

    broken = NearestMean(means, quantize=4).eval()
    records = _records(broken, images, labels, idx)
    by = {c.name: c for c in model_checks(broken, images, labels, _typed(PGD), [1.0])
          + record_checks(records, names)}
    # Rounding leaves PGD no gradient: even where any image is allowed, most samples survive.
    assert by["large_eps_breaks"].status == "flag" and by["large_eps_breaks"].values["accuracy"] > 0.3
    # Square, which needs no gradients, does not care: the black-box attack beats the white-box one.
    square = by["whitebox_le_square:pgd20:square"]
    assert square.status == "flag" and square.evaluations == ["pgd20"]
    assert _gap(square) > 0.3 and _gap(square) > _gap(sound_square["whitebox_le_square:pgd20:square"]) + 0.2
    # The flag puts the gradient-based evaluation in doubt, not the clean or the black-box one.
    resolve_scopes(list(by.values()), {name: ev for name, (_, ev) in records.items()}, PGD)
    assert by["large_eps_breaks"].evaluations == ["pgd20"]
    assert summarize(list(by.values()))["status"] == "flag"


def test_weak_reference_pgd_is_flagged(synthetic_splits):
    images, labels, _ = _subset(synthetic_splits, 3)
    sound = NearestMean(_means(synthetic_splits)).eval()
    by = {c.name: c for c in model_checks(sound, images, labels, _typed(WEAK), [1.0],
                                          thresholds=Thresholds(strong_steps=50))}
    check = by["more_steps_no_stronger"]
    assert check.status == "flag", check
    assert check.values["strong_accuracy"] < check.values["reference_accuracy"] - 0.2
    # The weak reference and a PGD of its budget with no more iterations are in doubt; PGD-20 is not.
    evaluations = {"clean": {"type": "clean"}, "pgd1@best": WEAK, "pgd1_other": {**WEAK, "name": "pgd1_other"},
                   "pgd20": PGD, "pgd1_l2": {**WEAK, "norm": "l2"}}
    resolve_scopes([check], evaluations, WEAK)
    assert check.evaluations == ["pgd1@best", "pgd1_other"]


def test_records_of_another_model_do_not_reproduce(synthetic_splits):
    images, labels, idx = _subset(synthetic_splits, 4)
    test_x, test_y = synthetic_splits.test_x, synthetic_splits.test_y
    means = _means(synthetic_splits)
    sound = NearestMean(means).eval()
    clean = {"name": "clean", "type": "clean"}
    other = NearestMean(means.roll(1, 0)).eval()  # class k's mean answers for class k + 1
    check = records_reproduce(sound, test_x, test_y, _records(other, images, labels, idx, [clean]), per_class=4)
    assert check.status == "fail" and check.scope == "all"
    assert check.values["records"]["clean"]["pred_differs"] > 20, check.values
    own = _records(sound, images, labels, idx, [clean])
    assert records_reproduce(sound, test_x, test_y, own, per_class=4).status == "pass"
    # Labels that are not the test set's are not this evaluation's records either.
    relabelled = {"clean": (own["clean"][0].assign(label=lambda f: (f["label"] + 1) % 10), clean)}
    check = records_reproduce(sound, test_x, test_y, relabelled, per_class=4)
    assert check.status == "fail" and check.values["records"]["clean"]["label_differs"] == 40
    no_clean = records_reproduce(sound, test_x, test_y, {"pgd20": (own["clean"][0], PGD)}, per_class=4)
    assert no_clean.status == "flag" and "no clean records" in no_clean.detail


def test_a_near_tie_is_not_a_different_model(synthetic_splits):
    test_x, test_y = synthetic_splits.test_x, synthetic_splits.test_y
    sound = NearestMean(_means(synthetic_splits)).eval()
    idx = torch.tensor([0])
    p = predict(sound, test_x[idx], test_y[idx], keep_logits=True)
    runner_up = int(np.argsort(p.logits[0])[-2])
    frame = pd.DataFrame({"index": [0], "label": [int(test_y[0])], "pred": [runner_up]})
    gap = float(p.logits[0].max() - p.logits[0, runner_up]) / (1 + float(np.abs(p.logits[0]).max()))
    records = {"clean": (frame, {"type": "clean"})}
    assert records_reproduce(sound, test_x, test_y, records, 1, tie_tolerance=gap * 2).status == "pass"
    assert records_reproduce(sound, test_x, test_y, records, 1, tie_tolerance=gap / 2).status == "fail"


def test_probabilities_and_batch_dependence_fail(synthetic_splits):
    images, labels, _ = _subset(synthetic_splits, 2)
    means = _means(synthetic_splits)
    cheap = Thresholds(strong_steps=2, strong_restarts=1)
    probs = {c.name: c for c in model_checks(NearestMean(means, softmax=True).eval(), images, labels,
                                             _typed(PGD), [1.0],
                                             thresholds=cheap)}
    assert probs["outputs_logits"].status == "fail" and probs["outputs_logits"].scope == "attacks"
    assert probs["batch_independent"].status == "pass"

    pixels = images[0].numel()
    bn = nn.Sequential(nn.Flatten(), nn.BatchNorm1d(pixels), nn.Linear(pixels, 10)).train()
    status = {c.name: c.status for c in model_checks(bn, images, labels, _typed(PGD), [1.0], thresholds=cheap)}
    assert status["batch_independent"] == "fail" and status["outputs_logits"] == "pass"


def test_record_checks_catch_an_attack_weaker_than_pgd():
    idx = pd.Series(range(6))
    labels = pd.Series([0, 0, 0, 1, 1, 1])
    clean = pd.DataFrame({"index": idx, "label": labels, "pred": labels})
    pgd = clean.assign(pred=[1, 1, 0, 1, 0, 0])  # class 0: 1/3, class 1: 1/3
    aa = clean.assign(pred=[1, 0, 0, 1, 0, 0])  # class 0: 2/3 > PGD's 1/3
    ev = {"norm": "linf", "eps": 0.03}
    checks = record_checks({"clean": (clean, {"type": "clean"}), "pgd": (pgd, {"type": "pgd", **ev}),
                            "aa": (aa, {"type": "autoattack", **ev})}, ["a", "b"])
    by = {c.name: c for c in checks}
    assert by["autoattack_le_pgd:aa:pgd"].status == "fail"
    assert "['a']" in by["autoattack_le_pgd:aa:pgd"].detail
    assert by["autoattack_le_pgd:aa:pgd"].evaluations == ["aa"]
    assert by["robust_le_clean:pgd"].status == "pass"
    assert summarize(checks)["status"] == "fail"


def test_bad_scopes_and_references_are_refused():
    with pytest.raises(ValueError, match="'everything'; valid: all, attacks"):
        resolve_scopes([Check("x", "flag", "", scope="everything")], {"clean": {"type": "clean"}}, PGD)
    # a reference is typed where it enters (`study check --pgd`): another type is refused there
    # (and mypy refuses the checks a typed evaluation of another kind: tests/workflow/test_type_checker.py)
    with pytest.raises(ValueError, match="pgd: type: 'square' is not valid"):
        EvaluationSpec.parse(SQUARE, "pgd", PgdJob)
    with pytest.raises(ValueError, match="norm: 'l1' is not valid; expected one of linf, l2"):
        EvaluationSpec.parse({**PGD, "norm": "l1"}, "pgd", PgdJob)

