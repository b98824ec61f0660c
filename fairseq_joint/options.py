"""The options' checks, in one leaf module that models, criteria, tasks and commands import without importing each
other: the one number check and a configuration's validation.

* Numbers: every numeric field of a configuration dataclass declares the values it accepts next to it,
  ``metadata={"range": Range(...)}``; every command's numeric argument is an argparse type of the same
  :class:`Range` (:func:`fairseq_joint.cli.common.number`). :func:`number_problem` is the one check of all of them:
  finite, a whole number where the range says so, inside the range.
* Cross-field rules: a configuration dataclass's ``validate(cfg)`` (a static method; ``cfg`` is the whole fairseq
  configuration, so a rule may read another section as fairseq's own ``II("model.…")`` interpolations do). It
  refuses with :mod:`fairseq_joint.errors`' types.
* :func:`check` runs both for one section; ``fairseq_joint.checks.validate`` runs it for the task, model and
  criterion a configuration names, found through fairseq's registries, once before fairseq starts (and for a
  checkpoint's configuration before its model is built).
"""

import dataclasses
import math
import numbers
import os
from typing import Callable, Dict, Iterable, Iterator, Optional, Sequence, Tuple

import numpy as np

from fairseq_joint.errors import OptionError

#: the metadata key of a dataclass field's :class:`Range`
RANGE = "range"


@dataclasses.dataclass(frozen=True)
class Range:
    """The values a numeric option accepts: finite (always), at least ``low`` and at most ``high`` (None: no bound;
    ``low_open``/``high_open``: the bound itself excluded), a whole number with ``integer``."""

    low: Optional[float] = None
    high: Optional[float] = None
    low_open: bool = False
    high_open: bool = False
    integer: bool = False
    #: a word for the range (``positive``), said before it
    name: str = ""

    def __str__(self) -> str:
        if self.name:
            return f"{self.name} ({dataclasses.replace(self, name='')})"
        what = "an integer" if self.integer else "a finite number"
        low, high = (b if b is None or isinstance(b, int) else f"{b:g}" for b in (self.low, self.high))
        if self.low is not None and self.high is not None:
            return f"{what} in {'(' if self.low_open else '['}{low}, {high}{')' if self.high_open else ']'}"
        if self.low is not None:
            return f"{what} {'>' if self.low_open else '>='} {low}"
        if self.high is not None:
            return f"{what} {'<' if self.high_open else '<='} {high}"
        return what


#: the shapes most options take
ANY = Range()
POSITIVE = Range(0, low_open=True, name="positive")
NON_NEGATIVE = Range(0)
PROBABILITY = Range(0, 1)
#: a fraction of a set that is at least one member: (0, 1] (--sample-rate, --label-sample-rate)
FRACTION = Range(0, 1, low_open=True)
DROPOUT = Range(0, 1, high_open=True)
POSITIVE_INT = Range(1, integer=True, name="positive")
NON_NEGATIVE_INT = Range(0, integer=True)
#: the largest float32: a number added to float32 scores (GILE's γ, the cosine prior's λ) beyond it made every score
#: ±inf
FLOAT32_MAX = float(np.finfo(np.float32).max)
#: what a float32 holds: values that end up in float32 tensors (a float64 such as 1e39 passed as finite, then turned
#: every score into -inf)
FLOAT32 = Range(-FLOAT32_MAX, FLOAT32_MAX, name="a float32 number")
NON_NEGATIVE_FLOAT32 = Range(0, FLOAT32_MAX)
#: what ``torch.manual_seed`` accepts (a negative seed is mapped to 2^64 + seed)
SEED = Range(-(2 ** 63), 2 ** 64 - 1, integer=True)
#: the largest integer an option may take where its range sets no upper bound: what a 64-bit integer (a C long, numpy's
#: and torch's int64) holds; beyond it fairseq and torch fail in "Python int too large to convert to C long"
INT64_MAX = 2 ** 63 - 1


def number_problem(value, allowed: Range) -> Optional[str]:
    """Why ``value`` is not a number of ``allowed`` ("must be ..., got ..."), or None: the one check of every numeric
    option (a bool is not a number; an integer range takes integers only; an integer beyond :data:`INT64_MAX`, where
    the range sets no bound, is refused too)."""
    ok = isinstance(value, numbers.Real) and not isinstance(value, bool)  # numpy's numbers too, not numpy's bool_
    if ok and allowed.integer:
        ok = isinstance(value, numbers.Integral) or (math.isfinite(value) and float(value).is_integer())
    if ok:
        ok = math.isfinite(value)
    if ok and allowed.low is not None:
        ok = value > allowed.low if allowed.low_open else value >= allowed.low
    if ok and allowed.high is not None:
        ok = value < allowed.high if allowed.high_open else value <= allowed.high
    if not ok:
        return f"must be {allowed}, got {value!r}"
    if (allowed.integer or isinstance(value, int)) and allowed.high is None and abs(value) > INT64_MAX:
        return f"must be {allowed} and at most {INT64_MAX} in magnitude (a 64-bit integer), got {value!r}"
    return None


def as_number(text: str, integer: bool = False):
    """``text`` as an int (``integer``) or a float, or the text itself where it is no number (for
    :func:`number_problem` to refuse, naming it)."""
    try:
        return int(text) if integer else float(text)
    except ValueError:
        return text


def check_number(option: str, value, allowed: Range):
    """``value`` if :func:`number_problem` finds nothing, else an ``OptionError`` naming ``option``."""
    problem = number_problem(value, allowed)
    if problem is not None:
        raise OptionError(f"{option} {problem}: give a value in that range")
    return value


