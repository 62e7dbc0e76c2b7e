"""``smsg-ms check``: compile a planned network with MindSpore's parallel compiler (CPU dry-run)
and compare the collectives the plan predicts with those MindSpore inserts.

Collectives are compared as counts per key ``(kind, phase, group size)``: ``phase`` is
``forward``, ``backward`` or ``grad_sync`` (MindSpore's ``_MirrorOperator`` gradient
synchronisation). Collectives of the loss that the compile wraps around the network are listed
but not compared (the plan covers the network only). Inserted bytes are the per-device input slice of each collective
(elements × dtype size); predicted bytes are what the plan's decisions say.
"""
from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field
from math import prod

from ..graph.model import DTYPE_BYTES
from ..plan import Plan
from .plan_io import PlanError, check_plan_fits

Key = tuple[str, str, int]


def _phase(phase: str) -> str:
    phase = str(phase).lower()
    return "grad_sync" if phase.startswith("grad") or "mirror" in phase else phase


def _group_size(group) -> int:
    return len(group) if isinstance(group, (list, tuple)) else int(group or 0)


LOSS_SUFFIX = " (loss)"


def _loss_scope(c: dict) -> bool:
    """In the check's loss wrapper (``network-_WithLoss/``) but not in the network under it
    (``network-_WithLoss/network-<Net>/``): the loss cell or the default mean."""
    parts = c.get("scope", "").split("network-_WithLoss/", 1)
    return len(parts) == 2 and not parts[1].startswith("network-")


def loss_collectives(inserted: list[dict]) -> set[int]:
    """Indices of the collectives that belong to the loss the check wraps around the network
    (the plan covers the network only).

    Forward: scope ``.../network-_WithLoss/<not the network>/...``. Backward: MindSpore files the gradient
    collectives of the network's last operators under the loss's scope as well, so a backward
    collective there counts as the loss's only when it is the transpose of a forward loss
    collective (its input shape is that collective's output or input shape).
    """
    forward_shapes = set()
    out = set()
    for i, c in enumerate(inserted):
        if c["pass"] == "forward" and _loss_scope(c):
            out.add(i)
            forward_shapes.add(tuple(c["in_shape"]))
            forward_shapes.add(tuple(c["out_shape"]))
    for i, c in enumerate(inserted):
        if c["pass"] == "backward" and _loss_scope(c) and tuple(c["in_shape"]) in forward_shapes:
            out.add(i)
    return out


def inserted_key(c: dict, loss: bool = False) -> Key:
    """Key of a collective from :mod:`smsg_ms.dryrun.collectives`; the phase of the loss's
    collectives ends in ``" (loss)"``."""
    phase = "grad_sync" if c["grad_sync"] else c["pass"]
    return c["type"], phase + (LOSS_SUFFIX if loss else ""), int(c["group_size"])


def inserted_bytes(c: dict) -> int:
    """``S``, the bytes of the convention of the predictions (:class:`smsg_ms.cost.api.Collective`,
    :func:`smsg_ms.cost.api.ring_volume`): an AllGather's input is one device's slice, so ``S`` is
    the input times the group size; for AllReduce and ReduceScatter ``S`` is the input; for an
    AlltoAll, the per-device buffer it exchanges (its input: each device sends ``(g−1)/g`` of
    it)."""
    local = prod(max(int(d), 0) for d in c["in_shape"]) * DTYPE_BYTES.get(c["dtype"], 4)
    if c["type"] == "AllGather":
        return local * max(int(c.get("group_size") or 1), 1)
    return local


def predicted_collectives(plan: Plan) -> list[dict]:
    """All decisions' predicted collectives, each with ``op`` (the decision name) added; those
    of one ``merged_as`` key once (:func:`merged_once`)."""
    return merged_once([dict(c, op=d.name) for d in plan.decisions for c in d.collectives])


