"""Checks against false robustness: a sound model passes them, broken ones trip them."""

import pandas as pd
import torch
from torch import nn

from study.data.augment import to_float
from study.evaluate.checks import model_checks, record_checks, summarize
from study.predict import predict

EPS = 24 / 255
PGD = {"type": "pgd", "norm": "linf", "eps": EPS, "alpha": EPS / 8, "steps": 20, "restarts": 2}


class NearestMean(nn.Module):
    """A differentiable classifier: logits = -squared distance to each class mean image."""

    def __init__(self, means: torch.Tensor, quantize: int | None = None, softmax: bool = False):
        super().__init__()
        self.register_buffer("means", means.flatten(1))
        self.quantize, self.softmax = quantize, softmax

    def forward(self, x):
        if self.quantize:  # rounding the input: zero gradients, the classic masking defence
            x = torch.round(x * self.quantize) / self.quantize
        logits = -((x.flatten(1)[:, None, :] - self.means[None]) ** 2).sum(-1) / 500
        return logits.softmax(1) if self.softmax else logits


def _subset(splits, per_class=5):
    from study.data.splits import stratified_subset

    idx = stratified_subset(splits.test_y, per_class)
    return splits.test_x[idx], splits.test_y[idx], idx


def _means(splits):
    x = to_float(splits.train_x)
    return torch.stack([x[splits.train_y == c].mean(0) for c in range(len(splits.class_names))])


def _records(model, images, labels, idx):
    out = {}
    evs = {"clean": {"type": "clean"}, "pgd": PGD,
           "square": {"type": "square", "norm": "linf", "eps": EPS, "queries": 200}}
    for name, ev in evs.items():
        p = predict(model, images, labels, attack=ev, batch_size=len(labels))
        out[name] = (pd.DataFrame({"index": idx.numpy(), "label": labels.numpy(), "pred": p.pred}), ev)
    return out


def _gap(check):
    return check.values["overall_lower"] - check.values["overall_upper"]


def test_sound_model_passes_and_rounding_model_is_flagged(synthetic_splits):
    images, labels, idx = _subset(synthetic_splits)
    names = list(synthetic_splits.class_names)
    means = _means(synthetic_splits)

    sound = NearestMean(means).eval()
    checks = model_checks(sound, images, labels, PGD, [0.25, 0.5, 1.0])
    checks += record_checks(_records(sound, images, labels, idx), names)
    assert all(c.status == "pass" for c in checks if c.name != "whitebox_le_square:pgd:square"), checks
    sound_square = next(c for c in checks if c.name == "whitebox_le_square:pgd:square")

    broken = NearestMean(means, quantize=4).eval()
    by = {c.name: c for c in record_checks(_records(broken, images, labels, idx), names)}
    # PGD sees zero gradients and leaves accuracy at the clean level; Square, which needs
    # no gradients, does not care: the black-box attack beating the white-box one is flagged.
    square = by["whitebox_le_square:pgd:square"]
    assert square.status == "flag"
    assert _gap(square) > 0.3 and _gap(square) > _gap(sound_square) + 0.2
    assert summarize(list(by.values()))["status"] == "flag"


def test_probabilities_and_training_mode_fail(synthetic_splits):
    images, labels, _ = _subset(synthetic_splits, 4)
    means = _means(synthetic_splits)
    probs = {c.name: c.status for c in model_checks(NearestMean(means, softmax=True).eval(), images, labels, PGD,
                                                     [1.0])}
    assert probs["outputs_logits"] == "fail"

    bn = nn.Sequential(nn.Flatten(), nn.BatchNorm1d(3 * 32 * 32), nn.Linear(3 * 32 * 32, 10)).train()
    status = {c.name: c.status for c in model_checks(bn, images, labels, PGD, [1.0])}
    assert status["eval_mode"] == "fail" and status["batch_independent"] == "fail"


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
    assert by["robust_le_clean:pgd"].status == "pass"
    assert summarize(checks)["status"] == "fail"
