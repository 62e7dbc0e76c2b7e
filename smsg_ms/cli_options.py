"""Network options of the command line: ``--batch --seq --layers``, the widths (``--hidden
--heads --kv-heads --ffn --vocab --experts --top-k --attention``) and ``--shape PRESET``
(:mod:`smsg_ms.networks.presets`), shared by ``graph``, ``plan``, ``compare`` and ``score``."""
from __future__ import annotations

import argparse

from .errors import InputError
from .words import count

SIZE_FLAGS = ("batch", "seq", "layers")

#: ``--hardware``'s default and help: the presets by their names, the old names as aliases
#: (:data:`smsg_ms.cost.hardware.ALIASES`)
DEFAULT_HARDWARE = "atlas-800t-a2"
HARDWARE_HELP = ("hardware preset: atlas-800t-a2 (default), dgx-a100 or dgx-h100 (aliases: "
                 "ascend910b, a100, h100); or a JSON/YAML description file")


def canonical_hardware(name: str) -> str:
    """A preset's own name for an alias (``ascend910b`` → ``atlas-800t-a2``); anything else (a
    preset name, a file) unchanged."""
    from .cost.hardware import ALIASES

    return ALIASES.get(str(name).lower(), name)


class WholeWordsHelpFormatter(argparse.HelpFormatter):
    """argparse's help, wrapped at spaces only: a choice, preset or file pattern is never cut at
    a hyphen or inside (argparse's ``textwrap`` does both by default)."""

    def _split_lines(self, text, width):
        import textwrap

        return textwrap.wrap(" ".join(text.split()), width, break_long_words=False,
                             break_on_hyphens=False)


class OneLineParser(argparse.ArgumentParser):
    """argparse with one-line usage errors (the house rule for bad input), each pointing at the
    ``--help`` of the (sub)command it concerns: an unknown flag after a subcommand is reported by
    that subcommand's parser (argparse's own reports it from the top parser, whose help does not
    list the flags). Help is wrapped by :class:`WholeWordsHelpFormatter`."""

    def __init__(self, *args, **kwargs):
        kwargs.setdefault("formatter_class", WholeWordsHelpFormatter)
        super().__init__(*args, **kwargs)

    def error(self, message: str):
        self.exit(2, f"smsg-ms: error: {message} (see '{self.prog} --help')\n")

    def parse_args(self, args=None, namespace=None):
        parsed, extras = self.parse_known_args(args, namespace)
        if extras:
            self._parser_of(parsed).error(f"unrecognized arguments: {' '.join(extras)}")
        return parsed

    def usage_error(self, parsed, message: str):
        """Exit 2 with ``message``'s first line in argparse's one line, pointing at the
        ``--help`` of the subcommand ``parsed`` ran (:class:`UsageError` and the like, found
        after parsing); the lines of ``message`` indented by two blanks (one per bad field of
        a file) follow it, the others are left out."""
        first, *rest = message.splitlines() or [""]
        parser = self._parser_of(parsed)
        details = "".join(f"{line}\n" for line in rest if line.startswith("  "))
        parser.exit(2, f"smsg-ms: error: {first} (see '{parser.prog} --help')\n{details}")

    def _parser_of(self, parsed) -> argparse.ArgumentParser:
        """The sub-parser ``parsed.command`` names (self when none)."""
        for action in self._actions:
            if isinstance(action, argparse._SubParsersAction):
                return action.choices.get(getattr(parsed, "command", None), self)
        return self


def _positive(text: str, what: str) -> float:
    """A finite number > 0 read from ``text``; ``what`` names it in the error."""
    import math

    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not {what}") from None
    if not (math.isfinite(value) and value > 0):
        raise argparse.ArgumentTypeError(f"must be a positive {what.removeprefix('a ')}, "
                                         f"got {text}")
    return value


def positive_float(text: str) -> float:
    """argparse type: a finite number > 0."""
    return _positive(text, "a number")