def merged_once(collectives: list[dict]) -> list[dict]:
    """``collectives`` less the repeats of a ``merged_as`` key: collectives MindSpore's CSE
    merges into one wherever one graph holds them (the AllGathers of a folded
    ``ops.zeros_like``, :mod:`smsg_ms.planner.zeros_like`), kept at their first entry."""
    seen: set = set()
    out = []
    for c in collectives:
        key = c.get("merged_as")
        if key is not None:
            key = (key, c["kind"], c.get("phase"), c.get("group"))
            if key in seen:
                continue
            seen.add(key)
        out.append(c)
    return out


def predicted_key(c: dict) -> Key:
    """Key of a predicted collective; redistributions into the loss (``"loss": True``, see
    :func:`smsg_ms.planner.loss.loss_layout`) are keyed with the loss's collectives."""
    kind = "AlltoAll" if c["kind"] in ("AllToAll", "AlltoAll") else c["kind"]
    phase = _phase(c.get("phase", "forward")) + (LOSS_SUFFIX if c.get("loss") else "")
    # a collective the network calls itself over a group it names (mindformers' AlltoAllV over
    # its expert-parallel group): the compiled graph's reader knows no size for it (0)
    return kind, phase, 0 if c.get("own_group") else _group_size(c.get("group"))


@dataclass
class CollectiveRow:
    """One line of the side-by-side table."""

    key: Key
    predicted: int
    predicted_bytes: float
    inserted: int
    inserted_bytes: int
    #: inserted collectives of a shape with a dynamic axis (``-1``): their bytes are unknown
    dynamic: int = 0

    @property
    def planned(self) -> bool:
        return not self.key[1].endswith(LOSS_SUFFIX)

    @property
    def bytes_agree(self) -> bool:
        """Total bytes within 1% (or both zero); not compared (``True``) where an inserted
        collective has a dynamic shape (a network's ``set_inputs``): MindSpore records ``-1``
        for the axis, so its bytes are unknown; the counts still are."""
        if self.dynamic:
            return True
        top = max(self.predicted_bytes, self.inserted_bytes)
        return top == 0 or abs(self.predicted_bytes - self.inserted_bytes) <= 0.01 * top

    @property
    def ok(self) -> bool:
        return not self.planned or (self.predicted == self.inserted and self.bytes_agree)


def compare_collectives(predicted: list[dict], inserted: list[dict],
                        loss: set[int] | None = None) -> list[CollectiveRow]:
    """Rows for every key seen on either side, sorted by key; ``loss``: indices of ``inserted``
    that are the loss's (default :func:`loss_collectives`)."""
    pc, pb, ic, ib, dyn = Counter(), Counter(), Counter(), Counter(), Counter()
    for c in predicted:
        k = predicted_key(c)
        pc[k] += 1
        pb[k] += float(c.get("bytes", 0) or 0)
    loss = loss_collectives(inserted) if loss is None else loss
    for i, c in enumerate(inserted):
        k = inserted_key(c, i in loss)
        ic[k] += 1
        ib[k] += inserted_bytes(c)
        dyn[k] += any(int(d) < 0 for d in c["in_shape"])
    keys = sorted(set(pc) | set(ic))
    return [CollectiveRow(k, pc[k], pb[k], ic[k], ib[k], dyn[k]) for k in keys]


@dataclass
class PointToPointRow:
    """Send/Receive of one rank of a pipelined plan, per ``(kind, pass, slice shape, dtype)``."""

    key: tuple
    predicted: int
    inserted: int

    @property
    def ok(self) -> bool:
        return self.predicted == self.inserted


@dataclass
class RankCheck:
    """Result of one rank's compile: ``error`` (MindSpore's rejection) or collective rows;
    ``p2p`` the Send/Receive rows of a pipelined plan and ``stage`` its stage."""

    rank: int
    error: str | None = None
    rows: list[CollectiveRow] = field(default_factory=list)
    p2p: list[PointToPointRow] = field(default_factory=list)
    stage: int | None = None


@dataclass
class CheckReport:
    """``unplanned``: the network's weights no captured operator reads (used only inside
    tensor-valued control flow, :meth:`smsg_ms.graph.model.OpGraph.unread_parameters`): the plan
    sets no layout and predicts no gradient sync for them, so the check fails."""

    plan: Plan
    ranks: list[RankCheck]
    has_predictions: bool
    unplanned: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        if any(r.error for r in self.ranks) or self.unplanned:
            return False
        if not all(row.ok for r in self.ranks for row in r.p2p):
            return False
        return not self.has_predictions or all(row.ok for r in self.ranks for row in r.rows)


