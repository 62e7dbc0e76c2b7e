"""MindSpore network → :class:`OpGraph`.

Two ways in:

* :func:`capture` compiles a live ``nn.Cell`` in this process (stand-alone, graph mode, backend
  skipped with ``MS_DEV_PRECOMPILE_ONLY``). Parameters of a network built normally are already
  allocated; use it for networks that fit in host memory.
* :func:`capture_network` takes a network *spec* (a built-in name or ``package.module:function``),
  and builds and compiles it in a child process under the CPU dry-run, inside
  ``mindspore.nn.utils.no_init_parameters`` and semi-auto parallel with one device, so no weight
  is allocated (a LLaMA-2-70B shape captures in seconds; ``shared/docs/mindspore-notes.md``).

Both tag every Cell-owned primitive with its attribute path (prim attr ``smsg_path``) before the
compile, then read the MindIR (:mod:`smsg_ms.graph.mindir`). Both compile in training mode
(``set_train(True)``), so the graph holds the primitives a training step calls: nn.BatchNorm's
``bn_train`` (not ``bn_infer``, whose strategy would never reach the training graph) and
nn.Dropout (skipped in eval mode).
"""
from __future__ import annotations

import contextlib
import functools
import inspect
import os
import re
import tempfile
from dataclasses import dataclass
from typing import Any

from .blocks import spread_depend_inputs
from .broadcast_matmul import refused_broadcast, restore_types, stand_in
from .model import OpGraph

PATH_ATTR = "smsg_path"
#: set on primitives inside a Cell with its own ``bprop`` (their backward is that function's)
CUSTOM_BPROP_ATTR = "smsg_custom_bprop"


class CaptureError(RuntimeError):
    """The network could not be captured; the message says why, in one paragraph."""


#: the phase of smsg-ms's own capture compiles (a training-script dry-run skips them)
CAPTURE_PHASE = "smsg_capture"

def tag_primitives(net) -> dict[str, Any]:
    """Tag each primitive held as a Cell attribute with ``smsg_path`` = ``cell_path.attr``, and
    with ``smsg_custom_bprop`` when a Cell on its path defines ``bprop`` (mindformers'
    ``_LogSoftmax``, ``_NLLLoss``): MindSpore differentiates such a cell by that function, so
    the primitives' own bprops (and their collectives) never run.

    Returns:
        ``{path: Primitive}`` for every tagged primitive, in ``cells_and_names`` order.
    """
    found: dict[str, Any] = {}
    seen: set[int] = set()
    custom = [name for name, cell in net.cells_and_names() if hasattr(cell, "bprop")]
    for cell_name, cell in net.cells_and_names():
        for attr, prim in getattr(cell, "_primitives", {}).items():
            if prim is None or id(prim) in seen:
                continue
            seen.add(id(prim))
            path = f"{cell_name}.{attr}" if cell_name else attr
            prim.add_prim_attr(PATH_ATTR, path)
            if any(c == "" or (cell_name + ".").startswith(c + ".") for c in custom):
                prim.add_prim_attr(CUSTOM_BPROP_ATTR, True)
            found[path] = prim
    return found


def path_hints(tags: dict[str, Any]) -> dict[str, dict[str, list[str]]]:
    """``{cell path: {primitive type: [paths in attribute order]}}`` from :func:`tag_primitives`."""
    hints: dict[str, dict[str, list[str]]] = {}
    for path, prim in tags.items():
        cell = path.rpartition(".")[0]
        hints.setdefault(cell, {}).setdefault(prim.name, []).append(path)
    return hints


@functools.lru_cache(maxsize=None)
def primitive_arg_names(op_type: str) -> tuple[str, ...] | None:
    """Names of a primitive's graph inputs: ``__call__`` arguments, then ``__init__`` arguments.

    Generated primitives (``gen_ops_prim``) pass their init arguments as trailing inputs in the
    graph; this names them (``MatMul`` → ``input, mat2, transpose_a, transpose_b``).
    """
    from mindspore.ops import operations as P  # noqa: N812

    cls = getattr(P, op_type, None)
    if cls is None or "auto_generate" not in getattr(cls, "__module__", ""):
        return None
    try:
        call = [p for p in inspect.signature(cls.__call__).parameters if p != "self"]
        init = [p for p in inspect.signature(cls.__init__).parameters if p != "self"]
    except (TypeError, ValueError):
        return None
    return tuple(call + init)