def non_negative_int(text: str) -> int:
    """argparse type: an integer >= 0 (a rank)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be 0 or more, got {value}")
    return value


def positive_seconds(text: str) -> float:
    """argparse type: a finite number of seconds > 0."""
    return _positive(text, "a number of seconds")


def machine_of(args, error=ValueError):
    """The :class:`~smsg_ms.cost.hardware.Machine` of ``--hardware`` and ``--devices-per-node``.

    ``--devices-per-node N`` must be a positive integer, and with ``--devices D`` the devices
    must fill whole nodes (``N`` divides ``D``) or fit in part of one (``D < N``, as a preset's
    node does for ``--devices 4``): the cost model places rank ``r`` on node ``r // N``
    (:meth:`~smsg_ms.cost.hardware.Machine.fanout`), so a last node partly filled would price
    groups across it as if the node were whole.

    Raises:
        ``error``: an unknown preset or a bad description file: one line, or, with several bad
            fields, a line counting them and one line per field indented by two blanks (the
            CLI prints them after its one line); a bad ``--devices-per-node``, in a line
            starting ``--devices-per-node:``.
    """
    from .cost.hardware import get_hardware

    per_node, devices = args.devices_per_node, getattr(args, "devices", None)
    if per_node is not None and per_node < 1:
        raise error(f"--devices-per-node: devices per node must be a positive integer, got "
                    f"{per_node}")
    if per_node is not None and isinstance(devices, int) and devices > per_node \
            and devices % per_node:
        raise error(f"--devices-per-node: {per_node} devices per node do not divide --devices "
                    f"{devices} (the devices must fill whole nodes, or fit in one)")
    try:
        machine = get_hardware(args.hardware)
    except ValueError as exc:
        head, *fields = str(exc).splitlines()
        if not fields:
            raise error(f"--hardware: {head}") from None
        raise error(f"--hardware: {head.rstrip(':')}: {len(fields)} bad fields, one per line "
                    "below\n" + "\n".join(f"  {f.strip()}" for f in fields)) from None
    if per_node is not None:
        try:
            machine = machine.with_devices_per_node(per_node)
        except ValueError as exc:      # a single-level machine: no node to resize
            raise error(f"--devices-per-node: {exc}") from None
    if isinstance(devices, int):
        _check_levels_place(machine, devices, error)
    return machine


def _check_levels_place(machine, devices: int, error) -> None:
    """Refuse a machine whose levels cannot place ``devices``: a unit of a level (``count``
    units of the level below) must divide the devices or hold them all, and the outermost
    level, given a count, must hold them all (the rule of ``--devices-per-node`` above)."""
    last = len(machine.levels) - 1
    for i, (level, block) in enumerate(zip(machine.levels, machine.block_sizes())):
        if block is None or devices <= block:     # one unit of this level holds them all
            return
        where = f"--hardware: levels[{i}] ({level.name}) count {level.count}"
        if i == last:
            raise error(f"{where}: the levels hold {count(block, 'device')}, fewer than --devices "
                        f"{devices} (raise the count, or leave the outermost level's count out)")
        if devices % block:
            raise error(f"{where}: a {level.name} of {block} devices does not divide --devices "
                        f"{devices} (the devices must fill whole units of each level, or fit in "
                        "one)")


def positive_int(text: str) -> int:
    """argparse type: an integer >= 1."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def auto_or_count(text: str) -> str:
    """argparse type: ``auto`` or an integer >= 1, kept as text (``--pipeline``,
    ``--virtual-stages``)."""
    if text == "auto":
        return text
    try:
        return str(positive_int(text))
    except argparse.ArgumentTypeError as exc:
        raise argparse.ArgumentTypeError(f"{exc} (give 'auto' or a count of at least 1)"
                                         ) from None


def device_count(text: str) -> int:
    """argparse type: a device count MindSpore accepts (:func:`smsg_ms.devices.
    check_device_count`: 1, 2, 4 or a multiple of 8), refused naming the nearest that work."""
    from .devices import DeviceCountError, check_device_count

    value = positive_int(text)
    try:
        check_device_count(value)
    except DeviceCountError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return value


class UsageError(InputError):
    """Bad command-line input found after argparse (flags that do not go together, a number
    another flag rules out): the CLI reports it as argparse does, one line, exit 2."""


def add_json_arg(p: argparse.ArgumentParser) -> None:
    """``--json``: the command's result as JSON, alone on stdout."""
    p.add_argument("--json", action="store_true",
                   help="print the result as JSON on stdout (nothing else on stdout)")


def add_size_args(p: argparse.ArgumentParser) -> None:
    """``--batch --seq --layers``, the width flags and ``--shape``."""
    from .networks.presets import SHAPES

    p.add_argument("--batch", type=positive_int, help="global batch size (network option)")
    p.add_argument("--seq", type=positive_int, help="sequence length (network option)")
    p.add_argument("--layers", type=positive_int, help="number of layers (network option)")
    p.add_argument("--shape", metavar="PRESET", help="a published model's widths: "
                   + ", ".join(SHAPES) + " (the flags given override it)")
    widths = p.add_argument_group("widths (network options, where the network has them)")
    widths.add_argument("--hidden", type=positive_int, help="model width")
    widths.add_argument("--heads", type=positive_int, help="attention heads")
    widths.add_argument("--kv-heads", type=positive_int, help="key/value heads (grouped-query "
                                                                "attention)")
    widths.add_argument("--ffn", type=positive_int, help="MLP width")
    widths.add_argument("--vocab", type=positive_int, help="vocabulary size")
    widths.add_argument("--experts", type=positive_int, help="experts per MoE layer (built-in "
                                                               "moe)")
    widths.add_argument("--top-k", type=positive_int, help="experts per token")
    widths.add_argument("--attention", choices=("plain", "flash", "flash-causal"),
                        help="attention of the built-in llama: BatchMatMuls (plain, the default), "
                             "FlashAttentionScore (flash), FlashAttentionScore with the causal "
                             "sparse_mode 2 (flash-causal)")