def pipelined(plan: Plan) -> bool:
    """The plan's record changes MindSpore's training step: more than one stage, gradient
    accumulation (``micro_batches > 1``) or optimizer sharding of some parameter; it is then
    compiled with the record written back (``pipeline_compile``) and compared per stage."""
    rec = plan.pipeline or {}
    return bool(rec) and (int(rec.get("stages", 1)) > 1 or int(rec.get("micro_batches", 1)) > 1
                          or bool(rec.get("optimizer_sharded")))


def stage_of_rank(plan: Plan, rank: int) -> int:
    """Stage of ``rank``: ``rank // (devices / stages)`` (``shared/docs/mindspore-dryrun.md``)."""
    return rank // (plan.devices // int(plan.pipeline["stages"]))


#: Readers whose backward pass does not read the weight (an embedding lookup's gradient is the
#: output gradient scattered by the indices): no level-3 backward AllGather (dry-run: the
#: embedding table of the built-in LLaMA is gathered once per micro-batch, the MatMul weights twice).
LOOKUP_READERS = frozenset({"Gather", "GatherV2", "EmbeddingLookup"})


def optimizer_collectives(level: str, micro_batches: int,
                          backward_reads_weight: bool = True) -> list[tuple[str, str, int]]:
    """``(kind, phase, count)`` per step MindSpore 2.10 inserts for one optimizer-sharded
    parameter (dry-run, ``tests/test_optimizer_levels.py``; all in the forward/backward passes of
    the compiled graph): level 1 one AllGather (forward) and one ReduceScatter (backward); level 2
    the ReduceScatter once per micro-batch (the gradient accumulator is sharded); level 3 also
    the AllGather twice per micro-batch (the weight is gathered again for the backward pass, which
    MindSpore files under the forward pass), once when the backward pass does not read the
    weight (``backward_reads_weight``: :data:`LOOKUP_READERS`)."""
    m = int(micro_batches)
    if level == "level2":
        return [("AllGather", "forward", 1), ("ReduceScatter", "backward", m)]
    if level == "level3":
        # one micro-batch (TrainOneStepCell): one AllGather serves both passes (dry-run)
        gathers = 2 * m if backward_reads_weight and m > 1 else m
        return [("AllGather", "forward", gathers), ("ReduceScatter", "backward", m)]
    return [("AllGather", "forward", 1), ("ReduceScatter", "backward", 1)]


