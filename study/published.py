"""The published numbers the reproduction report sets our runs beside, as data: each value
with its paper, table or figure, row, and the recipe it was measured under. docs/study.md
(#published-numbers) lists the same values with the source each was read in; a test keeps
the two in agreement.

Values are fractions of the test set. `Published.method` is the method of params.yaml whose
runs stand for the published row (matched by its resolved policies, so a preset's renamed
copy of it matches too): for DAFA's and TRIX's tables the `*_published` methods, which train with
those papers' attack (eps 0.031, 10 steps of 0.007) in the experiment groups of their recipes."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import TypeVar

from study.data.classes import CIFAR10_CLASS_NAMES

T = TypeVar("T")

#: the epochs of the published training recipe the study starts from (Rice et al. 2020, which CFA
#: and FAIR-TAT train with: docs/study.md#published-settings); a claim that states no number of
#: epochs is taken to come from no fewer
PUBLISHED_EPOCHS = 200
#: a published difference is a claim only where its source tells it from noise: |z| >= 2
CLAIM_Z = 2.0
#: the shortest published schedule, FRL's fine-tuning (120 epochs, params.yaml frl_reweight): a run
#: with fewer epochs than that, or on a subset of the training images, is at a reduced scale (the
#: figures' subtitle, the report's landing text)
FEWEST_PUBLISHED_EPOCHS = 120


@dataclass(frozen=True)
class Recipe:
    """How the published number was obtained, in the terms our runs record."""

    dataset: str = "cifar10"
    variant: str = "official"
    model: str | None = "preact_resnet18"  # None: any architecture (a claim about the dataset and method)
    epochs: int | None = 200  # None: not stated
    kind: str = "autoattack"  # the evaluation: clean | pgd | autoattack (L-inf 8/255)
    pgd_steps: int | None = None
    selection: str = ""  # how the paper picked its best checkpoint, in words
    #: the index the paper's best checkpoint was picked by, as train.published_selection names it
    #: (CFA: mean_plus_worst; TRIX: worst); None where no best is reported
    selection_index: str | None = None
    seeds: int = 1
    #: test images per class the paper scored (CIFAR-10's whole test set: 1,000)
    test_per_class: int = 1000
    #: the classes of the dataset (a mean class accuracy rests on this many times test_per_class images)
    classes: int = 10
    #: the training attack of the published method (steps, step size); None: no training attack
    train_attack: tuple[int, float] | None = (10, 2 / 255)
    #: parts of the recipe read from elsewhere than beside the value (inferred), in words
    inferred: tuple[str, ...] = ()


@dataclass(frozen=True)
class Published:
    """One published value.

    statistic: `mean` (mean class accuracy, which on a balanced test set is the accuracy),
    `worst` (worst-class accuracy), `class` (the accuracy of the class `class_name`),
    `rank` (the published order of the classes, `order`: rank per class, ties allowed; ours
    is compared by Spearman's rho), `weakest` (the claim that class `class_name` is the weakest;
    ours is the probability that it is), `spread` (best minus worst class accuracy).

    A claim of a direction (`direction` +1 or -1, no value): the statistic of `method` minus that
    of `control` has this sign; ours is the same difference between our runs of the method and of
    the control it is compared with (its `compare_with` in the preset, else `control`)."""

    id: str
    method: str
    checkpoint: str  # best | last
    statistic: str
    paper: str  # the bibliography anchor of docs/study.md
    where: str  # table, figure or part of the paper
    row: str
    recipe: Recipe
    value: float | None = None
    sd: float | None = None  # the published standard deviation over its seeds
    class_name: str | None = None
    order: tuple[tuple[str, float], ...] = ()
    baseline: str | None = None  # for a difference: the published row it is taken against (an id)
    note: str = ""
    direction: int = 0  # a claim of a direction: +1 (method above control) or -1; 0 for a value
    control: str | None = None  # a direction claim's control method (of params.yaml)
    #: what a claim of a direction rests on: `published` (the sign of published numbers), `aim`
    #: (the method's stated aim, no published number held), `expectation` (the study's)
    basis: str = "published"
    #: a claim from published numbers: their difference over its standard error in the source
    #: (the two rows' sds over the source's seeds); below CLAIM_Z the source cannot tell it from noise
    source_z: float | None = None
    #: a claim read off another method than the one it is compared for (in words), e.g. a
    #: TRADES-based rerun standing for a PGD-AT-based method
    transferred: str = ""
    #: a claim from published numbers: the ids of the method's and the control's published rows
    claim_sources: tuple[str, str] | None = None

    @property
    def context(self) -> bool:
        """A claim whose source cannot tell its difference from noise: shown, not judged."""
        return self.source_z is not None and abs(self.source_z) < CLAIM_Z

    # The fields a kind of row must hold (a row is one record of every kind): each read where its
    # kind is known, and a row of that kind without it is the table's mistake.
    def _held(self, value: T | None, field: str) -> T:
        if value is None:
            raise ValueError(f"published row {self.id} ({self.statistic}) holds no {field}")
        return value

    @property
    def number(self) -> float:
        """The published value (every row but a direction claim's)."""
        return self._held(self.value, "value")

    @property
    def baseline_id(self) -> str:
        """A difference row's baseline row."""
        return self._held(self.baseline, "baseline")

    @property
    def named_class(self) -> str:
        """A `class` or `weakest` row's class."""
        return self._held(self.class_name, "class_name")

    @property
    def control_method(self) -> str:
        """A direction claim's control method."""
        return self._held(self.control, "control")


_CFA = Recipe(kind="autoattack", seeds=5, selection_index="mean_plus_worst",
              selection="on the test set: PGD-10 mean plus worst-class robust accuracy, from epoch E/2, "
                        "checkpoints within 0.02 of the best kept (PKU-ML/CFA train.py)")
_CFA_CLEAN = replace(_CFA, kind="clean")
# Wei et al. 2023, Table 1: (mean, sd) of mean and worst class, best and last checkpoint, clean and AutoAttack.
_CFA_TABLE1 = {
    # row: (our method, {(checkpoint, kind): ((mean, sd), (worst, sd))})
    "AT": ("at", {("best", "clean"): ((82.3, 0.8), (63.9, 1.6)), ("best", "autoattack"): ((46.7, 0.5), (20.1, 1.3)),
                  ("last", "clean"): ((84.1, 0.2), (65.1, 2.4)), ("last", "autoattack"): ((43.0, 0.4), (15.5, 1.8))}),
    "AT + EMA": ("pgd_at_ema", {("best", "clean"): ((81.9, 0.3), (61.6, 0.5)),
                                ("best", "autoattack"): ((49.6, 0.2), (21.3, 0.8)),
                                ("last", "clean"): ((84.8, 0.1), (67.7, 0.7)),
                                ("last", "autoattack"): ((44.3, 0.5), (18.1, 0.5))}),
    "AT + CFA": ("pgd_at_cfa", {("best", "clean"): ((80.8, 0.3), (64.6, 0.4)),
                                ("best", "autoattack"): ((50.1, 0.3), (24.4, 0.3)),
                                ("last", "clean"): ((83.6, 0.2), (68.7, 0.7)),
                                ("last", "autoattack"): ((47.7, 0.4), (20.5, 0.4))}),
    "TRADES": ("trades_normalized", {("best", "clean"): ((82.3, 0.1), (67.8, 0.6)),
                                     ("best", "autoattack"): ((48.3, 0.3), (21.7, 0.5)),
                                     ("last", "clean"): ((83.9, 0.3), (66.9, 1.5)),
                                     ("last", "autoattack"): ((46.9, 0.3), (18.5, 1.3))}),
    "TRADES + EMA": ("trades_ema", {("best", "clean"): ((81.2, 0.4), (65.0, 0.7)),
                                    ("best", "autoattack"): ((49.7, 0.3), (24.2, 0.6)),
                                    ("last", "clean"): ((84.5, 0.1), (67.9, 0.1)),
                                    ("last", "autoattack"): ((48.3, 0.2), (20.7, 0.3))}),
    "TRADES + CFA": ("trades_cfa", {("best", "clean"): ((80.4, 0.2), (66.2, 0.5)),
                                    ("best", "autoattack"): ((50.1, 0.2), (26.5, 0.4)),
                                    ("last", "clean"): ((83.0, 0.1), (68.1, 0.3)),
                                    ("last", "autoattack"): ((49.3, 0.1), (21.5, 0.3))}),
    "FAT": ("fat", {("best", "clean"): ((84.6, 0.4), (69.2, 0.8)), ("best", "autoattack"): ((45.7, 0.6), (17.2, 1.3)),
                    ("last", "clean"): ((85.4, 0.2), (70.8, 1.9)), ("last", "autoattack"): ((42.1, 0.1), (14.8, 1.6))}),
    "FAT + EMA": ("fat_ema", {("best", "clean"): ((85.2, 0.2), (66.7, 0.6)),
                              ("best", "autoattack"): ((48.6, 0.1), (18.3, 0.5)),
                              ("last", "clean"): ((85.7, 0.2), (71.2, 0.4)),
                              ("last", "autoattack"): ((43.2, 0.1), (15.7, 0.7))}),
    "FAT + CFA": ("fat_cfa", {("best", "clean"): ((82.1, 0.3), (64.7, 0.9)),
                              ("best", "autoattack"): ((49.6, 0.1), (20.9, 0.8)),
                              ("last", "clean"): ((84.3, 0.1), (69.4, 0.3)),
                              ("last", "autoattack"): ((45.1, 0.2), (16.7, 0.2))}),
}
_KIND_TEXT = {"clean": "clean", "autoattack": "AutoAttack"}
_STATISTIC_TEXT = {"mean": "mean class accuracy", "worst": "worst class"}
# The +CFA rows against the row of the same base method (Table 1 compares them so).
_CFA_BASELINES = {"AT + CFA": "AT", "TRADES + CFA": "TRADES", "FAT + CFA": "FAT"}


def _slug(row: str) -> str:
    return row.lower().replace(" + ", "_").replace(" ", "_")


def _cfa_rows() -> list[Published]:
    out = []
    for row, (method, cells) in _CFA_TABLE1.items():
        for (checkpoint, kind), ((mean, mean_sd), (worst, worst_sd)) in cells.items():
            recipe = _CFA if kind == "autoattack" else _CFA_CLEAN
            for statistic, value, sd in (("mean", mean, mean_sd), ("worst", worst, worst_sd)):
                base = _CFA_BASELINES.get(row)
                out.append(Published(
                    id=f"cfa_{_slug(row)}_{checkpoint}_{kind}_{statistic}", method=method, checkpoint=checkpoint,
                    statistic=statistic, paper="wei2023", where="Table 1",
                    row=f"{row}, {checkpoint} checkpoint, {_KIND_TEXT[kind]}, {_STATISTIC_TEXT[statistic]}",
                    recipe=recipe, value=value / 100, sd=sd / 100,
                    baseline=f"cfa_{_slug(base)}_{checkpoint}_{kind}_{statistic}" if base else None))
    return out


# Xu et al. 2021 state the architecture as ResNet18 in the abstract and PreAct-ResNet18 in the ICML
# version's figure caption; the attack beside the abstract's values is not named (PGD-20 is the
# paper's evaluation elsewhere): both are read from elsewhere than beside the values.
_XU_INFERRED = ("PreAct-ResNet18 from the ICML version's Fig. 1 caption (the abstract says ResNet18)",
                "PGD-20 from the paper's evaluation (the abstract names no attack)")
_XU = Recipe(model="preact_resnet18", epochs=None, kind="pgd", pgd_steps=20, selection="not stated in the abstract",
             inferred=_XU_INFERRED)
_XU_CLEAN = Recipe(model="preact_resnet18", epochs=None, kind="clean", selection=_XU.selection,
                   inferred=_XU_INFERRED[:1])
# Xu et al. 2021, abstract (ICML version): a PGD-AT ResNet18 on CIFAR-10, two classes.
_XU_ABSTRACT = {("automobile", "clean"): 93, ("automobile", "pgd"): 67, ("cat", "clean"): 65, ("cat", "pgd"): 17}


def _xu_rows() -> list[Published]:
    return [Published(id=f"xu_pgd_at_{name}_{kind}", method="pgd_at", checkpoint="last", statistic="class",
                      paper="xu2021", where="abstract", row=f"PGD-AT ResNet18, class {name}",
                      recipe=_XU if kind == "pgd" else _XU_CLEAN, value=value / 100, class_name=name,
                      note="the abstract names neither the number of epochs nor the checkpoint")
            for (name, kind), value in _XU_ABSTRACT.items()]


def _ranks(groups: list[tuple[str, ...]]) -> tuple[tuple[str, float], ...]:
    """Ranks 1.. by group, a group's classes sharing their mean rank (the weakest group first)."""
    out, start = [], 1
    for group in groups:
        mean_rank = start + (len(group) - 1) / 2
        out += [(name, mean_rank) for name in group]
        start += len(group)
    return tuple(out)


def _middle(*named: str) -> tuple[str, ...]:
    return tuple(c for c in CIFAR10_CLASS_NAMES if c not in named)


_WEAK, _STRONG = ("bird", "deer", "dog"), ("automobile", "ship", "truck")
_RANK_NOTE = ("the published order is partial: the classes it names in rank, the others tied between them; "
              "rho is Spearman's rank correlation of our class accuracies with it")


def _ranking_rows() -> list[Published]:
    at_order = _ranks([("cat",), _WEAK, _middle("cat", *_WEAK, *_STRONG), _STRONG])
    rows = []
    for kind in ("clean", "pgd"):
        recipe = Recipe(model=None, epochs=None, kind=kind, pgd_steps=20 if kind == "pgd" else None,
                        inferred=_XU_INFERRED[1:] if kind == "pgd" else ())
        rows.append(Published(
            id=f"xu_pgd_at_rank_{kind}", method="pgd_at", checkpoint="last", statistic="rank", paper="xu2021",
            where="abstract and Fig. 1", row=f"PGD-AT: cat weakest, then bird, deer, dog; automobile, ship, truck "
            f"strongest ({kind})", recipe=recipe, order=at_order,
            note=_RANK_NOTE + "; beyond cat and automobile the order is read off Fig. 1"))
    return rows


def _weakest_rows() -> list[Published]:
    """Claims about one named class: cat is the weakest class of standard training (Xu et al.'s
    Fig. 1(a); Benz et al.'s abstract speaks of cat's vulnerability, not of its clean accuracy) and
    of PGD-AT (Xu et al.'s abstract and Fig. 1(b))."""
    standard = Recipe(model=None, epochs=None, kind="clean", train_attack=None)
    rows = [Published(id="xu_standard_cat_weakest_clean", method="standard", checkpoint="last", statistic="weakest",
                      paper="xu2021", where="Fig. 1(a)", row="standard training: cat the weakest class (clean)",
                      recipe=standard, class_name="cat")]
    for kind in ("clean", "pgd"):
        recipe = Recipe(model=None, epochs=None, kind=kind, pgd_steps=20 if kind == "pgd" else None,
                        inferred=_XU_INFERRED[1:] if kind == "pgd" else ())
        rows.append(Published(id=f"xu_pgd_at_cat_weakest_{kind}", method="pgd_at", checkpoint="last",
                              statistic="weakest", paper="xu2021", where="abstract and Fig. 1(b)",
                              row=f"PGD-AT: cat the weakest class ({kind})", recipe=recipe, class_name="cat"))
    return rows


# Lee et al. 2024 (DAFA), the main results table: the image figs/fig_result_main.png of rucy74/DAFA
# (c60ba83). ResNet-18, TRADES-based, 110 epochs, the last checkpoint (scripts/evaluation.sh loads
# checkpoint-epoch110.pt); eps 0.031, training attack 10 steps of 0.007. The attack of the robust
# columns is not labelled in the image (the README points to AutoAttack, and the TRIX authors'
# AutoAttack rerun of DAFA gives matching numbers); the number of seeds is not stated beside it.
_DAFA_INFERRED = ("AutoAttack from the README and the TRIX authors' rerun (the image labels no attack)",
                  "the number of seeds (the image gives mean ± sd without it)")
_DAFA = Recipe(model="resnet18", epochs=110, kind="autoattack", seeds=3, selection="the last epoch",
               train_attack=(10, 0.007), inferred=_DAFA_INFERRED)
_DAFA_CLEAN = Recipe(model="resnet18", epochs=110, kind="clean", seeds=3, selection="the last epoch",
                     train_attack=(10, 0.007), inferred=_DAFA_INFERRED[1:])
# row: (dataset, our method, ((clean mean, sd), (clean worst, sd), (robust mean, sd), (robust worst, sd)))
_DAFA_TABLE = {
    ("CIFAR-10", "TRADES"): ("cifar10", "trades_published",
                             ((82.04, 0.10), (65.70, 1.32), (49.80, 0.18), (21.31, 1.19))),
    ("CIFAR-10", "TRADES + CFA"): ("cifar10", "trades_cfa_published",
                                   ((79.81, 0.15), (65.18, 0.16), (50.78, 0.05), (27.62, 0.04))),
    ("CIFAR-10", "TRADES + WAT"): ("cifar10", "trades_wat_published",
                                  ((80.97, 0.29), (70.57, 1.54), (46.30, 0.27), (28.55, 1.30))),
    ("CIFAR-10", "TRADES + DAFA"): ("cifar10", "trades_dafa_published",
                                   ((81.63, 0.20), (67.90, 1.25), (49.05, 0.14), (30.53, 1.04))),
    ("CIFAR-100", "TRADES"): ("cifar100", "trades_published",
                              ((58.34, None), (16.80, None), (25.60, None), (1.33, None))),
    ("CIFAR-100", "TRADES + DAFA"): ("cifar100", "trades_dafa_published",
                                    ((58.07, None), (18.67, None), (25.08, None), (2.33, None))),
    ("STL-10", "TRADES"): ("stl10", "trades_published",
                           ((61.13, None), (39.29, None), (31.36, None), (7.73, None))),
    ("STL-10", "TRADES + DAFA"): ("stl10", "trades_dafa_published",
                                 ((60.50, None), (42.23, None), (29.98, None), (10.73, None))),
}

# Medi et al. 2025 (TRIX), the authors' rebuttal R/R.pdf in Fairness-a11y/TRIX (cdeb435), Table 1:
# "AutoAttack evaluation on ResNet-18 on CIFAR10 ... across five seeds, reporting best checkpoint
# results", the best by worst-class robust accuracy (on which set is not stated). Every row other
# than TRIX is the TRIX authors' rerun of that method, not its own paper's number. The rebuttal
# states no epochs: the TRIX code's (train.py's default, which scripts/trix.sh keeps) are read as
# the rerun's. The runs that stand for the rows are the `*_published` methods of params.yaml in
# the TRIX recipe (experiment group `published_trix`), whose `published` checkpoint is chosen by
# the same rule (best worst class), on the test subset: an inference, stated in each row.
_TRIX_INFERRED = ("150 epochs from the TRIX code (train.py's default; the rebuttal states none)",
                  "the best checkpoint chosen on the test set (the rebuttal does not name the set)")
_TRIX = Recipe(model="resnet18", epochs=150, kind="autoattack", seeds=5, train_attack=(10, 0.007),
               selection_index="worst",
               selection="the checkpoint of best worst-class robust accuracy (the set is not stated)",
               inferred=_TRIX_INFERRED)
_TRIX_CLEAN = replace(_TRIX, kind="clean")
_TRIX_TABLE = {
    "TRADES": ("trades_published", ((81.75, 0.61), (66.52, 1.53), (49.22, 0.74), (23.80, 1.35))),
    "TRADES + FRL": ("frl_reweight_remargin", ((82.02, 0.21), (70.27, 0.76), (44.91, 0.30), (27.60, 0.74))),
    "TRADES + WAT": ("trades_wat_published", ((79.02, 0.21), (70.00, 1.31), (45.92, 0.19), (29.44, 1.39))),
    "TRADES + CFA": ("trades_cfa_published", ((79.02, 0.13), (64.01, 0.04), (49.30, 0.21), (27.21, 0.67))),
    "TRADES + FAIR-TAT": ("trades_fairtat_published", ((78.93, 0.20), (66.98, 0.27), (48.92, 0.26), (28.19, 0.30))),
    "TRADES + DAFA": ("trades_dafa_published", ((81.49, 0.63), (66.66, 0.66), (48.03, 0.80), (31.02, 0.66))),
    "TRADES + TRIX": ("trades_trix_published", ((81.60, 0.26), (68.10, 1.07), (48.80, 0.34), (32.64, 0.73))),
}
_CELLS = (("clean", "mean"), ("clean", "worst"), ("autoattack", "mean"), ("autoattack", "worst"))


#: each dataset's whole test set: (images per class, classes)
_WHOLE_TEST_SET = {"cifar10": (1000, 10), "cifar100": (100, 100), "stl10": (800, 10)}


def _dafa_rows() -> list[Published]:
    out = []
    for (dataset_name, row), (dataset, method, cells) in _DAFA_TABLE.items():
        for (kind, statistic), (value, sd) in zip(_CELLS, cells, strict=True):
            recipe = _DAFA if kind == "autoattack" else _DAFA_CLEAN
            base = (dataset_name, "TRADES") if row != "TRADES" else None
            slug = f"{dataset}_{_slug(row)}_{kind}_{statistic}"
            out.append(Published(
                id=f"dafa_{slug}", method=method, checkpoint="last", statistic=statistic, paper="lee2024",
                where="figs/fig_result_main.png",
                row=f"{dataset_name}, {row}, last checkpoint, {_KIND_TEXT[kind]}, {_STATISTIC_TEXT[statistic]}",
                recipe=replace(recipe, dataset=dataset, test_per_class=_WHOLE_TEST_SET[dataset][0],
                               classes=_WHOLE_TEST_SET[dataset][1]), value=value / 100,
                sd=None if sd is None else sd / 100,
                baseline=f"dafa_{dataset}_trades_{kind}_{statistic}" if base else None,
                note="" if dataset == "cifar10" else "the image gives CIFAR-100 and STL-10 without sd"))
    return out


def _trix_rows() -> list[Published]:
    out = []
    for row, (method, cells) in _TRIX_TABLE.items():
        for (kind, statistic), (value, sd) in zip(_CELLS, cells, strict=True):
            out.append(Published(
                id=f"trix_{_slug(row)}_{kind}_{statistic}", method=method, checkpoint="best", statistic=statistic,
                paper="medi2025trix", where="rebuttal R/R.pdf, Table 1",
                row=f"{row}, best checkpoint, {_KIND_TEXT[kind]}, {_STATISTIC_TEXT[statistic]}",
                recipe=_TRIX if kind == "autoattack" else _TRIX_CLEAN, value=value / 100, sd=sd / 100,
                baseline=f"trix_trades_{kind}_{statistic}" if row != "TRADES" else None,
                note="" if row == "TRADES + TRIX" else "the TRIX authors' rerun of this method, not its own paper's"))
    return out


# Claims of a direction, each compared by the sign of our difference alone (a direction, like a
# class order, is what a smaller recipe can show; its size is not): adversarial training widens
# the gap between classes (Xu et al. 2021: "adversarial training tends to introduce severe disparity
# of accuracy and robustness between different classes", its Fig. 1 natural against PGD-AT
# training), and each fairness method raises the worst class at a cost in the mean against its
# control. A method's directions are the signs of the published numbers this module holds for it
# (`_DIRECTION_SOURCES`: the method's row minus its control's); FAAL's numbers are not held here,
# its directions are its stated aim (the worst class) and the study's expectation (docs/study.md,
# "Expected results": a small cost in the mean).
_GAP_RECIPE = {"clean": Recipe(model=None, epochs=None, kind="clean"),
               "pgd": Recipe(model=None, epochs=None, kind="pgd", pgd_steps=20, inferred=_XU_INFERRED[1:])}
# method: (its control in the paper grid, how the report names the pair, paper, where, the ids of the
# published rows of the method and of its control, `{cell}` standing for `<kind>_<statistic>`, and
# how the source's pair differs from the claim's where it is another method's: a transferred claim)
_DIRECTION_SOURCES = {
    "trades_cfa": ("trades_normalized", "TRADES + CFA against TRADES", "wei2023", "Table 1 (best checkpoint)",
                   "cfa_trades_cfa_best_{cell}", "cfa_trades_best_{cell}", ""),
    "pgd_at_fairtat": ("pgd_at_margins", "FAIR-TAT against its control", "medi2025trix",
                       "rebuttal R/R.pdf, Table 1 (TRADES + FAIR-TAT against TRADES, the TRIX authors' rerun)",
                       "trix_trades_fair-tat_{cell}", "trix_trades_{cell}",
                       "transferred: the source sets TRADES + FAIR-TAT against TRADES (the TRIX authors' rerun); "
                       "the claim is compared for PGD-AT + FAIR-TAT"),
    "frl_reweight": ("at", "FRL (reweight) against PGD-AT", "medi2025trix",
                     "rebuttal R/R.pdf, Table 1 (TRADES + FRL against TRADES, the TRIX authors' rerun)",
                     "trix_trades_frl_{cell}", "trix_trades_{cell}",
                     "transferred: the source sets TRADES + FRL (reweight and remargin, the TRIX authors' rerun) "
                     "against TRADES; the claim is compared for FRL reweight against PGD-AT"),
}
#: the cells each method's direction is claimed in: the worst class under AutoAttack, the mean under
#: AutoAttack and the clean mean
_DIRECTION_CELLS = (("autoattack", "worst"), ("autoattack", "mean"), ("clean", "mean"))
#: FAAL: no published numbers held here (docs/study.md); its stated aim and the study's expectation
_FAAL_DIRECTIONS = {("autoattack", "worst"): 1, ("clean", "mean"): -1}
_CLAIM_TEXT = {("autoattack", "worst"): "the worst class under AutoAttack", ("autoattack", "mean"): "the mean under "
               "AutoAttack", ("clean", "mean"): "the clean mean"}


def source_z(ours: Published, theirs: Published) -> float:
    """A published difference over its standard error in the source: each row's sd over the
    source's seeds (sd / sqrt(seeds)), the two rows independent."""
    if ours.sd is None or theirs.sd is None or ours.value is None or theirs.value is None:
        return float("nan")
    se = (ours.sd**2 / ours.recipe.seeds + theirs.sd**2 / theirs.recipe.seeds) ** 0.5
    return (ours.value - theirs.value) / se if se > 0 else float("inf")


#: each fairness method's own published length, as params.yaml (the paper scale) trains it: a claim's
#: run is at a reduced scale against its own method's recipe (FRL fine-tunes for 120 epochs, FAAL for
#: 2), not against the 200 epochs of PGD-AT (tests/unit/test_reproduction_claims.py keeps them equal)
CLAIM_EPOCHS = {"trades_cfa": 200, "pgd_at_fairtat": 200, "frl_reweight": 120, "faal_at": 2}


def _claim_recipe(kind: str, method: str) -> Recipe:
    return Recipe(model=None, epochs=CLAIM_EPOCHS[method], kind=kind)


def _direction_rows() -> list[Published]:
    rows = [Published(id=f"xu_pgd_at_widens_gap_{kind}", method="pgd_at", checkpoint="last", statistic="spread",
                      paper="xu2021", where="abstract and Fig. 1",
                      row=f"PGD-AT widens the gap between classes against standard training ({kind}): "
                          "best minus worst class", recipe=recipe, direction=1, control="standard")
            for kind, recipe in _GAP_RECIPE.items()]
    for method, (control, pair, paper, where, ours_id, theirs_id, transferred) in _DIRECTION_SOURCES.items():
        for kind, statistic in _DIRECTION_CELLS:
            cell = f"{kind}_{statistic}"
            ours, theirs = ours_id.format(cell=cell), theirs_id.format(cell=cell)
            difference = BY_ID_VALUES[ours] - BY_ID_VALUES[theirs]
            z = source_z(_VALUES_BY_ID[ours], _VALUES_BY_ID[theirs])
            rows.append(Published(
                id=f"claim_{method}_{kind}_{statistic}", method=method, checkpoint="best", statistic=statistic,
                paper=paper, where=where,
                row=f"{pair}: {'raises' if difference > 0 else 'lowers'} {_CLAIM_TEXT[kind, statistic]}",
                recipe=_claim_recipe(kind, method), direction=1 if difference > 0 else -1, control=control,
                note=f"the sign of {ours} minus {theirs} ({100 * difference:+.2f} pts, z = {z:.1f} in the source)",
                source_z=z, transferred=transferred, claim_sources=(ours, theirs)))
    for (kind, statistic), direction in _FAAL_DIRECTIONS.items():
        rows.append(Published(
            id=f"claim_faal_at_{kind}_{statistic}", method="faal_at", checkpoint="best", statistic=statistic,
            paper="zhang2024faal", where="its stated aim; docs/study.md, Expected results",
            row=f"FAAL against PGD-AT: {'raises' if direction > 0 else 'lowers'} {_CLAIM_TEXT[kind, statistic]}",
            recipe=_claim_recipe(kind, "faal_at"), direction=direction, control="at",
            note="FAAL's own numbers are not held here: the direction is its aim (the worst class) or the "
                 "study's expectation (a small cost in the mean)",
            basis="aim" if statistic == "worst" else "expectation"))
    return rows


#: how the report names each paper (the keys are docs/study.md's bibliography anchors)
PAPERS = {"benz2021": "Benz et al. 2021", "xu2021": "Xu et al. 2021 (FRL)", "wei2023": "Wei et al. 2023 (CFA)",
          "lee2024": "Lee et al. 2024 (DAFA)", "medi2025trix": "Medi et al. 2025 (TRIX)",
          "zhang2024faal": "Zhang et al. 2024 (FAAL)"}

_VALUES = _weakest_rows() + _ranking_rows() + _xu_rows() + _cfa_rows() + _dafa_rows() + _trix_rows()
# (every row of these tables holds its published value)
BY_ID_VALUES = {p.id: p.value for p in _VALUES if p.value is not None}
_VALUES_BY_ID = {p.id: p for p in _VALUES}
PUBLISHED: tuple[Published, ...] = tuple(_VALUES + _direction_rows())
BY_ID = {p.id: p for p in PUBLISHED}


@dataclass(frozen=True)
class Section:
    """A section of the report: its heading and the published rows it holds."""

    title: str
    ids: tuple[str, ...] = field(default_factory=tuple)


# A published value is shown in its paper's section, a claim of a direction in the claims' own.
_SHOWN = tuple(p for p in PUBLISHED if not p.direction)

SECTIONS = (
    Section("The weakest class", tuple(p.id for p in _SHOWN if p.statistic == "weakest")),
    Section("Class rankings", tuple(p.id for p in _SHOWN if p.statistic == "rank")),
    Section("Xu et al. 2021, abstract: two classes of a PGD-AT ResNet18",
            tuple(p.id for p in _SHOWN if p.paper == "xu2021" and p.statistic == "class")),
    Section("Wei et al. 2023 (CFA), Table 1", tuple(p.id for p in _SHOWN if p.paper == "wei2023")),
    Section("Lee et al. 2024 (DAFA), main table", tuple(p.id for p in _SHOWN if p.paper == "lee2024")),
    Section("Medi et al. 2025 (TRIX), the authors' rerun of nine methods (rebuttal Table 1)",
            tuple(p.id for p in _SHOWN if p.paper == "medi2025trix")),
    Section("Claims of a direction: the gap, and each fairness method against its control",
            tuple(p.id for p in PUBLISHED if p.direction)),
)