def read_mindir(net, phase: str, name: str, tag_net=None, wrappers: int | None = None) -> OpGraph:
    """Parse the compiled graph of ``net`` for ``phase`` into an :class:`OpGraph`.

    Args:
        net: the compiled cell (the user's network, or a training wrapper around it).
        tag_net: the user's network when ``net`` wraps it; primitive paths are relative to it.
        wrappers: cells between ``net`` and ``tag_net`` in node scopes (default: 0 when
            ``tag_net`` is ``net``, else 2, as in ``TrainOneStepCell(WithLoss(tag_net))``).
    """
    from mindspore.train import mind_ir_pb2

    from .mindir import parse_model
    try:
        from mindspore.graph.api import _cell_graph_executor
    except ImportError:  # MindSpore < 2.9
        from mindspore.common.api import _cell_graph_executor
    model = mind_ir_pb2.ModelProto()
    model.ParseFromString(_cell_graph_executor._get_func_graph_proto(net, phase, "mind_ir"))
    trainable = {p.name: bool(p.requires_grad) for p in net.get_parameters()}
    tag_net = net if tag_net is None else tag_net
    if wrappers is None:
        wrappers = 0 if tag_net is net else 2
    graph = parse_model(model, name=name, arg_names=primitive_arg_names, trainable=trainable,
                        path_hints=path_hints(tag_primitives(tag_net)), wrappers=wrappers)
    restore_types(graph.ops)
    spread_depend_inputs(graph)
    record_parallel_optimizer(graph, net)
    locate_control_flow(graph, tag_net)
    return graph


def control_flow_source(cell) -> str | None:
    """``file:line`` of the first ``while``/``if``/``for`` statement in ``cell``'s ``construct``
    (the start of ``construct`` when there is none), ``None`` without Python source."""
    import ast
    import textwrap

    construct = type(cell).construct
    try:
        lines, start = inspect.getsourcelines(construct)
        file = inspect.getsourcefile(construct)
        tree = ast.parse(textwrap.dedent("".join(lines)))
    except (OSError, TypeError, SyntaxError):
        return None
    loops = [n.lineno for n in ast.walk(tree) if isinstance(n, (ast.While, ast.If, ast.For))]
    return f"{file}:{start - 1 + min(loops, default=1)}"


def locate_control_flow(graph: OpGraph, net) -> None:
    """Add the source line (:func:`control_flow_source`) to each control-flow warning of
    ``graph``, whose cell path is relative to ``net`` (``'<top>'``: ``net`` itself)."""
    import re

    cells = dict(net.cells_and_names())
    cells["<top>"] = net
    pattern = re.compile(r"^(control flow: \S+ in cell '([^']*)' \([^)]*\))")
    for i, text in enumerate(graph.warnings):
        match = pattern.match(text)
        cell = cells.get(match.group(2)) if match else None
        where = control_flow_source(cell) if cell is not None else None
        if where:
            graph.warnings[i] = f"{match.group(1)} at {where}{text[match.end():]}"


def record_parallel_optimizer(graph: OpGraph, net) -> None:
    """Copy each parameter's ``Parameter.parallel_optimizer`` flag (``False``: MindSpore's
    optimizer sharding leaves it whole, e.g. mindformers' embedding table) onto the graph's
    parameter tensors (:attr:`TensorInfo.parallel_optimizer`)."""
    flags = {p.name: bool(getattr(p, "parallel_optimizer", True)) for p in net.get_parameters()}
    for t in graph.tensors.values():
        if t.kind == "parameter":
            t.parallel_optimizer = flags.get(t.name, True)