def predicted_stage_collectives(plan: Plan, stage: int) -> list[dict]:
    """Collectives of the decisions on ``stage``: forward/backward ones once per micro-batch
    (PipelineCell unrolls the micro-batch loop), gradient synchronisation once per step.

    With optimizer sharding (``optimizer_sharded`` in the record: ``{parameter: shard count}``)
    a sharded parameter's gradient AllReduce becomes what MindSpore inserts instead, once per step
    over the same group (the parameter's replicas): a forward AllGather of the weight
    (``_MicroStepAllGather``, slice / r → slice) and a backward ReduceScatter of its accumulated
    gradient (slice → slice / r); both carry the slice's bytes (``S`` convention of
    :func:`inserted_bytes`). Parameters below MindSpore's 64 KB threshold or whose slice's first
    axis does not divide r keep the AllReduce (:meth:`ParamSlice.optimizer_shardable`).
    Decisions the record lists in ``recomputed_on`` for ``stage`` (weight-independent tensors
    such as a causal mask, computed again where they are read:
    :func:`smsg_ms.planner.stages.recomputed_on_later_stages`) add their forward collectives.
    A forward collective of a tensor the record lists in ``once_per_step`` (computed from
    parameters and constants alone, :mod:`smsg_ms.planner.param_only`) is counted once per
    step, on every stage that computes it; one of a tensor in ``recomputed_reads`` counted on
    an earlier stage's reader is counted again on the later stages that read it
    (:func:`_regathered`). One of a ``merged_as`` key (a folded ``ops.zeros_like``'s AllGather)
    is counted once on the stage (:func:`merged_once`). A backward collective of a tensor the
    record lists in ``gradient_dropped`` for ``stage`` (computed from a parameter the stage
    reads on the network's root but does not own, :mod:`smsg_ms.planner.root_reads`) is not
    counted.
    Observed in the dry-run (MindSpore 2.10, ``tests/test_pipeline_check.py``).
    """
    from ..planner.pipelined import stage_of_decision

    where = stage_of_decision(plan)
    m = int(plan.pipeline["micro_batches"])
    sharded = plan.pipeline.get("optimizer_sharded") or {}
    level = plan.pipeline.get("optimizer_level") or "level1"
    again = plan.pipeline.get("recomputed_on") or {}
    once = set(plan.pipeline.get("once_per_step") or ())
    out = _regathered(plan, stage, where, m, once)
    dead = plan.pipeline.get("gradient_dropped") or {}
    for d in plan.decisions:
        if stage in again.get(d.name, ()):     # weight-independent forward run again here
            out.extend(dict(c, op=d.name) for c in d.collectives if c.get("phase") == "forward"
                       for _ in range(1 if c.get("tensor") in once else m))
        if where[d.name] != stage:
            continue
        for c in d.collectives:
            if c.get("phase") == "backward" and stage in dead.get(c.get("tensor"), ()):
                continue                        # the stage keeps no gradient of it
            if c.get("phase") == "forward" and (c.get("tensor") in once or "merged_as" in c):
                out.append(dict(c, op=d.name))  # parameter-only: merged over micro-batches
            elif c.get("phase") != "grad_sync":
                out.extend([dict(c, op=d.name)] * m)
            elif c.get("tensor") in sharded:
                for kind, phase, n in optimizer_collectives(level, m,
                                                            d.op_type not in LOOKUP_READERS):
                    out.extend([dict(c, op=d.name, kind=kind, phase=phase,
                                     optimizer_sharding=True)] * n)
            else:
                out.append(dict(c, op=d.name))
    return merged_once(out)


def _regathered(plan: Plan, stage: int, where: dict, m: int, once: set) -> list[dict]:
    """Forward redistributions of tensors ``stage`` computes again and reads (the record's
    ``recomputed_reads``) that the plan counts on a reader on another stage only (one
    redistribution for every reader of the same layout): MindSpore redistributes the stage's
    own copy, once per micro-batch (once per step for a tensor of ``once``). A tensor one of
    the stage's own or recomputed decisions redistributes already is left to those."""
    reads = plan.pipeline.get("recomputed_reads") or {}
    again = plan.pipeline.get("recomputed_on") or {}
    tensors = {t for t, stages in reads.items() if stage in stages}
    if not tensors:
        return []
    local = {c.get("tensor") for d in plan.decisions
             if where[d.name] == stage or stage in again.get(d.name, ())
             for c in d.collectives if c.get("phase") == "forward"}
    out, seen = [], set()
    for d in plan.decisions:
        for c in d.collectives:
            t = c.get("tensor")
            key = (t, c.get("kind"), c.get("group"), c.get("bytes"))
            if (c.get("phase") != "forward" or t not in tensors or t in local
                    or key in seen):
                continue
            seen.add(key)
            out.extend([dict(c, op=d.name)] * (1 if t in once else m))
    return out


