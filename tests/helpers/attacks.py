"""Small PGD attacks of both norms, cheap enough for any device (typed, as predict takes them)."""

from study.config.evaluations import PgdEvaluation

ATTACKS = {
    "linf": PgdEvaluation(type="pgd", norm="linf", eps=8 / 255, alpha=2 / 255, steps=3, restarts=1),
    "l2": PgdEvaluation(type="pgd", norm="l2", eps=0.5, alpha=0.2, steps=3, restarts=2),
}
