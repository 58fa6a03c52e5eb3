"""What a training run needs of its configuration beyond the types: every condition that the
training job (study/train: its setup, policies, step and records) would otherwise meet only after
the plan ran and earlier jobs were paid for, checked from the configuration alone where it enters:

- a method's policies and training attack (`method_problems`): where params are parsed (every
  method a group runs, study.config.methods.check_method) and where a run config is;
- a run's (`run_problems`: the method against the run's dataset, model, epochs and validation
  split): where a run config is parsed (study.config.spec.ConfigSpec.parse), which is how the plan
  makes every run's and how `study train --run-config` reads one.

The training code reads the tables and accessors below (`bn_forwards`, `fat_tau`, `wat_costs`,
`held_per_class`) and checks none of these conditions again.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence

from study.config.core import ConfigError
from study.config.types import Adversary, Method, RunConfig

#: the train-mode forwards a step may run after the attack (`adv`, `clean`) and the update (`step`)
BN_FORWARDS = ("adv", "clean", "step")
#: the loss types whose objective reads the clean batch's logits (study/train/policies/loss.py)
CLEAN_LOSSES = ("trades", "mixed")
#: the policy types that adapt to statistics of the validation split, and what of theirs does
VALIDATION_READERS = {("weights", "frl"): "FRL's multipliers", ("weights", "wat"): "WAT's Hedge weights",
                      ("epsilon", "remargin"): "FRL's remargin", ("averaging", "fawa"): "FAWA's threshold"}
#: the policies that shape the training attack or its objective, and their type that needs no attack
ATTACK_POLICIES = {"targets": "untargeted", "epsilon": "fixed", "loss": "ce"}


def needs_clean(method: Method) -> bool:
    """Whether the method's loss reads the clean batch's logits (the step then forwards it)."""
    return method.loss is not None and method.loss.type in CLEAN_LOSSES


def validation_readers(method: Method) -> list[str]:
    """The method's policies that read the validation split's statistics, in words."""
    found = []
    for (kind, name), what in VALIDATION_READERS.items():
        policy = getattr(method, kind)
        if policy is not None and policy.type == name:
            found.append(f"{kind} type {name!r} ({what})")
    return found


def bn_forwards(bn_stats: Sequence[str] | None, needs_clean: bool) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(forwards before the update, forwards after it) of one training step, from an adversary's
    `bn_stats` (study/train/step.py runs them): the first `adv` and, where the loss needs it, the
    first `clean` before `step` are the loss's forwards, every other forward only moves BatchNorm's
    running statistics. Without `bn_stats`: the loss's forwards, adversarial then clean."""
    default = ["adv", "clean"] if needs_clean else ["adv"]
    seq = list(bn_stats or default)
    bad = [name for name in seq if name not in BN_FORWARDS]
    if bad or seq.count("step") > 1:
        raise ConfigError(f"adversary.bn_stats: {seq} is not valid; valid: names from {', '.join(BN_FORWARDS)}, "
                          "`step` at most once")
    cut = seq.index("step") if "step" in seq else len(seq)
    before, after = tuple(seq[:cut]), tuple(seq[cut + 1:])
    if "adv" not in before or (needs_clean and "clean" not in before):
        raise ConfigError(f"adversary.bn_stats: {seq} is not valid; the loss's forwards ({', '.join(default)}) "
                          "come before the update (`step`)")
    return before, after


def fat_tau(adversary: Adversary) -> int:
    """FAT's tau: the steps an attack of type `fat` runs after the first misclassification."""
    if adversary.tau is None:
        raise ConfigError("adversary.tau: missing; adversary type 'fat' needs its steps after the first "
                          "misclassification (FAT's tau, e.g. 3)")
    return adversary.tau


def wat_costs(method: Method) -> tuple[float, Adversary]:
    """(beta, attack) of WAT's validation costs (CE + beta KL under the TRADES attack): the
    method's TRADES beta and its training attack."""
    if method.loss is None or method.loss.type != "trades" or method.adversary is None:
        loss = method.loss.type if method.loss is not None else "ce"
        raise ConfigError(f"weights.type: 'wat' computes its costs with the TRADES loss and the training attack; "
                          f"the method has loss type {loss!r} and adversary "
                          f"{'null' if method.adversary is None else method.adversary.type!r}; valid: loss type "
                          "'trades' with an adversary")
    return method.loss.beta, method.adversary


def held_per_class(setting: Mapping, n_class: int) -> int:
    """How many of a class's `n_class` training samples the validation split `setting`
    ({fraction: f} or {per_class: k}) holds out: k, or the share rounded up (at least one)."""
    if "per_class" in setting:
        return int(setting["per_class"])
    return max(1, math.ceil(float(setting["fraction"]) * n_class))


def _try(problems: list[str], check: Callable[..., object], *args: object) -> None:
    """`check(*args)`, its ConfigError (one of the accessors above refusing) added to `problems`."""
    try:
        check(*args)
    except ConfigError as err:
        problems.append(str(err))


def _attack_problems(method: Method) -> list[str]:
    adv, problems = method.adversary, []
    adaptive = [k for k, plain in ATTACK_POLICIES.items()
                if getattr(method, k) is not None and getattr(method, k).type != plain]
    if adv is None:
        if adaptive:
            problems.append(f"policies {adaptive} need an adversary; the method has adversary: null")
        return problems
    if adv.restarts != 1:
        problems.append(f"adversary.restarts: {adv.restarts} is not valid; a training attack runs one restart (1)")
    if adv.step_noise and adv.type != "fat":
        problems.append(f"adversary.step_noise: {adv.step_noise} (FAT's omega) needs adversary type 'fat'; "
                        f"the method's is {adv.type!r}")
    if adv.type == "fat":
        _try(problems, fat_tau, adv)
    if method.targets is not None and method.targets.type == "trix" and adv.type != "pgd":
        problems.append(f"targets.type: 'trix' attacks each sample targeted or untargeted with PGD; the method's "
                        f"adversary type is {adv.type!r}; valid: 'pgd'")
    return problems