def stage_loss_collectives(inserted: list[dict]) -> set[int]:
    """:func:`loss_collectives` of one pipeline stage's compile, plus the backward transposes of
    the loss's forward collectives that MindSpore files under a network cell's scope there (the
    scalar AllReduce of the mean's gradient lands in the last block's ``Grad_AllReduce``): per
    forward loss collective (AllReduce ↔ AllReduce, AllGather ↔ ReduceScatter, shapes swapped)
    one unclaimed backward collective of that kind and shapes is the loss's."""
    out = loss_collectives(inserted)
    transpose = {"AllReduce": "AllReduce", "AllGather": "ReduceScatter",
                 "ReduceScatter": "AllGather"}
    want = Counter()
    for i in sorted(out):
        c = inserted[i]
        if c["pass"] == "forward" and c["type"] in transpose:
            want[(transpose[c["type"]], tuple(c["out_shape"]), tuple(c["in_shape"]))] += 1
    for i in sorted(out):
        c = inserted[i]
        key = (c["type"], tuple(c["in_shape"]), tuple(c["out_shape"]))
        if c["pass"] == "backward" and want[key] > 0:
            want[key] -= 1
    for i, c in enumerate(inserted):
        key = (c["type"], tuple(c["in_shape"]), tuple(c["out_shape"]))
        if i not in out and c["pass"] == "backward" and not c["grad_sync"] and want[key] > 0:
            want[key] -= 1
            out.add(i)
    return out


def compare_point_to_point(plan: Plan, stage: int, inserted: list[dict]) -> list[PointToPointRow]:
    """Send/Receive rows: predicted by :func:`smsg_ms.integration.pipeline.predicted_point_to_point`
    from the record's boundary slice, side tensors (``boundary_extra``) and parameters read on
    several stages (``shared_parameters``), inserted as MindSpore put them (``out_shape``)."""
    from .pipeline import predicted_point_to_point

    rec = plan.pipeline
    want = predicted_point_to_point(rec, rec.get("boundary_shape", []),
                                    rec.get("boundary_dtype", "float32"),
                                    extra=rec.get("boundary_extra", []),
                                    shared=rec.get("shared_parameters", []))
    pc = Counter()
    for w in want[stage]:
        pc[(w["type"], w["pass"], tuple(w["shape"]), w["dtype"])] += w["count"]
    ic = Counter((c["type"], c["pass"], tuple(int(x) for x in c["out_shape"]), c["dtype"])
                 for c in inserted if c["type"] in ("Send", "Receive"))
    return [PointToPointRow(k, pc[k], ic[k]) for k in sorted(set(pc) | set(ic))]


def plan_compile_job(plan: Plan, spec: str | None = None) -> dict:
    """The dry-run job for ``plan`` (see :mod:`smsg_ms.dryrun.jobs.compile`): ``plan_compile``, or
    ``pipeline_compile`` for a plan whose record changes the training step (:func:`pipelined`)."""
    if pipelined(plan):
        return {"job": "pipeline_compile", "spec": spec or plan.network,
                "options": plan.build_options(), "pipeline": plan.pipeline,
                "strategies": plan.strategies, "enable_alltoall": plan.enable_alltoall,
                "out_strategies": plan.out_strategies}
    return {"job": "plan_compile", "spec": spec or plan.network, "options": plan.build_options(),
            "strategies": plan.strategies, "dataset_strategy": plan.dataset_strategy,
            "pipeline": plan.pipeline, "write_back": plan.write_back,
            "enable_alltoall": plan.enable_alltoall, "out_strategies": plan.out_strategies}


def verify_network(plan: Plan, spec: str | None = None) -> list[str]:
    """Capture ``spec`` (default the plan's network) with the plan's options and compare input
    shapes, then fingerprints.

    Returns:
        The network's weights the plan leaves unplanned (no captured operator reads them), sorted.

    Raises:
        PlanError: another network, other options, or the network does not build.
    """
    from ..graph.capture import CaptureError, capture_network

    spec = spec or plan.network
    try:
        graph = capture_network(spec, world=plan.built_for, **plan.build_options())
    except CaptureError as exc:
        first = str(exc).splitlines()[0]
        if spec != plan.network and "takes no option" in first:   # another network's options
            raise PlanError(f"plan for '{plan.network}' does not fit the network '{spec}' "
                            f"({first}): check it against '{plan.network}', or plan "
                            f"'{spec}'") from exc
        raise PlanError(f"cannot capture network '{spec}': {first}") from exc
    shapes = [list(graph.tensors[n].shape) for n in graph.inputs]
    if spec != plan.network and graph.fingerprint() != plan.fingerprint:
        raise PlanError(f"plan for '{plan.network}' does not fit the network '{spec}' (input "
                        f"shapes {plan.input_shapes} vs {shapes}; graph fingerprint "
                        f"{plan.fingerprint[:12]} vs {graph.fingerprint()[:12]}): check it "
                        f"against '{plan.network}', or plan '{spec}'")
    # the plan's own network: a changed input shape is named as such, not as another fingerprint
    check_plan_fits(plan, input_shapes=shapes, fingerprint=graph.fingerprint(), network=spec)
    return graph.unread_parameters()


