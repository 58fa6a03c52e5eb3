"""Per-sample predictions of a model on clean or attacked inputs.

The one place where a model is run for evaluation: the training engine's per-epoch
records and the final test-set evaluations both come from `predict`, so they can't drift.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
from torch import nn
from tqdm import tqdm

from study.attacks.pgd import RNG_CHUNK
from study.config.evaluations import EVALUATION_KINDS, AnyEvaluation, PgdEvaluation
from study.data.augment import to_float


@dataclass
class Predictions:
    pred: np.ndarray  # (N,) predicted class
    logits: np.ndarray | None  # (N, C) float32, when asked for
    broken_by: np.ndarray | None = None  # (N,) attack that broke each sample (AutoAttack, Square)


#: what a clean evaluation (no attack) runs: its row of the table
CLEAN_KIND = EVALUATION_KINDS["clean"]

def predict(
    model: nn.Module,
    images: torch.Tensor,
    labels: torch.Tensor,
    *,
    attack: AnyEvaluation | None = None,
    batch_size: int = 256,
    device: torch.device | str = "cpu",
    seed: int = 0,
    keep_logits: bool = False,
    progress: bool = False,
    desc: str = "evaluate",
) -> Predictions:
    """Classify uint8 `images` (N,C,H,W), optionally under `attack` (an evaluation's settings,
    typed), in eval mode and fp32."""
    device = torch.device(device)
    was_training = model.training
    model.eval()
    try:
        pred, logits, broken = predict_on_device(model, images, labels, attack=attack, batch_size=batch_size,
                                                 device=device, seed=seed, keep_logits=keep_logits,
                                                 progress=progress, desc=desc)
    finally:
        model.train(was_training)
    # The evaluation's one read back to the host.
    return Predictions(pred=pred.cpu().numpy(), logits=logits.cpu().numpy() if logits is not None else None,
                       broken_by=broken)


def attack_batch_size(attack: AnyEvaluation | None, batch_size: int, n: int) -> int:
    """The batch size `predict` runs `attack` with."""
    if attack is not None and attack.kind.whole_set:
        # The AutoAttack cascade runs over the whole set at once, as pyautoattack's own
        # run_standard_evaluation does (it batches internally by the evaluation's
        # batch_size), so each attack sees every still-robust sample in one call.
        return max(1, n)
    if isinstance(attack, PgdEvaluation) and attack.restarts > 1:
        # Each restart draws new starts for the whole batch: beyond one chunk of random
        # numbers, the order of draws (and so the records) would follow the batch size.
        return min(batch_size, RNG_CHUNK)
    return batch_size


def run_attack_detailed(
    model: nn.Module, x: torch.Tensor, y: torch.Tensor, attack: AnyEvaluation | None, generator: torch.Generator
) -> tuple[torch.Tensor, np.ndarray | None]:
    """(inputs to classify, per-sample name of the attack that broke each sample or None
    where the attack type has a single attack): the attack function of the evaluation's row
    (study.config.evaluations), `x` itself for a clean one. AutoAttack and Square name 'clean'
    for a sample misclassified before any attack and '' for one that no attack broke."""
    return (attack.kind if attack is not None else CLEAN_KIND).run(model, x, y, attack, generator)


def predict_on_device(
    model: nn.Module, images: torch.Tensor, labels: torch.Tensor, *, attack: AnyEvaluation | None,
    batch_size: int,
    device: torch.device, seed: int = 0, keep_logits: bool = False, progress: bool = False,
    desc: str = "evaluate",
) -> tuple[torch.Tensor, torch.Tensor | None, np.ndarray | None]:
    """(predicted classes, logits or None, broken_by or None) of `model` (in eval mode), the
    first two on `device`: the batches go to the device by non_blocking copies from pinned
    memory and their results stay there, so that no batch waits for the host (a PGD or clean
    evaluation reads nothing back; AutoAttack and Square, one whole-set batch, do)."""
    batch_size = attack_batch_size(attack, batch_size, images.shape[0])
    generator = torch.Generator(device=device)
    generator.manual_seed(seed)
    cuda = device.type == "cuda"
    if cuda:
        images, labels = images.pin_memory(), labels.pin_memory()
    preds, logits_all, broken = [], [], []
    n = images.shape[0]
    for start in tqdm(range(0, n, batch_size), desc=desc, disable=not progress, mininterval=5):
        x = to_float(images[start : start + batch_size].to(device, non_blocking=True))
        x = x.contiguous(memory_format=torch.channels_last)  # the layout the model trained in (study.train.setup)
        y = labels[start : start + batch_size].to(device, non_blocking=True)
        x_eval, broken_by = run_attack_detailed(model, x, y, attack, generator)
        if broken_by is not None:
            broken.append(broken_by)
        with torch.no_grad():
            logits = model(x_eval).float()
        preds.append(logits.argmax(1))
        if keep_logits:
            logits_all.append(logits)
    pred = torch.cat(preds) if preds else torch.zeros(0, dtype=torch.int64, device=device)
    logits_out = torch.cat(logits_all) if keep_logits and logits_all else None
    return pred, logits_out, np.concatenate(broken) if broken else None


def class_counts(pred: np.ndarray, labels: np.ndarray, num_classes: int) -> tuple[np.ndarray, np.ndarray]:
    """(samples per class, correct per class)."""
    n = np.bincount(labels, minlength=num_classes)
    correct = np.bincount(labels[pred == labels], minlength=num_classes)
    return n, correct