def given_options(args) -> dict:
    """The network options given as flags (not the preset's)."""
    from .networks.presets import WIDTH_FLAGS

    keys = SIZE_FLAGS + tuple(WIDTH_FLAGS)
    return {k: getattr(args, k) for k in keys if getattr(args, k, None) is not None}


def network_shape(spec: str, options: dict) -> dict:
    """The shape a network is planned for: each network option of the command line (the size
    flags :data:`SIZE_FLAGS`, then the width flags, in the flags' order) that ``spec``'s
    function takes, at its value in ``options`` or else at the function's default; an option
    whose value is ``None`` (a default the network derives, as ``kv_heads`` = ``heads``) is
    left out. A function with ``**kwargs`` gives the options given only; a spec that does not
    resolve here (a plan file of another machine's network) too.

    ``llama`` with ``{"batch": 16}``: ``{"batch": 16, "seq": 512, "layers": 2, "hidden":
    1024, "heads": 16, "ffn": 2816, "vocab": 32000, "attention": "plain"}``."""
    import inspect

    from .networks import NetworkSpecError, resolve_spec
    from .networks.presets import WIDTH_FLAGS

    keys = SIZE_FLAGS + tuple(WIDTH_FLAGS)
    try:
        params = inspect.signature(resolve_spec(spec)[1]).parameters
    except NetworkSpecError:
        params = {}
    out = {}
    for key in keys:
        if key in options:
            value = options[key]
        elif key in params and params[key].default is not inspect.Parameter.empty:
            value = params[key].default
        else:
            continue
        if value is not None:
            out[key] = value
    return out


def flag_of(option: str) -> str:
    """The command-line flag of a network option: ``kv_heads`` → ``--kv-heads``."""
    return "--" + option.replace("_", "-")


def check_flags(spec: str, given: dict) -> None:
    """Refuse the network-option flags ``spec``'s function does not take, naming the flags it
    does (``network 'mlp' takes no --heads (its flags: --batch, --hidden)``); a function with
    ``**kwargs`` takes every flag.

    Raises:
        UsageError: a flag not taken (the CLI's exit 2, as argparse's unknown flags).
        NetworkSpecError: a spec that does not resolve.
    """
    import inspect

    from .networks import resolve_spec
    from .networks.presets import WIDTH_FLAGS

    _, func = resolve_spec(spec)
    params = inspect.signature(func).parameters
    if any(p.kind == p.VAR_KEYWORD for p in params.values()):
        return
    bad = [flag_of(k) for k in given if k not in params]
    if bad:
        taken = [flag_of(k) for k in SIZE_FLAGS + tuple(WIDTH_FLAGS) if k in params]
        raise UsageError(f"network '{spec}' takes no {', '.join(bad)} (its flags: "
                         f"{', '.join(taken) or 'none of the size flags'})")


#: (network, preset) pairs whose note was printed (commands read the options more than once)
_NOTED: set = set()


def network_options(args) -> dict:
    """The network options: the ``--shape`` preset's, overridden by the flags given; with
    ``--mindformers-config`` (after :func:`apply_mindformers_config`) also ``run_config`` and the
    run's global batch unless ``--batch`` is given. What the network changes of the preset's
    model (:func:`~smsg_ms.networks.presets.shape_note`) is printed on stderr.

    Raises:
        ShapeError: see :func:`smsg_ms.networks.presets.resolve_shape`.
        NetworkSpecError, UsageError: see :func:`check_flags`.
        smsg_ms.networks.width_rules.WidthError: widths a built-in cannot build (``--heads``
            not dividing ``--hidden``, ...), before any capture.
    """
    import sys

    from .networks.presets import resolve_shape, shape_note

    options = resolve_shape(args.network, getattr(args, "shape", None), given_options(args))
    check_flags(args.network, given_options(args))
    from .networks.width_rules import check_widths
    check_widths(args.network, options, given_options(args), getattr(args, "shape", None))
    note = shape_note(args.network, getattr(args, "shape", None))
    if note and (args.network, args.shape) not in _NOTED:
        _NOTED.add((args.network, args.shape))
        print(f"note: --shape {args.shape} with '{args.network}': {note}", file=sys.stderr)
    run = getattr(args, "mindformers_config", None)
    if run:
        from .networks.mf_run import global_batch, load_run_config

        options = {"run_config": run, **options}
        options.setdefault("batch", global_batch(load_run_config(run)))
    return options