def unknown_operators_hint(plan: Plan, error: str = "") -> str:
    """What to suspect when MindSpore rejects ``plan``: the operators the cost model priced by
    its generic fallback (no operator family; decision note ``fallback: no cost family``), with
    the cell each runs in (its scope without the operator), as one line's tail, or ``""``.
    MindSpore's message names neither (e.g. ``nn.LSTM``'s training graph: "split_size's length
    must be equal with dimIndex", refused in semi-auto parallel even without any strategy).

    ``error``: MindSpore's message; a ``TypeError`` there (its front end's type inference,
    e.g. "Failed calling ReduceMean with x=Tuple[...]": the graph is wrong before any
    sharding) is explained by no sharding rule: no hint then. (A ``ValueError`` may be the
    parallel compile's: ``nn.LSTM``'s "split_size's length must be equal with dimIndex".)"""
    if re.search(r"\bTypeError:|Failed calling ", error):
        return ""
    from ..graph.capture import KNOWN_SOURCES
    if any(why in error for why in KNOWN_SOURCES.values()):
        return ""          # the message says already what MindSpore refused and why
    seen: dict[str, None] = {}
    for d in plan.decisions:
        if any(note.startswith("fallback: no cost family") for note in d.notes):
            cell = d.name.split("@", 1)[-1].rpartition("/")[0] or d.name
            seen.setdefault(f"{d.op_type} in {cell}", None)
    if not seen:
        return ""
    return ("; operators unknown to smsg-ms (no sharding rule): " + ", ".join(seen)
            + ": MindSpore's parallel compile may not support them; replace that cell by "
            "operators it splits (e.g. nn.LSTM's recurrence as a loop of Dense, Sigmoid and "
            "Tanh)")


def check_plan(plan: Plan, ranks: list[int], spec: str | None = None) -> CheckReport:
    """Compile ``plan`` on each rank in the dry-run and compare collectives; a plan that leaves
    weights of the network unplanned (:attr:`CheckReport.unplanned`) fails without a compile
    (MindSpore 2.10's dry-run compile of a ``while`` on a tensor dies with SIGSEGV).

    Raises:
        PlanError: the plan does not fit the network (fingerprint).
        smsg_ms.dryrun.toolchain.DryRunSetupError: the dry-run cannot be set up.
    """
    from ..dryrun.runner import DryRunError, run_child

    unplanned = verify_network(plan, spec)
    predicted = predicted_collectives(plan)
    if unplanned:   # failed whatever MindSpore inserts (and its compile of such loops crashes)
        return CheckReport(plan, [], bool(predicted), unplanned)
    results = []
    for rank in ranks:
        try:
            out = run_child(plan_compile_job(plan, spec), devices=plan.devices, rank=rank)
        except DryRunError as exc:
            if exc.kind in ("timeout", "crash"):
                raise
            first = str(exc).splitlines()[0]
            results.append(RankCheck(rank, error=first + unknown_operators_hint(plan, first)))
            continue
        if pipelined(plan):
            stage = stage_of_rank(plan, rank)
            ops = [c for c in out["collectives"] if c["type"] not in ("Send", "Receive")]
            results.append(RankCheck(
                rank, rows=compare_collectives(predicted_stage_collectives(plan, stage), ops,
                                               stage_loss_collectives(ops)),
                p2p=compare_point_to_point(plan, stage, out["collectives"]), stage=stage))
            continue
        results.append(RankCheck(rank, rows=compare_collectives(predicted, out["collectives"])))
    return CheckReport(plan, results, bool(predicted), unplanned)


