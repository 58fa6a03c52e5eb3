"""DAFA's class weights (Lee et al., ICLR 2024; rucy74/DAFA utils.py:calculate_class_weights)
from a soft confusion matrix, as pure tensor functions: the weights policy `dafa` applies them
once per run, TRIX's targets policy (study.train.policies.targets.TRIXTargets) to every batch
inside the compiled training step, so nothing here reads back to the host."""

from __future__ import annotations

import torch

#: TRIX (Fairness-a11y/TRIX losses.py:calculate_class_weights_from_clean) adds this to the
#: diagonal of the batch's matrix, so that a class absent from the batch has a non-zero
#: diagonal; DAFA's epoch-level matrix has every class and no such term.
TRIX_DIAGONAL = 1e-8


def soft_confusion(probs: torch.Tensor, y: torch.Tensor, num_classes: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(sums, counts): row i of `sums` the summed probability vectors of the samples of class i,
    `counts[i]` their number (float64; the epoch sums of a run, or one batch's)."""
    sums = torch.zeros(num_classes, num_classes, dtype=torch.float64, device=probs.device)
    sums.index_add_(0, y.long(), probs.double())
    counts = torch.zeros(num_classes, dtype=torch.float64, device=probs.device)
    counts.index_add_(0, y.long(), torch.ones_like(y, dtype=torch.float64))
    return sums, counts


def class_similarity(sums: torch.Tensor, counts: torch.Tensor) -> torch.Tensor:
    """P[i, :] = the mean probability vector of class i's samples (a zero row for a class
    without samples): DAFA's `class_similarity`."""
    return sums / counts.clamp_min(1).unsqueeze(1)


def dafa_class_weights(similarity: torch.Tensor, lam: float) -> torch.Tensor:
    """w_i = 1 + lam * sum_{j != i, P_ii < P_jj} P_ij P_jj - lam * sum_{j != i, P_ii >= P_jj} P_ji P_ii.

    Of each pair, the class with the lower diagonal (the harder one, i) gains lam * P_ij * P_jj
    and the easier one (j) loses the same amount, so the weights keep mean 1 (an exact tie of
    the diagonals excepted: both lose). This is the formula of the repository's head
    (commit 74657cd); its first version subtracted P_ij P_jj instead, which does not conserve."""
    p = similarity.double()
    d = torch.diagonal(p)
    off = ~torch.eye(p.shape[0], dtype=torch.bool, device=p.device)
    harder = (d.unsqueeze(1) < d.unsqueeze(0)) & off      # [i, j]: P_ii < P_jj
    easier = (d.unsqueeze(1) >= d.unsqueeze(0)) & off     # [i, j]: P_ii >= P_jj
    gain = (harder * p * d.unsqueeze(0)).sum(dim=1)        # sum_j P_ij P_jj
    loss = (easier * p.T * d.unsqueeze(1)).sum(dim=1)      # sum_j P_ji P_ii
    return 1 + lam * (gain - loss)


def trix_targeted(clean_logits: torch.Tensor, y: torch.Tensor, num_classes: int, lam: float = 1.0) -> torch.Tensor:
    """TRIX's split of a batch (losses.py:mixed_trades_loss): DAFA's weights from the batch's
    clean softmax (TRIX_DIAGONAL on the diagonal); a sample is attacked towards a target when
    its class's weight is below the batch mean of the samples' weights (a `strong` class)."""
    sums, counts = soft_confusion(torch.softmax(clean_logits.float(), dim=1), y, num_classes)
    similarity = class_similarity(sums, counts)
    similarity = similarity + TRIX_DIAGONAL * torch.eye(num_classes, dtype=similarity.dtype, device=similarity.device)
    w = dafa_class_weights(similarity, lam)[y.long()]
    return w < w.mean()