def check_choice(option: str, value, choices):
    """``value`` if it is one of ``choices`` (an option's names: fairseq's parser checks a command line's, this the
    Python API's), else an ``OptionError`` naming ``option`` and the choices."""
    if value not in choices:
        raise OptionError(f"{option}: unknown {value!r}; choose one of {', '.join(choices)}")
    return value


def named_values(option: str, items: Iterable[str], form: str = "NAME=VALUE", names: Optional[Sequence[str]] = None,
                 unnamed: Optional[Callable[[str], str]] = None) -> Dict[str, str]:
    """``option``'s ``NAME=VALUE`` items (``--language-weights en=0.5``, ``--aligned pl=FILE``) -> {name: value} in the
    order given, names and values stripped; the one check of such lists: every name given once and one of ``names``
    where they are known, every value non-empty. With ``unnamed``, an item without ``=`` (or that is an existing path,
    ``=`` in it) is a bare value named ``unnamed(item)``; without, it is refused. A refusal names the item and
    ``form``, what to give."""
    out: Dict[str, str] = {}
    key = form.split("=")[0]
    for item in items:
        name, sep, value = (part.strip() for part in item.partition("="))
        bare = unnamed is not None and (not sep or os.path.exists(item))
        if bare:
            name, value = unnamed(item), item
        if not name or not (sep or bare) or names is not None and name not in names:
            known = f"; {key} one of {', '.join(names)}" if names else ""
            raise OptionError(f"{option} {item!r}: give {form}{known}")
        if not value:
            raise OptionError(f"{option} {item!r}: nothing follows '=': give {form}")
        if name in out and bare:
            raise OptionError(f"{option} {item!r}: named {name} as an earlier one is: give {form}")
        if name in out:
            raise OptionError(f"{option} {item!r}: {key} {name} is given twice: give each {key} once")
        out[name] = value
    return out


def flag(name: str) -> str:
    """The command-line option of a configuration field (``joint_dim`` -> ``--joint-dim``)."""
    return "--" + name.replace("_", "-")


def keyword(name: str, value) -> str:
    """How a refusal names a value given as a Python keyword, or a key of fairseq's overrides (``lenpen=nan:``): the
    caller wrote the name, not the command-line option."""
    return f"{name}={value!r}:"


def ranges(config: type) -> Iterator[Tuple[str, Range]]:
    """``(field, range)`` of every field of the dataclass ``config`` (its own and those it inherits) that declares a
    :class:`Range`."""
    for f in dataclasses.fields(config):
        if RANGE in f.metadata:
            yield f.name, f.metadata[RANGE]


def check(config: type, options, cfg, rules: bool = True) -> None:
    """The options ``options`` (a section of ``cfg``, the whole configuration: a DictConfig, or the Namespace of a
    legacy model) as the dataclass ``config`` declares them: every number set in its :class:`Range`, then with
    ``rules`` the cross-field rules, ``validate(cfg)`` of ``config`` and of each dataclass it extends, each once (a
    base's first)."""
    for name, allowed in ranges(config):
        if not hasattr(options, name):
            continue  # a checkpoint's configuration older than the option: fairseq gives it the default
        value = getattr(options, name)
        if value is not None:  # an unset optional number
            check_number(flag(name), value, allowed)
    for cls in reversed(config.__mro__) if rules else ():
        if "validate" in vars(cls):
            vars(cls)["validate"].__func__(cfg)


#: the sections of a fairseq configuration whose options a registered class declares, in the order their rules run (a
#: criterion's rules name the criterion to use before the task's name the criteria it trains with)
SECTIONS = ("criterion", "model", "task")


def arch(model_options) -> str:
    """The ``--arch`` of a configuration's model section (a DictConfig names it ``_name``, a legacy namespace
    ``arch``)."""
    return model_options.arch if hasattr(model_options, "arch") else model_options._name


def registered(cfg, section: str) -> type:
    """The class fairseq's registries hold for what ``cfg`` names in ``section``: its task, its criterion, or the model
    of its ``--arch``."""
    from fairseq.criterions import CRITERION_REGISTRY
    from fairseq.models import ARCH_MODEL_REGISTRY
    from fairseq.tasks import TASK_REGISTRY

    options = getattr(cfg, section)
    if section == "model":
        return ARCH_MODEL_REGISTRY[arch(options)]
    return {"task": TASK_REGISTRY, "criterion": CRITERION_REGISTRY}[section][options._name]


def declared(cfg, section: str) -> Tuple[type, ...]:
    """The dataclasses that declare the options of what ``cfg`` names in ``section``: the one fairseq registered with
    it, or a legacy model's :attr:`Configured.configs`; none for what fairseq's registries do not hold."""
    from fairseq.criterions import CRITERION_DATACLASS_REGISTRY
    from fairseq.models import ARCH_MODEL_NAME_REGISTRY, MODEL_DATACLASS_REGISTRY
    from fairseq.tasks import TASK_DATACLASS_REGISTRY

    options = getattr(cfg, section, None)
    if options is None:
        return ()
    if section == "model":
        model = ARCH_MODEL_NAME_REGISTRY.get(arch(options))
        if model in MODEL_DATACLASS_REGISTRY:
            return (MODEL_DATACLASS_REGISTRY[model],)
        cls = registered(cfg, section) if model is not None else None
        return cls.configs if cls is not None and issubclass(cls, Configured) else ()
    found = {"task": TASK_DATACLASS_REGISTRY, "criterion": CRITERION_DATACLASS_REGISTRY}[section].get(options._name)
    return () if found is None else (found,)


class Configured:
    """A fairseq model of the legacy kind (registered without a dataclass: fairseq keeps its options in ``cfg.model``
    as one flat namespace) whose own options are the fields of the dataclasses :attr:`configs`, checked by
    :func:`check` as a dataclass model's are."""

    configs: Tuple[type, ...] = ()