def print_report(report: CheckReport, console) -> None:
    """Side-by-side table per rank, and MindSpore's rejections."""
    from rich.table import Table

    for r in report.ranks:
        if r.error:
            # not markup: MindSpore's messages hold brackets ("The pointer[fg_cnode] is null")
            console.print(f"rank {r.rank}: MindSpore rejected the plan: {r.error}", markup=False)
            continue
        table = Table(title=f"rank {r.rank}: predicted vs inserted collectives")
        # 80 columns hold the widest rows ("ReduceScatter", "grad_sync (loss)", 5-digit MiB,
        # "MISMATCH (bytes)"): kinds and numbers never wrap (MiB keep 4 significant digits,
        # their headers take two lines); the phase and the verdict wrap between words, each at
        # least as wide as its longest word ("grad_sync", "MISMATCH"), never inside one
        for col in ("collective", "phase", "group", "pred.", "pred.\nMiB", "ins.", "ins.\nMiB"):
            table.add_column(col, justify="left" if col in ("collective", "phase") else "right",
                             no_wrap=col != "phase",
                             min_width=len("grad_sync") if col == "phase" else None)
        table.add_column("verdict", min_width=len("MISMATCH"))
        for row in r.rows:
            kind, phase, size = row.key
            mark = ("loss (not compared)" if not row.planned else
                    "ok (dynamic shape: count only)" if row.ok and row.dynamic else
                    "ok" if row.ok else
                    "-" if not report.has_predictions else
                    "MISMATCH (bytes)" if row.predicted == row.inserted else "MISMATCH")
            table.add_row(kind, phase, str(size), str(row.predicted),
                          mib(row.predicted_bytes), str(row.inserted),
                          "?" if row.dynamic else mib(row.inserted_bytes),
                          mark)
        console.print(table)
        if r.p2p:
            p2p = Table(title=f"rank {r.rank} (stage {r.stage}): predicted vs inserted "
                              "Send/Receive")
            for col in ("kind", "pass", "slice", "dtype", "predicted", "inserted", ""):
                p2p.add_column(col)
            for row in r.p2p:
                kind, phase, shape, dtype = row.key
                p2p.add_row(kind, phase, str(list(shape)), dtype, str(row.predicted),
                            str(row.inserted), "ok" if row.ok else "MISMATCH")
            console.print(p2p)
    if not report.has_predictions:
        console.print("the plan holds no predicted collectives: only MindSpore's are listed")
    if report.unplanned:
        console.print(f"the plan sets no layout for {len(report.unplanned)} weight(s) of the "
                      f"network: {', '.join(report.unplanned)} (no captured operator reads "
                      "them: they are used only inside control flow on a tensor value, see "
                      "`smsg-ms graph`)")
    console.print(summary_line(report))


def mib(nbytes: float) -> str:
    """``nbytes`` in MiB with 4 significant digits and no exponent, at most 5 characters below
    100 000 MiB: ``0.125``, ``12.50``, ``999.9``, ``1235``, ``54321`` (the check's 1 % byte
    tolerance, :attr:`CollectiveRow.bytes_agree`, needs no more digits to show)."""
    value = nbytes / 2**20
    for digits, below in ((3, 10), (2, 100), (1, 1000)):
        if round(value, digits) < below:
            return f"{value:.{digits}f}"
    return f"{value:.0f}"


def summary_line(report: CheckReport) -> str:
    """``check: passed (0 rejected, 0 mismatches)``: ranks MindSpore rejected, and compared
    table rows (collectives and Send/Receive) whose counts or bytes disagree."""
    rejected = sum(1 for r in report.ranks if r.error)
    rows = [row for r in report.ranks for row in r.p2p]
    if report.has_predictions:
        rows += [row for r in report.ranks for row in r.rows]
    bad = sum(1 for row in rows if not row.ok)
    unplanned = (f", {len(report.unplanned)} unplanned weight"
                 f"{'' if len(report.unplanned) == 1 else 's'}" if report.unplanned else "")
    return (f"check: {'passed' if report.ok else 'FAILED'} ({rejected} rejected, "
            f"{bad} {'mismatch' if bad == 1 else 'mismatches'}{unplanned})")
