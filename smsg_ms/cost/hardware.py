"""A machine in levels: the BSP model's ``g`` and ``l`` per level (Valiant's Multi-BSP), and the
device's own figures (peak FLOP/s per compute unit, HBM bandwidth, memory, operator launch).

A :class:`Machine` is its device figures plus a tuple of :class:`Level` from the innermost
(``node``: the devices of one server on its fast links) outwards (``cluster``: the nodes on the
network, optionally more levels, e.g. a ``pod`` behind a spine switch). Ranks fill the levels in
order: rank ``r`` is device ``r % n0`` of node ``r // n0`` (MindSpore's and torchrun's rank
order: ranks of one server are consecutive; ``RANK_TABLE``/``msrun`` assign ``rank_id`` server
by server). :meth:`Machine.fanout` places a communication group on the levels; the time of a
collective on that placement is :func:`smsg_ms.cost.api.collective_seconds`.

Presets: :data:`PRESETS` (every figure with its source in :data:`SOURCES`); the old names
``ascend910b``, ``a100``, ``h100`` are aliases (:data:`ALIASES`). A user's own machine:
:func:`load_machine` (JSON or YAML, validated). No profiling.
"""
from __future__ import annotations

import json
import os
from dataclasses import dataclass, field, replace
from functools import lru_cache
from math import prod
from typing import Any

#: the device's compute units: ``cube`` (matrix unit: Ascend Cube, NVIDIA Tensor Core) and
#: ``vector`` (Ascend Vector unit, CUDA cores)
UNITS = ("cube", "vector")


@dataclass(frozen=True)
class Level:
    """One level of the machine's interconnect.

    Attributes:
        name: ``node``, ``cluster``, ``pod`` ...
        count: units of the level below held by one unit of this level (devices per node for
            the first level, nodes per cluster for the second ...); ``None`` for the outermost
            level: as many as the job uses.
        bandwidth: bytes/s per device and direction on this level's links (what one device can
            send to a device that shares this level but not the one below).
        latency: seconds per synchronisation (start-up of one collective step) on this level.
    """

    name: str
    count: int | None
    bandwidth: float
    latency: float