def set_training_mode(net, own_loss: bool = False) -> None:
    """Put ``net`` and every sub-cell in training mode, as the training step does.

    Args:
        own_loss: the network computes its own loss in training mode from other inputs
            (mindformers LLMs: ``seq + 1`` tokens); its top cell alone stays in eval mode so it
            returns its output for the forward inputs, while its layers take their training
            branches (mindformers' ``rmsnorm_compute_2d``, BatchNorm's ``bn_train``, Dropout).
    """
    net.set_train(True)
    if own_loss:
        net.add_flags(training=False)


def compile_cell(net, inputs, phase: str):
    """Compile ``net(*inputs)`` for ``phase``; MindSpore errors become :class:`CaptureError`.

    A ``BatchMatMul`` with broadcast batch axes, which MindSpore refuses on CPU/GPU, is compiled
    again through its stand-in (:mod:`smsg_ms.graph.broadcast_matmul`; ``net`` keeps it)."""
    try:
        from mindspore.graph.api import _cell_graph_executor
    except ImportError:
        from mindspore.common.api import _cell_graph_executor
    try:
        phase, _ = _cell_graph_executor.compile(net, *inputs, phase=phase)
    except Exception as exc:  # MindSpore raises many kinds (NameError for unsupported syntax...)
        if not (refused_broadcast(exc) and stand_in(net)):
            raise CaptureError(_first_paragraph(exc, type(net).__name__)) from exc
        try:  # a broadcast BatchMatMul, compiled again through its stand-in
            phase, _ = _cell_graph_executor.compile(net, *inputs, phase=phase)
        except Exception as again:  # noqa: BLE001 (as above)
            raise CaptureError(_first_paragraph(again, type(net).__name__)) from again
    return phase


#: where in MindSpore's C++ source an error was raised (its stack's file names) → what it means
KNOWN_SOURCES = {
    "irpass/morph.cc": "raised by MindSpore's Morph pass (frontend/optimizer/irpass/morph.cc), "
                       "which expands the network's Morph primitives; MindSpore 2.10 cannot "
                       "expand them in micro-batch copies that are not shared (a "
                       "gradient-accumulation cell without lazy_inline: "
                       "AddMonadParameterForFuncGraph finds a monad input without an "
                       "abstract; smsg-ms's own training cells share the micro-batch graph "
                       "when the network has a Morph), whatever the strategies",
    "GetCellBySend": "raised by MindSpore's 1F1B pipeline scheduler "
                     "(pipeline_transformer/pipeline_scheduler.cc, GetCellBySend), which finds a "
                     "Send between stages outside every call of the shared micro-batch cell: "
                     "typically the backward Send of a tensor that crosses the stage boundary "
                     "beside the activation but that the loss does not use, so that its "
                     "gradient is a constant (mindformers' MoE auxiliary loss extra_loss when "
                     "the network trains on the LM loss alone); train on a loss that uses every "
                     "tensor a stage passes on (mindformers' training sums the LM and auxiliary "
                     "losses, as smsg_ms.networks.families:mf_qwen3_moe does by default), or "
                     "stop passing the unused tensor from block to block",
    "Reshape op can't be a border":
        "raised by MindSpore's pipeline split (pipeline_transformer.cc), which refuses to send "
        "a Reshape's output between stages: the cell computing it (a block whose construct "
        "ends with a reshape, or a cell called on two stages such as a T5-like shared "
        "embedding) runs on the stage before the border; end that cell on another operator, "
        "read a shared weight in each block instead (ops.gather(table, ids, 0)), or plan "
        "without --pipeline",
    "For primitive[GatherD], the x shape must be greater than or equal to":
        "raised by MindSpore's shape check of a GatherD (ops.gather_elements) whose input the "
        "parallel compile cut by the batch while its index stayed whole; MindSpore 2.10 does "
        "so without any strategy too (semi_auto_parallel's data-parallel default, checked on "
        "a top-k router's gather_elements(probs, 1, topk_index) beside a "
        "tensor_scatter_elements of the same index): use the values TopK returns, "
        "or write the gather as (x * ops.one_hot(index, n)).sum(axis), which it splits",
    "pointer[next_distribute_operator] is null":
        "raised by MindSpore's parallel compiler (frontend/parallel/parallel_processer.cc, "
        "Redistribution) while redistributing a tensor into an operator that has no sharding "
        "rule (OperatorInfo) of its own, whatever the strategies: MindSpore 2.10 has none for "
        "ops.einsum (Einsum takes its operands as one tuple); write that call with operators "
        "it splits (MatMul or BatchMatMul with Transpose and Reshape)",
}

