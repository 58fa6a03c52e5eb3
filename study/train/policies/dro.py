"""FAAL's class weights (Zhang et al., CVPR 2024; TrustAI/FAAL FAAL.py:DAW), a distributionally
robust problem over the classes, solved in closed form on the device.

    maximize  sum_c a_c p_c   over the simplex,  subject to  (1/C) sum_c log((1/C) / p_c) <= r

with a_c = n_c m_c (the batch's summed margins of class c). FAAL solves it per batch with cvxpy
(ECOS, then MOSEK, then SCS). Its Lagrangian gives p_c = lambda / (C (mu - a_c)) with mu > max a
and lambda fixed by sum p = 1, so p_c is proportional to 1 / (mu - a_c), one free number mu; the
KL to uniform falls from infinity (mu -> max a) to 0 (mu -> infinity), and a linear objective
that is not constant on the simplex is maximal where the constraint binds: mu is the root of
KL(mu) = r, found by refining a grid in log(mu - max a). Where every a_c is equal (or r = 0),
every feasible p is optimal and the uniform one is returned.

Fixed-size tensor work only (no host read, no data-dependent branch): it runs inside the
compiled training step."""

from __future__ import annotations

import torch

#: the bracket of log((mu - max a) / spread(a)): KL(mu) is below 1e-20 at the top and, for any
#: radius a run uses, above it at the bottom
LOG_BRACKET = (-60.0, 60.0)
#: grid points per refinement and refinements: the bracket shrinks by (POINTS - 1)^ROUNDS
POINTS, ROUNDS = 33, 8


def _distribution(log_t: torch.Tensor, gap: torch.Tensor) -> torch.Tensor:
    """(K, C): p proportional to 1 / (t + gap_c) for each t = exp(log_t) (K,)."""
    inv = 1.0 / (torch.exp(log_t).unsqueeze(1) + gap.unsqueeze(0))
    return inv / inv.sum(dim=1, keepdim=True)


def kl_to_uniform(p: torch.Tensor) -> torch.Tensor:
    """(1/C) sum_c log((1/C) / p_c) along the last dimension (cvxpy's sum of kl_div(1/C, p_c) on the simplex)."""
    c = p.shape[-1]
    return -(torch.log(c * p)).mean(dim=-1)


def faal_class_weights(a: torch.Tensor, radius: float) -> torch.Tensor:
    """The p (C,) that maximizes sum_c a_c p_c in the KL ball of `radius` around uniform (float64)."""
    a = a.double()
    gap = a.max() - a
    # gaps in units of their spread: the bracket holds whatever the scale of the margins
    gap = gap / gap.max().clamp_min(torch.finfo(torch.float64).tiny)
    lo = torch.full((), LOG_BRACKET[0], dtype=torch.float64, device=a.device)
    hi = torch.full((), LOG_BRACKET[1], dtype=torch.float64, device=a.device)
    steps = torch.linspace(0.0, 1.0, POINTS, dtype=torch.float64, device=a.device)
    for _ in range(ROUNDS):
        grid = lo + (hi - lo) * steps
        outside = kl_to_uniform(_distribution(grid, gap)) > radius   # a prefix of the grid: KL falls with t
        # the last point outside the ball and the first inside (masked extremes, not an index: a
        # compiled step cannot specialize on a value it computed)
        lo = torch.where(outside, grid, -torch.inf).amax().clamp_min(grid[0])
        hi = torch.where(outside, torch.inf, grid).amin().clamp_max(grid[-1])
    return _distribution(hi.unsqueeze(0), gap)[0]


def class_margins(adv_logits: torch.Tensor, y: torch.Tensor, num_classes: int) -> torch.Tensor:
    """a_c = sum over the batch's class-c samples of max_{j != y} p_j - p_y on the softmax
    (ft_prn.py:cw; FAAL's objective multiplies the class mean m_c by the class count n_c, so a
    class absent from the batch, which FAAL gives m_c = -1, has a_c = 0 either way)."""
    p = torch.softmax(adv_logits.double(), dim=1)
    true = p.gather(1, y.long().view(-1, 1)).squeeze(1)
    other = p.scatter(1, y.long().view(-1, 1), float("-inf")).max(dim=1).values
    return torch.zeros(num_classes, dtype=torch.float64, device=p.device).index_add_(0, y.long(), other - true)