@dataclass(frozen=True)
class Machine:
    """Device figures and interconnect levels (innermost first).

    Attributes:
        name: preset name (or the file's ``name``).
        cube_flops: peak dense FLOP/s of the matrix unit at the training dtype (fp16/bf16).
        vector_flops: peak FLOP/s of the vector unit (element-wise, norms, softmax).
        hbm_bandwidth: bytes/s between the device's memory (HBM) and its compute units.
        memory: bytes of device memory.
        launch_latency: seconds of one operator (kernel) launch.
        levels: interconnect levels, innermost first; the last has ``count`` ``None``.
        matrix_units: matrix-unit multiprocessors that each run one output tile of a GEMM at
            a time (NVIDIA: streaming multiprocessors; ``None``: no wave quantization,
            :func:`smsg_ms.cost.kernels.wave_quantization`).
        gemm_tile: ``(rows, columns)`` of the output tile one unit computes (``None`` with
            ``matrix_units``).

    Raises:
        ValueError: a non-positive figure, no level, a level ``count`` < 1, or an inner level
            without a count (one line per bad field: :func:`validate`).
    """

    name: str
    cube_flops: float
    vector_flops: float
    hbm_bandwidth: float
    memory: float
    launch_latency: float
    levels: tuple[Level, ...] = field(default_factory=tuple)
    matrix_units: int | None = None
    gemm_tile: tuple[int, int] | None = None

    def __post_init__(self):
        errors = machine_errors(self)
        if errors:
            raise ValueError(f"hardware {self.name!r}: " + "; ".join(errors))

    # ---- figures the cost model reads ------------------------------------------------------
    def peak(self, unit: str) -> float:
        """Peak FLOP/s of ``unit`` (``cube`` or ``vector``).

        Raises:
            ValueError: unknown unit.
        """
        if unit == "cube":
            return self.cube_flops
        if unit == "vector":
            return self.vector_flops
        raise ValueError(f"unknown compute unit {unit!r}; units: {', '.join(UNITS)}")

    @property
    def devices_per_node(self) -> int | None:
        """Devices of the first level (``None`` when the machine has a single level)."""
        return self.levels[0].count

    def block_sizes(self) -> tuple[int | None, ...]:
        """Devices in one unit of each level (cumulative products of the counts): ``(8, None)``
        for 8 devices per node and a cluster of any size."""
        out, size = [], 1
        for level in self.levels:
            size = None if level.count is None or size is None else size * level.count
            out.append(size)
        return tuple(out)

    def with_devices_per_node(self, n: int) -> "Machine":
        """The same machine with ``n`` devices per node (``--devices-per-node``).

        Raises:
            ValueError: ``n`` < 1, or the machine has a single level (no node to resize).
        """
        if not isinstance(n, int) or isinstance(n, bool) or n < 1:
            raise ValueError(f"devices per node must be a positive integer, got {n!r}")
        if len(self.levels) < 2:
            raise ValueError(f"hardware {self.name!r} has a single level; no node to resize")
        first = replace(self.levels[0], count=n)
        return replace(self, levels=(first,) + self.levels[1:])

    def fanout(self, group: int, span: tuple = ()) -> tuple[int, ...]:
        """Devices of a communication group per level: ``k_i`` units of level ``i − 1`` inside
        one unit of level ``i`` (``k_0`` devices per node, ``k_1`` nodes ...); ``prod == group``
        for a regular group.

        ``span``: the group's ranks as ``((size, stride), ...)``: the group containing rank 0 is
        ``{Σ j_a · stride_a : 0 ≤ j_a < size_a}`` (a group varies one or more device-matrix axes
        with the others fixed; the stride of an axis is the product of the axes right of it:
        MindSpore's ``DeviceMatrix::GetDevicesAlongDim``, rank = row-major index over the device
        matrix, ``frontend/parallel/device_matrix.cc``). ``()`` means ranks ``0 .. group − 1``.
        Memoised.
        """
        if group <= 1:
            return (1,) * len(self.levels)
        return _fanout(self.block_sizes(), int(group), tuple(span) or ((int(group), 1),))

    def links(self) -> tuple[tuple[float, float], ...]:
        """``(bandwidth, latency)`` per level, innermost first."""
        return tuple((x.bandwidth, x.latency) for x in self.levels)

    def collective_seconds(self, kind: str, group: int, full_bytes, span: tuple = (),
                           synchronisations: int = 1) -> float:
        """:func:`smsg_ms.cost.api.collective_seconds` of a group placed by :meth:`fanout`.

        Memoised per machine for plain ``int`` / ``float`` arguments (the value's type is part
        of the key: an ``int`` and an equal ``float`` divide differently past 2^53), so a
        repeated collective returns the same float as computing it again."""
        key = (kind, group, type(full_bytes), full_bytes, span, synchronisations)
        try:
            memo = self.__dict__["_seconds_memo"]
        except KeyError:
            memo = {}
            object.__setattr__(self, "_seconds_memo", memo)
        try:
            return memo[key]
        except KeyError:
            pass
        except TypeError:       # an unhashable argument: not memoised
            key = None
        from .api import collective_seconds

        out = collective_seconds(kind, self.fanout(group, span), full_bytes, self.links(),
                                 synchronisations)
        if key is not None and type(full_bytes) in (int, float) and type(group) is int \
                and len(memo) < 1 << 20:
            memo[key] = out
        return out

    def to_dict(self) -> dict[str, Any]:
        """The description as plain data (the file format :func:`load_machine` reads)."""
        return {"name": self.name, "cube_flops": self.cube_flops,
                "vector_flops": self.vector_flops, "hbm_bandwidth": self.hbm_bandwidth,
                "memory": self.memory, "launch_latency": self.launch_latency,
                "levels": [{"name": x.name, "count": x.count, "bandwidth": x.bandwidth,
                            "latency": x.latency} for x in self.levels],
                **({"matrix_units": self.matrix_units, "gemm_tile": list(self.gemm_tile)}
                   if self.matrix_units is not None else {})}