#: a frame of MindSpore's "The Traceback of Net Construct Code": ``# In file PATH:LINE[~L2], ...``
_FRAME = re.compile(r"^# In file (.+?):(\d+)(?:~\d+)?, [\d~]+$")
#: MindSpore's own Python files (an installed package)
_MINDSPORE_FILE = re.compile(r"[/\\](?:site|dist)-packages[/\\]mindspore[/\\]")


def construct_frame(text: str) -> str:
    """The innermost frame of the network's own code in MindSpore's "The Traceback of Net
    Construct Code" (a frame whose file is not in the ``mindspore`` package), as
    ``"FILE:LINE: CODE"``, or ``""`` where the message has none. MindSpore lists the frames
    outermost first, each a ``# In file PATH:LINE, COLUMNS`` line followed by the code."""
    lines = text.splitlines()
    found = ""
    for i, line in enumerate(lines):
        m = _FRAME.match(line.strip())
        if not m or _MINDSPORE_FILE.search(m.group(1)):
            continue
        code = lines[i + 1].strip() if i + 1 < len(lines) else ""
        found = f"{m.group(1)}:{m.group(2)}: {code}".rstrip(": ")
    return found


def _first_paragraph(exc: BaseException, net_name: str) -> str:
    text = str(exc).strip()
    head = text.split("\n\n")[0].split("----")[0].strip()
    known = [why for where, why in KNOWN_SOURCES.items() if where in text]
    frame = construct_frame(text)
    return (f"MindSpore could not compile {net_name}: {type(exc).__name__}: {head}"
            + (f" (at {frame})" if frame else "")
            + "".join(f" ({why})" for why in known))


