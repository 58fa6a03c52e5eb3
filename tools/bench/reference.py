"""The reference: a plain PyTorch training and evaluation loop written the way the public
code of the fairness papers is (Rice et al. 2020's PGD-AT, which CFA and FAIR-TAT build on;
Zhang et al. 2019's TRADES loss, which FRL and CFA reuse).

It is deliberately *not* optimised: a `Dataset` over uint8 HWC numpy images with per-image
Python transforms (random crop with zero padding, horizontal flip, to float CHW), a
`DataLoader` with `num_workers=0`, eager fp32, batches copied to the device one at a time,
and PGD that takes input gradients with `loss.backward()`, so parameter gradients are
computed too and zeroed afterwards. torchvision is not used (its transforms are rewritten
here with numpy and torch); random numbers come from torch's global generator, as
torchvision's transforms and a shuffling `DataLoader` draw them.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, Dataset

from study.config.evaluations import AutoAttackEvaluation
from study.config.types import Adversary, OptimizerSettings, ScheduleSettings

METHODS = ("standard", "pgd_at", "trades")


# ------------------------------------------------------------------ per-image transforms


def crop_flip(img: np.ndarray, top: int, left: int, flip: bool, padding: int) -> np.ndarray:
    """Crop an H x W x C image, zero-padded by `padding` on each side, at corner (`top`,
    `left`) back to H x W, then mirror it left-right if `flip` (torchvision's RandomCrop
    with padding followed by RandomHorizontalFlip, for given random draws)."""
    h, w = img.shape[:2]
    padded = np.pad(img, ((padding, padding), (padding, padding), (0, 0)))
    out = padded[top : top + h, left : left + w]
    return out[:, ::-1] if flip else out


def to_tensor(img: np.ndarray) -> torch.Tensor:
    """uint8 H x W x C to float C x H x W in [0, 1] (torchvision's ToTensor)."""
    return torch.from_numpy(np.ascontiguousarray(img.transpose(2, 0, 1))).float().div_(255)


class RandomCropFlip:
    """Per-image training transform: random crop with zero padding, random flip, to float."""

    def __init__(self, padding: int = 4, flip: bool = True):
        self.padding, self.flip = padding, flip

    def __call__(self, img: np.ndarray) -> torch.Tensor:
        top, left = torch.randint(0, 2 * self.padding + 1, (2,)).tolist()
        flip = self.flip and bool(torch.rand(1) < 0.5)
        return to_tensor(crop_flip(img, top, left, flip, self.padding))


class ImageDataset(Dataset):
    """uint8 H x W x C numpy images and integer labels, one transformed image per item."""

    def __init__(self, images: np.ndarray, labels: np.ndarray,
                 transform: Callable[[np.ndarray], torch.Tensor] = to_tensor):
        self.images, self.labels, self.transform = images, labels, transform

    def __len__(self) -> int:
        return len(self.labels)

    def __getitem__(self, i: int) -> tuple[torch.Tensor, int]:
        return self.transform(self.images[i]), int(self.labels[i])


def hwc_numpy(images: torch.Tensor) -> np.ndarray:
    """Our N x C x H x W uint8 tensors as the N x H x W x C arrays the public code loads."""
    return images.permute(0, 2, 3, 1).contiguous().numpy()


# ------------------------------------------------------------------ attacks


def pgd_linf(model: nn.Module, x: torch.Tensor, y: torch.Tensor, eps: float, alpha: float,
             steps: int) -> torch.Tensor:
    """Rice et al.'s `attack_pgd`: uniform random start, signed steps, `loss.backward()`.

    The backward pass also fills the parameters' `.grad`; callers zero it afterwards, as
    the public code does (`opt.zero_grad()` before the training step)."""
    delta = torch.zeros_like(x).uniform_(-eps, eps)
    delta = torch.clamp(delta, -x, 1 - x)
    delta.requires_grad_()
    for _ in range(steps):
        loss = F.cross_entropy(model(x + delta), y)
        loss.backward()
        grad = delta.grad.detach()
        d = torch.clamp(delta + alpha * torch.sign(grad), -eps, eps)
        delta.data = torch.clamp(d, -x, 1 - x)
        delta.grad.zero_()
    return torch.clamp(x + delta.detach(), 0, 1)


def trades_loss(model: nn.Module, x: torch.Tensor, y: torch.Tensor, eps: float, alpha: float,
                steps: int, beta: float) -> torch.Tensor:
    """Zhang et al. 2019's `trades_loss` as published: the KL attack in eval mode from
    x + 0.001 N(0, 1), recomputing the clean logits at every step, then
    CE(clean) + beta * KL(p_clean || p_adv) in train mode."""
    kl = nn.KLDivLoss(reduction="sum")
    model.eval()
    x_adv = x.detach() + 0.001 * torch.randn_like(x)
    for _ in range(steps):
        x_adv.requires_grad_()
        with torch.enable_grad():
            loss_kl = kl(F.log_softmax(model(x_adv), dim=1), F.softmax(model(x), dim=1))
        grad = torch.autograd.grad(loss_kl, [x_adv])[0]
        x_adv = x_adv.detach() + alpha * torch.sign(grad.detach())
        x_adv = torch.min(torch.max(x_adv, x - eps), x + eps).clamp(0.0, 1.0)
    model.train()
    x_adv = x_adv.clamp(0.0, 1.0).detach()
    logits = model(x)
    loss_natural = F.cross_entropy(logits, y)
    loss_robust = (1.0 / len(x)) * kl(F.log_softmax(model(x_adv), dim=1), F.softmax(model(x), dim=1))
    return loss_natural + beta * loss_robust


# ------------------------------------------------------------------ training


def _lr_factor(schedule: ScheduleSettings, epoch: int, epochs: int) -> float:
    """The engine's schedules, applied per epoch as the public code's piecewise schedule."""
    if schedule.name == "constant":
        return 1.0
    if schedule.name == "step":
        milestones = [round(m * epochs) for m in schedule.milestones]
        return schedule.gamma ** sum(epoch >= m for m in milestones)
    raise ValueError(f"the reference loop supports the step and constant schedules, not {schedule.name!r}")


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def train_reference(
    model: nn.Module,
    images: np.ndarray,
    labels: np.ndarray,
    *,
    method: str,
    epochs: int,
    batch_size: int,
    optimizer: OptimizerSettings,
    schedule: ScheduleSettings,
    adversary: Adversary | None,
    beta: float,
    device: torch.device,
    padding: int = 4,
    flip: bool = True,
) -> list[float]:
    """Train `model` in place on HWC uint8 `images`; returns the seconds of every epoch."""
    if method not in METHODS:
        raise ValueError(f"unknown reference method {method!r}; valid: {', '.join(METHODS)}")
    loader = DataLoader(ImageDataset(images, labels, RandomCropFlip(padding, flip)),
                        batch_size=batch_size, shuffle=True, num_workers=0)
    opt = torch.optim.SGD(model.parameters(), lr=optimizer.lr, momentum=optimizer.momentum,
                          weight_decay=optimizer.weight_decay, nesterov=optimizer.nesterov)
    seconds = []
    for epoch in range(epochs):
        for group in opt.param_groups:
            group["lr"] = optimizer.lr * _lr_factor(schedule, epoch, epochs)
        model.train()
        _sync(device)
        t0 = time.perf_counter()
        for x, y in loader:
            x, y = x.to(device), y.to(device)
            if method == "standard":
                loss = F.cross_entropy(model(x), y)
            elif method == "pgd_at":
                x_adv = pgd_linf(model, x, y, adversary.eps, adversary.alpha, adversary.steps)
                loss = F.cross_entropy(model(x_adv), y)
            else:
                loss = trades_loss(model, x, y, adversary.eps, adversary.alpha, adversary.steps, beta)
            opt.zero_grad()
            loss.backward()
            opt.step()
        _sync(device)
        seconds.append(time.perf_counter() - t0)
    return seconds


# ------------------------------------------------------------------ evaluation


def eval_loader(images: np.ndarray, labels: np.ndarray, batch_size: int) -> DataLoader:
    return DataLoader(ImageDataset(images, labels), batch_size=batch_size, shuffle=False, num_workers=0)


def eval_pgd(model: nn.Module, images: np.ndarray, labels: np.ndarray, *, eps: float, alpha: float,
             steps: int, batch_size: int, device: torch.device) -> tuple[float, np.ndarray]:
    """(seconds, predictions) of PGD in eval mode, the training attack reused as in Rice et al."""
    model.eval()
    preds = []
    _sync(device)
    t0 = time.perf_counter()
    for x, y in eval_loader(images, labels, batch_size):
        x, y = x.to(device), y.to(device)
        x_adv = pgd_linf(model, x, y, eps, alpha, steps)
        model.zero_grad()  # the attack's backward filled the parameter gradients
        with torch.no_grad():
            preds.append(model(x_adv).argmax(1).cpu())
    _sync(device)
    return time.perf_counter() - t0, torch.cat(preds).numpy()


def eval_autoattack(model: nn.Module, images: np.ndarray, labels: np.ndarray, *, attack: AutoAttackEvaluation,
                    batch_size: int, device: torch.device, seed: int) -> tuple[float, np.ndarray]:
    """(seconds, predictions) of pyautoattack called directly on fp32 CPU tensors, as the
    public code does: AutoAttack(version='custom') with the bench's attack list and iterations."""
    import logging

    from pyautoattack import AutoAttack

    model.eval()
    _sync(device)
    t0 = time.perf_counter()
    loader = eval_loader(images, labels, batch_size)
    x_test = torch.cat([x for x, _ in loader])
    y_test = torch.cat([y for _, y in loader])
    norm = {"linf": "Linf", "l2": "L2"}[attack.norm]
    aa = AutoAttack(model, norm=norm, eps=attack.eps, version="custom",
                    attacks=list(attack.attacks or []), seed=seed, device=device)
    # version='custom' keeps the constructor's 5 APGD restarts; the study's cascade uses the
    # standard version's single restart, so set it for an equal amount of work.
    aa.apgd.n_restarts = 1
    aa.apgd.n_iter = aa.apgd_targeted.n_iter = aa.fab.n_iter = attack.iterations
    aa.logger.setLevel(logging.WARNING)
    _, y_adv = aa.run_standard_evaluation(x_test, y_test, batch_size=batch_size)
    _sync(device)
    return time.perf_counter() - t0, y_adv.cpu().numpy()