#: the old name of the type (a machine is the hardware description)
Hardware = Machine


@lru_cache(maxsize=4096)
def _fanout(blocks: tuple, group: int, span: tuple) -> tuple[int, ...]:
    ranks = [0]
    for size, stride in span:
        ranks = [r + j * stride for r in ranks for j in range(size)]
    out, below = [], len(set(ranks))
    for block in blocks:
        units = 1 if block is None else len({r // block for r in ranks})
        out.append(max(1, round(below / units)))
        below = units
    return tuple(out)


def machine_errors(m: Machine) -> list[str]:
    """One line per bad field of ``m`` (``[]`` when valid)."""
    errors = []
    for name in ("cube_flops", "vector_flops", "hbm_bandwidth", "memory", "launch_latency"):
        value = getattr(m, name)
        if not _positive(value):
            errors.append(f"{name} must be a positive number, got {value!r}")
    if not m.levels:
        errors.append("levels: at least one level is needed")
    if (m.matrix_units is None) != (m.gemm_tile is None):
        errors.append("matrix_units and gemm_tile go together (both or neither)")
    elif m.matrix_units is not None:
        if isinstance(m.matrix_units, bool) or not isinstance(m.matrix_units, int) or (
                m.matrix_units < 1):
            errors.append(f"matrix_units must be a positive integer, got {m.matrix_units!r}")
        tile = m.gemm_tile
        if not (isinstance(tile, tuple) and len(tile) == 2 and all(
                isinstance(x, int) and not isinstance(x, bool) and x > 0 for x in tile)):
            errors.append(f"gemm_tile must be two positive integers, got {tile!r}")
    for i, level in enumerate(m.levels):
        where = f"levels[{i}] ({level.name})"
        last = i == len(m.levels) - 1
        if level.count is None and not last:
            errors.append(f"{where}: count is needed on every level but the outermost")
        elif level.count is not None and (isinstance(level.count, bool) or
                                          not isinstance(level.count, int) or level.count < 1):
            errors.append(f"{where}: count must be a positive integer, got {level.count!r}")
        for name in ("bandwidth", "latency"):
            if not _positive(getattr(level, name)):
                errors.append(f"{where}: {name} must be a positive number, got "
                              f"{getattr(level, name)!r}")
    return errors


def _positive(x) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and x > 0 and x != float("inf")


# ---- presets ---------------------------------------------------------------------------------
#: Source of every preset figure.
SOURCES: dict[str, dict[str, str]] = {
    "atlas-800t-a2": {
        "cube_flops": "Huawei Atlas 800T A2 training server datasheet: Ascend 910B, 313 TFLOPS "
                      "FP16 per NPU (2.5 PFLOPS FP16 for 8 NPUs)",
        "vector_flops": "Liao et al., 'Ascend: a scalable and unified architecture for "
                        "ubiquitous deep neural network computing', HPCA 2021: per AI Core the "
                        "Cube does 4096 FP16 MACs/cycle, the Vector unit 128 FP16 lanes "
                        "(1/16 of the Cube's FLOPs): 313/16 = 19.6 TFLOPS",
        "hbm_bandwidth": "Ascend 910B: 64 GB HBM2e, 1.6 TB/s (Huawei Atlas 800T A2 datasheet)",
        "memory": "Atlas 800T A2 datasheet: 64 GB HBM per NPU",
        "launch_latency": "estimate: ~10 us per task on Ascend with kernel-by-kernel dispatch "
                          "(the order of CANN's documented host-side task launch cost)",
        "node": "Atlas 800T A2: 8 NPUs in an HCCS full mesh, 7 links x 56 GB/s = 392 GB/s "
                "bidirectional per NPU, 196 GB/s per direction; ~10 us HCCL start-up",
        "cluster": "Atlas 800T A2: 8 x 200GE RoCE v2 ports, one per NPU: 25 GB/s per direction "
                   "per NPU; ~20 us per RoCE collective step (HCCL inter-server start-up)",
    },
    "dgx-a100": {
        "cube_flops": "NVIDIA A100 Tensor Core GPU datasheet (SXM4 80GB): 312 TFLOPS BF16 "
                      "Tensor Core, dense",
        "vector_flops": "A100 datasheet: 19.5 TFLOPS FP32 (CUDA cores)",
        "hbm_bandwidth": "A100 datasheet: 80GB HBM2e, 2,039 GB/s",
        "memory": "A100 datasheet: 80 GB",
        "launch_latency": "NVIDIA, 'Getting started with CUDA Graphs' (2019): ~3.8 us per "
                          "kernel launched from a stream; ~5 us with a framework's dispatch",
        "node": "DGX A100 user guide: NVLink 3 600 GB/s bidirectional per GPU via NVSwitch, "
                "300 GB/s per direction; ~8 us NCCL ring start-up",
        "cluster": "DGX A100 user guide: 8 x 200 Gb/s HDR InfiniBand (ConnectX-6), one per "
                   "GPU: 25 GB/s per direction; ~15 us NCCL inter-node start-up",
        "matrix_units": "NVIDIA A100 Tensor Core GPU architecture whitepaper (2020): 108 SMs "
                        "on the A100 SXM4",
        "gemm_tile": "NVIDIA Deep Learning Performance, 'Matrix Multiplication Background "
                     "User's Guide' (DU-09799-001, 2023) §3.2 Wave quantization: on A100 "
                     "cuBLAS runs one 256x128 output tile per SM, a wave of 108 tiles",
    },
    "dgx-h100": {
        "cube_flops": "NVIDIA H100 Tensor Core GPU datasheet (SXM5): 989 TFLOPS BF16 Tensor "
                      "Core, dense",
        "vector_flops": "H100 datasheet (SXM5): 67 TFLOPS FP32",
        "hbm_bandwidth": "H100 datasheet (SXM5): 80 GB HBM3, 3.35 TB/s",
        "memory": "H100 datasheet: 80 GB",
        "launch_latency": "NVIDIA, 'Getting started with CUDA Graphs' (2019): ~3.8 us per "
                          "kernel launched from a stream; ~4 us with a framework's dispatch",
        "node": "DGX H100 user guide: NVLink 4 900 GB/s bidirectional per GPU via NVSwitch, "
                "450 GB/s per direction; ~6 us NCCL start-up",
        "cluster": "DGX H100 user guide: 8 x 400 Gb/s NDR InfiniBand (ConnectX-7), one per "
                   "GPU: 50 GB/s per direction; ~12 us NCCL inter-node start-up",
    },
}

PRESETS: dict[str, Machine] = {
    "atlas-800t-a2": Machine("atlas-800t-a2", cube_flops=313e12, vector_flops=313e12 / 16,
                             hbm_bandwidth=1.6e12, memory=64 * 2**30, launch_latency=10e-6,
                             levels=(Level("node", 8, 196e9, 10e-6),
                                     Level("cluster", None, 25e9, 20e-6))),
    "dgx-a100": Machine("dgx-a100", cube_flops=312e12, vector_flops=19.5e12,
                        hbm_bandwidth=2.039e12, memory=80 * 2**30, launch_latency=5e-6,
                        levels=(Level("node", 8, 300e9, 8e-6),
                                Level("cluster", None, 25e9, 15e-6)),
                        matrix_units=108, gemm_tile=(256, 128)),
    "dgx-h100": Machine("dgx-h100", cube_flops=989e12, vector_flops=67e12,
                        hbm_bandwidth=3.35e12, memory=80 * 2**30, launch_latency=4e-6,
                        levels=(Level("node", 8, 450e9, 6e-6),
                                Level("cluster", None, 50e9, 12e-6))),
}

#: old preset names (one accelerator model) → the server they come in
ALIASES = {"ascend910b": "atlas-800t-a2", "a100": "dgx-a100", "h100": "dgx-h100"}


def preset_names() -> list[str]:
    """Every name :func:`get_hardware` takes (presets and aliases), sorted."""
    return sorted(set(PRESETS) | set(ALIASES))


def get_hardware(name_or_hw, devices_per_node: int | None = None) -> Machine:
    """A preset or alias by name, a path to a description file (ends in ``.json``, ``.yaml``,
    ``.yml``: :func:`load_machine`), or a :class:`Machine` passed through; with
    ``devices_per_node`` the first level resized (:meth:`Machine.with_devices_per_node`).

    Raises:
        ValueError: unknown name (the message lists the presets), a bad file (one line per bad
            field), a bad ``devices_per_node``.
    """
    if isinstance(name_or_hw, Machine):
        machine = name_or_hw
    else:
        key = str(name_or_hw)
        if key.lower().endswith((".json", ".yaml", ".yml")) or os.sep in key:
            machine = load_machine(key)
        else:
            key = ALIASES.get(key.lower(), key.lower())
            if key not in PRESETS:
                raise ValueError(f"unknown hardware {name_or_hw!r}; presets: "
                                 f"{', '.join(preset_names())}; or a .json/.yaml file")
            machine = PRESETS[key]
    if devices_per_node is not None:
        machine = machine.with_devices_per_node(devices_per_node)
    return machine


def load_machine(path: str) -> Machine:
    """Read a machine description from a JSON or YAML file: the keys of
    :meth:`Machine.to_dict` (``name`` optional, default the file's stem).

    Raises:
        ValueError: the file cannot be read or parsed, or fields are missing, unknown or bad;
            one line per bad field after the file's name.
    """
    try:
        with open(path, encoding="utf-8") as fh:
            text = fh.read()
    except OSError as exc:
        raise ValueError(f"hardware file {path}: cannot read it ({exc.strerror})") from None
    try:
        if path.lower().endswith(".json"):
            data = json.loads(text)
        else:
            import yaml

            data = yaml.safe_load(text)
    except Exception as exc:  # noqa: BLE001 (json and yaml raise their own errors)
        raise ValueError(f"hardware file {path}: not valid "
                         f"{'JSON' if path.lower().endswith('.json') else 'YAML'} "
                         f"({str(exc).splitlines()[0]})") from None
    stem = os.path.splitext(os.path.basename(path))[0]
    return machine_from_dict(data, default_name=stem, where=f"hardware file {path}")


def _number(x):
    """``x``, or the float a numeric string spells (YAML reads ``313e12`` as a string)."""
    if isinstance(x, str):
        try:
            return float(x)
        except ValueError:
            return x
    return x


_DEVICE_KEYS = ("cube_flops", "vector_flops", "hbm_bandwidth", "memory", "launch_latency")
_OPTIONAL_KEYS = ("matrix_units", "gemm_tile")
_LEVEL_KEYS = ("name", "count", "bandwidth", "latency")


def _refuse(where: str, errors: list[str]):
    """Raise the errors of a description: one line for one error, else one line each under
    ``where``."""
    if len(errors) == 1:
        raise ValueError(f"{where}: {errors[0]}")
    raise ValueError(f"{where}:\n  " + "\n  ".join(errors))


#: figures of a description file below which (or, for seconds, at or above which) the number was
#: surely written in another unit than the file's: ``(unit, bound, example)``. No accelerator
#: has less than 1 MiB of memory, 1 GFLOP/s or 1 MB/s links, nor a launch or link latency of
#: a second; a figure past these is refused, naming the file's unit with an example.
_UNIT_CHECKS = {
    "memory": ("bytes", 2**20, "64 GiB = 68719476736"),
    "cube_flops": ("FLOP/s", 1e9, "313 TFLOP/s = 3.13e+14"),
    "vector_flops": ("FLOP/s", 1e9, "19.6 TFLOP/s = 1.96e+13"),
    "hbm_bandwidth": ("bytes/s", 1e6, "1.6 TB/s = 1.6e+12"),
    "bandwidth": ("bytes/s", 1e6, "196 GB/s = 1.96e+11"),
    "launch_latency": ("seconds", 1.0, "10 us = 1.0e-5"),
    "latency": ("seconds", 1.0, "10 us = 1.0e-5"),
}


def _unit_error(field: str, value, where: str = "") -> list[str]:
    """``[]``, or the line refusing ``value`` of ``field`` as written in another unit
    (:data:`_UNIT_CHECKS`); a value that is no positive number is :func:`machine_errors`'."""
    if field not in _UNIT_CHECKS or not _positive(value):
        return []
    unit, bound, example = _UNIT_CHECKS[field]
    wrong = value >= bound if unit == "seconds" else value < bound
    if not wrong:
        return []
    size = "large" if unit == "seconds" else "small"
    return [f"{where}{field} {value!r} is too {size} in {unit} (the file's unit): give e.g. "
            f"{example}"]


def machine_from_dict(data, default_name: str = "custom", where: str = "hardware") -> Machine:
    """A :class:`Machine` from plain data (:meth:`Machine.to_dict`'s keys; the units of
    :class:`Machine` and :class:`Level`: FLOP/s, bytes, bytes/s, seconds).

    Every bad field is reported at once: missing, unknown, of a bad value, or of a value no
    device has in the field's unit (:data:`_UNIT_CHECKS`: ``memory: 64`` is 64 bytes).

    Raises:
        ValueError: ``"<where>: "`` and the bad field, or one line per bad field when there
            are several.
    """
    if not isinstance(data, dict):
        raise ValueError(f"{where}: expected a mapping of fields, got {type(data).__name__}")
    errors = [f"unknown field {k!r}" for k in data
              if k not in _DEVICE_KEYS + _OPTIONAL_KEYS + ("name", "levels")]
    errors += [f"missing field {k!r}" for k in _DEVICE_KEYS + ("levels",) if k not in data]
    levels = data.get("levels", [])
    if not isinstance(levels, list):
        errors.append(f"levels must be a list, got {type(levels).__name__}")
        levels = []
    built = []
    for i, item in enumerate(levels):
        if not isinstance(item, dict):
            errors.append(f"levels[{i}] must be a mapping, got {type(item).__name__}")
            continue
        errors += [f"levels[{i}]: unknown field {k!r}" for k in item if k not in _LEVEL_KEYS]
        errors += [f"levels[{i}]: missing field {k!r}" for k in _LEVEL_KEYS[2:] if k not in item]
        level = Level(str(item.get("name", f"level{i}")), item.get("count"),
                      _number(item.get("bandwidth", 1.0)), _number(item.get("latency", 1.0)))
        built.append(level)
        for key in ("bandwidth", "latency"):
            if key in item:
                errors += _unit_error(key, getattr(level, key), f"levels[{i}] ({level.name}): ")
    # a missing figure is reported above; a stand-in lets the others be checked at once
    fields = {k: _number(data[k]) if k in data else 1.0 for k in _DEVICE_KEYS}
    for key in _DEVICE_KEYS:
        if key in data:
            errors += _unit_error(key, fields[key])
    tile = data.get("gemm_tile")
    fields.update(matrix_units=data.get("matrix_units"),
                  gemm_tile=tuple(tile) if isinstance(tile, list) else tile)
    candidate = object.__new__(Machine)
    for k, v in dict(fields, name=str(data.get("name", default_name)),
                     levels=tuple(built)).items():
        object.__setattr__(candidate, k, v)
    errors += [e for e in machine_errors(candidate)
               if not (e.startswith("levels: at least one") and "levels" not in data)]
    if errors:
        _refuse(where, errors)
    return Machine(str(data.get("name", default_name)), levels=tuple(built), **fields)