#: the network spec of a mindformers run configuration (``--mindformers-config``)
MINDFORMERS_SPEC = "smsg_ms.networks.mf_run:build"


def add_mindformers_arg(p: argparse.ArgumentParser) -> None:
    """``--mindformers-config RUN.yaml``."""
    p.add_argument("--mindformers-config", metavar="RUN.yaml",
                   help="a mindformers run configuration (run_mindformer.py's YAML): its "
                        "model_config is the network (--layers and the width flags reduce it "
                        "for a quick plan)")


def apply_mindformers_config(args) -> dict | None:
    """With ``--mindformers-config``: read the YAML, refuse a model that cannot be captured yet
    (mixture of experts), set ``args.network`` to :data:`MINDFORMERS_SPEC` and the path to an
    absolute one (the dry-run children run in another folder). Returns the parsed YAML, or
    ``None`` without the option.

    Raises:
        smsg_ms.networks.mf_run.RunConfigError: unreadable YAML, no model, a MoE model, or a
            network named as well.
    """
    import os

    path = getattr(args, "mindformers_config", None)
    if not path:
        return None
    from .networks import DEFAULT_NETWORK
    from .networks.mf_run import (RunConfigError, architecture, is_moe, load_run_config,
                                  model_config_of)

    if getattr(args, "network", None) not in (None, DEFAULT_NETWORK, MINDFORMERS_SPEC):
        raise RunConfigError(f"give a network or --mindformers-config, not both (got "
                             f"'{args.network}')")
    data = load_run_config(path)
    model_config = model_config_of(data, path)
    args.network = MINDFORMERS_SPEC
    args.mindformers_config = os.path.abspath(path)
    return data


def name_options(args) -> dict:
    """The options a default file name carries: the preset's name and the flags given."""
    shape = getattr(args, "shape", None)
    return {**({"shape": shape} if shape else {}), **given_options(args)}


def add_pipeline_shape_args(p: argparse.ArgumentParser) -> None:
    """``plan``'s ``--optimizer-sharding`` (off, on = level1, or MindSpore's ``optimizer_level``)
    and ``--virtual-stages`` (interleaved pipeline: ``auto`` or a count >= 1)."""
    p.add_argument("--optimizer-sharding", choices=("auto", "on", "off", "level1", "level2",
                   "level3"), default="auto", help="MindSpore's enable_parallel_optimizer (on = "
                   "level1) or optimizer_level with --pipeline (default: off and levels searched)")
    p.add_argument("--virtual-stages", default="1", metavar="auto|V",
                   type=auto_or_count,
                   help="virtual stages of an interleaved pipeline with --pipeline (default 1: "
                        "plain 1F1B; auto: searched)")


def default_plan_path(network: str, devices: int, options: dict | None = None,
                      settings: dict | None = None) -> str:
    """``<network>[-<option><value>...]-<N>dev[-<setting>...].plan.json`` in the working folder
    (``:``/``.``/``/`` → ``-``), so plans of other shapes or planning settings do not overwrite
    each other (``llama-batch16-8dev``, ``llama-8dev-p2-h100-mem80-propagate``).

    ``settings``: the non-default planning settings, ``{"pipeline": "2", "hardware": "h100",
    "memory": 80.0, "micro_batches": 4, "optimizer_sharding": "on", "write_back": "propagate",
    "time_limit": 5.0}`` (any subset; a ``None`` value is left out)."""
    def safe(text) -> str:
        return "".join(c if c.isalnum() or c in "_-" else "-" for c in str(text))

    shape = "".join(f"-{k}{v}" for k, v in sorted((options or {}).items()))
    tags = {"pipeline": "p{}", "micro_batches": "mb{}", "optimizer_sharding": "os{}",
            "virtual_stages": "vs{}", "hardware": "{}", "devices_per_node": "dpn{}",
            "memory": "mem{}", "write_back": "{}", "time_limit": "t{}",
            "replace_strategies": "{}", "build_for_devices": "{}"}
    extra = ""
    for key, fmt in tags.items():
        value = (settings or {}).get(key)
        if value is None:
            continue
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        extra += "-" + safe(fmt.format(value))
    return f"{safe(network)}{shape}-{devices}dev{extra}.plan.json"

