"""No host wait per batch (issue 25): the training step loop and the evaluation loop read
nothing back from the device per batch, so a GPU never idles while Python waits.

On the CPU the reads are counted: every Tensor method that hands a value to the host
(item, tolist, numpy, cpu, bool/int/float/index), the ops whose output size or checks read
the device (nonzero, multinomial), and every host-to-device copy that would make the host
wait on a GPU (blocking, or from memory that is not pinned). The count of an epoch or an
evaluation must not grow with its number of batches. On a GPU, torch's sync debug mode
turns any synchronisation inside the loops into an error."""

from __future__ import annotations

import contextlib
from collections import Counter

import pytest
import torch
from helpers.host_reads import host_read_state

from study.config import EvaluationSpec, resolve_evaluation
from study.predict import predict
from study.train.epoch import EpochPolicyState, train_epoch
from study.train.policies import CFPTargets
from study.train.step import TrainStep

TENSOR_READS = ("item", "tolist", "numpy", "cpu", "__bool__", "__int__", "__float__", "__index__", "nonzero",
                "multinomial")
TORCH_READS = ("nonzero", "multinomial")


def _waiting_copy(t: torch.Tensor, args: tuple, kwargs: dict) -> bool:
    """Whether t.to(*args, **kwargs) is a host-to-device copy that a GPU would make the host wait for."""
    device, _, non_blocking, _ = torch._C._nn._parse_to(*args, **kwargs)
    if device is None or t.device.type != "cpu":
        return False
    if not non_blocking:
        return True
    return device.type != "cpu" and not t.is_pinned()


@contextlib.contextmanager
def counted_reads():
    """Counter of the host reads (by name) made inside the block."""
    counts: Counter = Counter()
    saved = [(torch.Tensor, name, getattr(torch.Tensor, name)) for name in (*TENSOR_READS, "to")]
    saved += [(torch, name, getattr(torch, name)) for name in TORCH_READS]

    def counting(owner, name, fn):
        def wrapper(*args, **kwargs):
            if name != "to":
                counts[f"{owner.__name__}.{name}"] += 1
            elif _waiting_copy(args[0], args[1:], kwargs):
                counts["host-to-device copy"] += 1
            return fn(*args, **kwargs)
        return wrapper

    try:
        for owner, name, fn in saved:
            setattr(owner, name, counting(owner, name, fn))
        yield counts
    finally:
        for owner, name, fn in saved:
            setattr(owner, name, fn)




def _epoch_reads(cfg, splits, run_dir, batches: int, cfp: bool) -> Counter:
    state = host_read_state(cfg, splits, run_dir, batches, cfp)
    step = TrainStep(state, "off")
    policy_state = EpochPolicyState.of(state)
    with counted_reads() as counts:
        train_epoch(state, step, 1, policy_state, progress=False)
    return counts


@pytest.mark.parametrize("cfp", [False, True], ids=["pgd_at", "fairtat_targets"])
def test_training_epoch_reads_do_not_grow_with_batches(tmp_path, synthetic_splits, tiny_run_config, one_thread, cfp):
    cfg = {**tiny_run_config, "epochs": 1}
    cfg["method_config"]["adversary"]["steps"] = 1
    two = _epoch_reads(cfg, synthetic_splits, tmp_path, 2, cfp)
    four = _epoch_reads(cfg, synthetic_splits, tmp_path, 4, cfp)
    assert four == two, f"host reads per epoch grow with its batches: 2 batches {dict(two)}, 4 {dict(four)}"
    assert sum(two.values()) <= 2, f"more than the epoch's finite-loss check: {dict(two)}"


@pytest.mark.parametrize("attack", [None, "pgd3"])
def test_evaluation_reads_do_not_grow_with_batches(synthetic_splits, ci_params, one_thread, attack):
    from study.models.registry import build_model

    x = synthetic_splits.train_x
    torch.manual_seed(0)
    model = build_model("small_cnn", len(synthetic_splits.class_names), in_channels=x.shape[1],
                        image_size=x.shape[2], mean=(0.5,) * x.shape[1], std=(0.25,) * x.shape[1])
    ev = EvaluationSpec.parse(resolve_evaluation(ci_params, attack)).config if attack else None
    images, labels = synthetic_splits.test_x[:48], synthetic_splits.test_y[:48]
    counts = {}
    for batches in (2, 4):
        with counted_reads() as counts[batches]:
            predict(model, images, labels, attack=ev, batch_size=48 // batches, keep_logits=True)
    assert counts[4] == counts[2], f"host reads grow with the batches: 2 batches {dict(counts[2])}, 4 {dict(counts[4])}"
    assert sum(counts[2].values()) <= 4, f"more than a few host reads per evaluation: {dict(counts[2])}"


def test_fairtat_targets_follow_softmax_of_cfp_over_the_other_classes():
    """The Gumbel-max draw on the device: never the true class, and the frequencies of the
    others those of softmax(temperature * CFP) over them (a chi-square test at 1e-4)."""
    chi2_critical = 21.11  # scipy.stats.chi2.isf(1e-4, df=3): 4 other classes
    c, n = 5, 20000
    targets = CFPTargets(c, temperature=2.0)
    targets.cfp = torch.tensor([0.05, 0.4, 0.1, 0.3, 0.15], dtype=torch.float64)
    gen = torch.Generator().manual_seed(3)
    for true in (1, 4):
        y = torch.full((n,), true)
        drawn = targets.sample(y, gen)
        assert not (drawn == true).any()
        expected = torch.softmax(2.0 * targets.cfp, 0)
        expected[true] = 0
        expected = expected / expected.sum()
        others = [k for k in range(c) if k != true]
        observed = torch.bincount(drawn, minlength=c).double()[others]
        want = n * expected[others]
        assert ((observed - want) ** 2 / want).sum() < chi2_critical, (observed, want)
        assert torch.allclose(targets.probabilities(y[:1])[0], expected.float(), atol=1e-6)