def method_problems(method: Method) -> list[str]:
    """What is wrong with a resolved method (its `base` chain merged) for training, one entry
    per problem, each naming the key path, the bad value and what is valid; [] when nothing is."""
    problems = _attack_problems(method)
    eps, weights, loss = method.epsilon, method.weights, method.loss
    if eps is not None and eps.type == "dafa" and (weights is None or weights.type != "dafa"):
        problems.append(f"epsilon.type: 'dafa' scales the radius by DAFA's class weights; the method's weights type "
                        f"is {weights.type if weights is not None else 'none'!r}; valid: 'dafa'")
    if weights is not None and weights.type == "static" and weights.values is None:
        problems.append("weights.values: missing; weights type 'static' needs its class costs, one positive number "
                        "per class")
    if weights is not None and weights.type == "wat":
        _try(problems, wat_costs, method)
    if loss is not None and loss.type == "trades" and loss.normalize is False and loss.lambda2 is not None:
        problems.append(f"loss.normalize: false is not valid with lambda2 {loss.lambda2}: CFA's class-wise beta is "
                        "defined on the normalized objective only; valid: true or unset")
    _try(problems, bn_forwards, method.adversary.bn_stats if method.adversary is not None else None,
         needs_clean(method))
    return problems


def _class_problems(method: Method, num_classes: int, dataset: str) -> list[str]:
    """The per-class settings of a method against the dataset's class count."""
    problems = []
    weights, targets = method.weights, method.targets
    if weights is not None and weights.type == "static" and weights.values is not None \
            and len(weights.values) != num_classes:
        problems.append(f"method_config.weights.values: {len(weights.values)} class costs for {dataset}'s "
                        f"{num_classes} classes; valid: {num_classes} positive numbers")
    for path, policy, kind in (("targets.class", targets, "fixed"), ("weights.class", weights, "boost")):
        if policy is not None and policy.type == kind and isinstance(policy.class_, int) \
                and policy.class_ >= num_classes:
            problems.append(f"method_config.{path}: {policy.class_} is not a class of {dataset}; valid: 'weakest' "
                            f"or a class index 0..{num_classes - 1}")
    return problems


def _split_problems(run: RunConfig, train_per_class: int | None) -> list[str]:
    """The validation split against the images per class it is taken from, where the config
    knows their number (a training subset, synthetic data)."""
    if run.validation is None or train_per_class is None:
        return []
    setting = run.validation.model_dump()
    held = held_per_class(setting, train_per_class)
    if held < train_per_class:
        return []
    return [f"validation: {setting} holds out {held} of the {train_per_class} training images of each class, "
            f"leaving none to train on; valid: fewer than {train_per_class} per class"]


def run_problems(run: RunConfig) -> list[str]:
    """What is wrong with a trained run's config for training, one entry per problem (key path,
    bad value, what is valid); [] when nothing is."""
    from study.data.registry import DATASETS
    from study.models.registry import MODELS

    method = run.method_config
    problems = [f"method_config.{p}" for p in method_problems(method)]
    readers = validation_readers(method)
    if readers and run.validation is None:
        problems.append(f"validation: null, but method {run.method!r} adapts to the validation split's statistics: "
                        f"{'; '.join(readers)}; set train.validation (e.g. {{fraction: 0.02}}) in its experiment "
                        "group or in the method's train")
    weights = method.weights
    if weights is not None and weights.type == "dafa" and weights.warmup_epoch is not None \
            and not 1 <= weights.warmup_epoch < run.epochs:
        problems.append(f"method_config.weights.warmup_epoch: {weights.warmup_epoch} is not valid for a run of "
                        f"{run.epochs} epochs (DAFA's weights come after that epoch); valid: 1..{run.epochs - 1}")
    info = DATASETS.get(run.dataset)
    if info is None:  # an unknown dataset is named by the registry check (study.config.spec)
        return problems
    problems += _class_problems(method, info.num_classes, run.dataset)
    synthetic = run.synthetic if run.dataset == "synthetic" else None
    image_size = synthetic.image_size if synthetic is not None else info.image_size
    model = MODELS.get(run.model)
    if model is not None and image_size < model.min_image_size:
        problems.append(f"model: {run.model!r} needs images of at least {model.min_image_size} pixels a side; "
                        f"{run.dataset}'s are {image_size}")
    if run.constructed is not None:  # a constructed training set's images per class are the data's to tell
        return problems + _split_problems(run, run.train_per_class)
    if synthetic is not None:
        return problems + _subset_problems(run, synthetic.train_per_class, synthetic.test_per_class,
                                           "the synthetic data (data.synthetic)")
    return problems + _subset_problems(run, info.train_per_class, info.test_per_class, run.dataset)


def _subset_problems(run: RunConfig, train: int | None, test: int | None, data: str) -> list[str]:
    """The subsets the run's loaders take of its data (the training subset, the per-epoch test
    subset, the validation split), where the images per class of the data are known."""
    problems = []
    if train is not None and run.train_per_class is not None and run.train_per_class > train:
        problems.append(f"train_per_class: {run.train_per_class} is more than the {train} training images per "
                        f"class of {data}; valid: 1..{train}")
    if test is not None and run.epoch_eval.per_class > test:
        problems.append(f"epoch_eval.per_class: {run.epoch_eval.per_class} is more than the {test} test images per "
                        f"class of {data}; valid: 1..{test}")
    available = min(run.train_per_class or train, train) if train is not None else run.train_per_class
    return problems + _split_problems(run, available)