@contextlib.contextmanager
def _environment(**values: str):
    """Set environment variables for the duration of the block, then restore them.

    ``MS_OM_PATH``: MindSpore writes ``rank_<id>/om/analyze_fail.ir`` under it when a compile
    fails (MindSpore's C++ ``GetEvalFailDatPath``; default: the working folder), read at each
    failure.
    """
    old = {k: os.environ.get(k) for k in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def capture(net, *inputs, name: str | None = None) -> OpGraph:
    """Capture the forward graph of a live ``nn.Cell`` called on ``inputs`` (this process).

    Args:
        net: the network (``mindspore.nn.Cell``).
        inputs: example inputs (``mindspore.Tensor``), global shapes.
        name: name recorded in the graph (default: the class name).

    Nothing is written to the working folder: MindSpore's ``analyze_fail.ir`` of a failed compile
    goes to a temporary folder that is removed.

    Raises:
        CaptureError: the construct does not compile (wrong input rank, unsupported syntax...).
    """
    import mindspore as ms

    if ms.get_context("mode") != ms.GRAPH_MODE:
        ms.set_context(mode=ms.GRAPH_MODE)
    from .morph_regions import (fold_morph_markers, mark_morph_fns, set_global_outputs,
                                unmark_morph_fns)

    prims = tag_primitives(net)
    mark_morph_fns(prims)
    name = name or type(net).__name__
    with tempfile.TemporaryDirectory(prefix="smsg-capture-") as tmp, \
            _environment(MS_DEV_PRECOMPILE_ONLY="1", MS_OM_PATH=tmp):
        set_training_mode(net)
        try:
            graph = read_mindir(net, compile_cell(net, inputs, phase=CAPTURE_PHASE), name)
            if set_global_outputs(graph, prims):   # Morph outputs at their infer_shape
                graph = read_mindir(net, compile_cell(net, inputs, phase=CAPTURE_PHASE + "_g"),
                                    name)
        finally:
            unmark_morph_fns(prims)
    graph = fold_morph_markers(graph)
    check_inputs_consistent(graph, inputs)
    return graph


def check_inputs_consistent(graph: OpGraph, inputs) -> None:
    """Raise :class:`CaptureError` when the compiled graph's inputs disagree with ``inputs``."""
    if len(graph.inputs) != len(inputs):
        return  # constants folded away; nothing to compare
    for name, tensor in zip(graph.inputs, inputs):
        shape = tuple(getattr(tensor, "shape", ()))
        got = graph.tensors[name].shape
        if len(shape) != len(got):
            raise CaptureError(f"input '{name}' was compiled with rank {len(got)} but the example "
                               f"has rank {len(shape)}")


def _check_spec(spec: str, options: dict) -> None:
    """Refuse an unknown spec or option here, before a child process is started."""
    from ..networks import NetworkSpecError, check_options

    try:
        check_options(spec, options)
    except NetworkSpecError as exc:
        raise CaptureError(str(exc)) from exc


def capture_network(spec: str, devices: int = 1, world: int | None = None,
                    **options) -> OpGraph:
    """Capture a network from a spec in a dry-run child process, without allocating weights.

    Args:
        spec: a built-in name (see :mod:`smsg_ms.networks`) or ``package.module:function``; the
            function takes keyword options (``batch``, ``seq``, ``layers`` ... as it accepts) and
            returns ``(net, inputs)`` or ``{"net": ..., "inputs": ...}``.
        devices: virtual device count of the compile (1 = global shapes).
        world: the device count the network is built for (the plan's, per stage): a network
            whose construction reads the world size (mindformers' ``parallel_core`` models:
            ``data_parallel``) reads it (:func:`smsg_ms.networks.world.built_for`); ``None``:
            the compile's ``devices``. A network that does not read it captures the same.
        options: keyword arguments for the network function (JSON values).

    Raises:
        CaptureError: the spec does not resolve, the function raises, or MindSpore rejects it.
        smsg_ms.dryrun.toolchain.DryRunSetupError: the dry-run cannot be set up.
    """
    from ..dryrun.runner import DryRunError, run_child

    _check_spec(spec, options)
    try:
        job = {"job": "capture", "spec": spec, "options": options}
        if world is not None:       # even the compile's: whether the network read it
            job["world"] = int(world)
        result = run_child(job, devices=devices)
    except DryRunError as exc:
        raise CaptureError(str(exc)) from exc
    graph = OpGraph.from_dict(result["graph"])
    return graph


def capture_training_graph(spec: str, devices: int = 1, **options):
    """Capture the training graph (forward, backward, optimizer) of a spec, without weights.

    Compiles ``TrainOneStepCell(WithLoss(net), Momentum)`` (see
    :meth:`smsg_ms.networks.BuiltNetwork.train_cell`) in the dry-run child on ``devices`` virtual
    devices; primitive paths stay relative to the user's network. For validation of the cost model,
    not for the search (which uses the forward graph of :func:`capture_network`).

    Returns:
        :class:`TrainingCapture` with the graph, the collectives MindSpore inserted
        (:mod:`smsg_ms.dryrun.collectives` records) and the child's build+compile seconds.

    Raises:
        CaptureError: as :func:`capture_network`.
    """
    from ..dryrun.runner import DryRunError, run_child

    _check_spec(spec, options)
    try:
        result = run_child({"job": "capture_train", "spec": spec, "options": options},
                           devices=devices)
    except DryRunError as exc:
        raise CaptureError(str(exc)) from exc
    return TrainingCapture(OpGraph.from_dict(result["graph"]), list(result["collectives"]),
                           float(result["seconds"]))


@dataclass
class TrainingCapture:
    """A captured training graph: ``graph`` (OpGraph), ``collectives`` (list of dicts), ``seconds``."""

    graph: OpGraph
    collectives: list
    seconds: float
