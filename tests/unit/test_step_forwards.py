"""The forwards of one training step per method, in order, with BatchNorm's mode: those in
train mode move BatchNorm's running statistics (which evaluation uses), so they follow the
method's reference loop (`adversary.bn_stats`, study/train/step.py:bn_forwards), eager and
compiled (`aot_eager`). The attack runs 2 steps; `attack` is one of its points, `adv` the
inputs the loss trains on, `step` the parameter update."""

import pytest
import torch
from helpers.step_probe import bn_model, paper_method, paper_params, run_step, sequence, step_state

from study.config.core import ConfigError
from study.config.types import Adversary, parse
from study.train.step import bn_forwards

ATTACK_TRAIN = ["train attack", "train attack"]   # the attack in train mode (Rice et al., CFA, FAIR-TAT AT)
ATTACK_EVAL = ["eval attack", "eval attack"]      # in eval mode (earlystop.py, trades.py, CFA's TRADES)
KL_ATTACK = ["eval clean", *ATTACK_EVAL]          # the KL attack's target p_clean, once per batch, eval mode
TRADES = ["train clean", "train adv", "train clean"]   # trades.py:trades_loss: model(x_natural) for CE,
#                                                        then model(x_adv), model(x_natural) for the KL

#: method -> its step's forwards. The train-mode ones follow, after the attack:
EXPECTED = {
    # PKU-ML/CFA attack.py:pgd_loss (model(x + delta)), train.py:train_epoch: opt.step(), then
    # clean_output = model(normalize_cifar(x)) for the log (Rice et al. train_cifar.py the same)
    "pgd_at": [*ATTACK_TRAIN, "train adv", "step", "train clean"],
    "at": [*ATTACK_TRAIN, "train adv", "step", "train clean"],
    # yaodongyu/TRADES train_trades_cifar10.py:train: trades_loss, backward, step; nothing after
    "trades": [*KL_ATTACK, *TRADES],
    # PKU-ML/CFA attack.py:fat_loss (train mode: train_epoch's model.train()), model(x + delta),
    # opt.step(), then train_epoch's clean forward
    "fat": [*ATTACK_TRAIN, "train adv", "step", "train clean"],
    # FAT.py:train: earlystop (model.eval()), model.train(), model(output_adv), step
    "fat_zjfheart": [*ATTACK_EVAL, "train adv"],
    # CFA: its loss's forwards, then train_epoch's clean forward after opt.step()
    "pgd_at_cfa": [*ATTACK_TRAIN, "train adv", "step", "train clean"],
    "trades_cfa": [*KL_ATTACK, *TRADES, "step", "train clean"],
    "trades_normalized": [*KL_ATTACK, *TRADES, "step", "train clean"],
    "fat_cfa": [*ATTACK_TRAIN, "train adv", "step", "train clean"],   # `fat`: CFA's loop
    # TejaswiniMedi/FAIR-TAT target_train_new.py:train_epoch: attack(...) (cw_pgd_loss: model(x + delta)),
    # output_clean = model(normalize(x)), opt.step(), clean_output = model(normalize(x))
    "pgd_at_fairtat": [*ATTACK_TRAIN, "train adv", "train clean", "step", "train clean"],
    "trades_fairtat": [*ATTACK_EVAL, *TRADES, "train clean", "step", "train clean"],   # targeted: CE attack
    "fat_fairtat": [*ATTACK_TRAIN, "train adv", "train clean", "step", "train clean"],
    # the FAIR-TAT methods' controls: their loop without the targets
    "pgd_at_margins": [*ATTACK_TRAIN, "train adv", "train clean", "step", "train clean"],
    "trades_margins": [*KL_ATTACK, *TRADES, "train clean", "step", "train clean"],
    "fat_margins": [*ATTACK_TRAIN, "train adv", "train clean", "step", "train clean"],
    # hannxu123/fair_robust utils_frl*.py:train_model: trades_adv (eval), model(data), model(x_adv),
    # model(data), step
    "frl_reweight": [*KL_ATTACK, *TRADES],
    "frl_remargin": [*KL_ATTACK, *TRADES],
    "frl_reweight_remargin": [*KL_ATTACK, *TRADES],
    # no adversary: the clean batch, as before (its runs keep their ids)
    "standard": ["train clean"],
}


def _sequence(repo_root, method: str, compiled: bool) -> list[str]:
    # a renamed or removed method fails here: its expected forwards above must follow it
    assert method in paper_params(repo_root).methods, f"no method {method!r} in params.yaml"
    model = bn_model()
    definition = paper_method(repo_root, method, steps=2) if method != "standard" else paper_method(repo_root, method)
    x, y = torch.rand(6, 3, 2, 2), torch.tensor([0, 1, 2, 0, 1, 2])
    classwise = any(k in method for k in ("cfa", "fairtat", "margin"))
    run_step(step_state(definition, model, 3), x, y, compiled=compiled,
             class_eps=torch.full((3,), 8 / 255) if classwise else None)
    assert model.training, "the model is back in train mode"
    return sequence(model, x)


@pytest.mark.parametrize("method", sorted(EXPECTED))
def test_step_forwards_follow_the_reference_loop(repo_root, method):
    assert _sequence(repo_root, method, compiled=False) == EXPECTED[method]


@pytest.mark.parametrize("method", ["pgd_at_fairtat", "trades_cfa"])
def test_compiled_step_keeps_the_forwards(repo_root, method):
    assert _sequence(repo_root, method, compiled=True) == EXPECTED[method]


def _adversary(**settings):
    return parse(Adversary, {"eps": 0.03, "alpha": 0.01, "steps": 2, **settings}, "adversary")


def test_bn_stats_names_the_loss_forwards_before_the_update():
    assert bn_forwards(None, needs_clean=False) == (("adv",), ())
    assert bn_forwards(_adversary(), needs_clean=True) == (("adv", "clean"), ())
    assert bn_forwards(_adversary(bn_stats=["clean", "adv", "clean", "step", "clean"]), True) == \
        (("clean", "adv", "clean"), ("clean",))
    for bad in (["step", "adv"], ["clean"], ["adv", "step", "step"]):
        with pytest.raises(ValueError, match="bn_stats"):
            bn_forwards(_adversary(bn_stats=bad), needs_clean=False)
    with pytest.raises(ConfigError, match=r"bn_stats\[1\]: 'noisy' is not valid: input should be 'adv', 'clean'"):
        _adversary(bn_stats=["adv", "noisy"])
    with pytest.raises(ValueError, match="before the update"):
        bn_forwards(_adversary(bn_stats=["adv", "step", "clean"]), needs_clean=True)
