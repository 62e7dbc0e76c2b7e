"""A plan written back as a mindformers run configuration (``smsg-ms plan --mindformers-config``):
the user's YAML with ``parallel_config``, ``recompute_config`` and the ``parallel`` section set
from the plan, and ``parallel.strategy_ckpt_config.load_file`` naming the plan's strategy
checkpoint (:mod:`.strategy_files`) at the YAML's full depth.

What ``parallel_config`` can say (mindformers 1.9.0: ``data_parallel · model_parallel ·
pipeline_stage`` = the device count, ``model_parallel`` dividing the attention and key/value
heads) is a Megatron layout; a plan of smsg may cut other axes per operator. Those per-operator
strategies travel in the strategy checkpoint. MindSpore gives a checkpoint's strategy to an
operator that has no ``in_strategy`` yet (``shared/docs/mindspore-notes.md``), so the layers'
own ``shard()`` calls, made from ``parallel_config``, keep theirs.

The plan is made at the depth captured (``--layers``); a decoder layer is one repeated block,
so the strategy of layer ``i`` of the plan is that of every layer of the full model, and layer
``k`` is on the stage mindformers places it by the ``offset`` written (:mod:`.mf_offsets`:
the YAML's own when it still fits, else 0, or per-stage counts when the stages do not divide
the layers).
"""
from __future__ import annotations

import json
import math
import re

from ..plan import Plan
from .plan_io import PlanError, write_text_atomic

_LAYER = re.compile(r"\.layers\.(\d+)\.")


def parallel_sizes(plan: Plan, heads: int, kv_heads: int, cp: int = 1) -> tuple[int, int]:
    """``(data_parallel, model_parallel)`` for one stage's ``d`` devices, as mindformers 1.9.0
    accepts them: ``dp · mp · cp = d`` (``cp``: the context-parallel degree,
    :func:`context_parallel`), ``mp`` dividing ``heads`` and ``kv_heads``, and ``dp``
    dividing the samples of one micro-batch (``runner_config.batch_size`` is the micro-batch's
    samples per data-parallel replica, an integer). ``dp`` is the plan's batch cut of the data
    inputs (its dataset strategy; 1 when they are whole) or, when that does not fit, the
    nearest that does (larger first: a smaller ``dp`` makes ``mp`` larger).

    Raises:
        PlanError: no ``dp`` fits (one line naming the micro-batch's samples and the heads).
    """
    pipe = plan.pipeline or {}
    stages = int(pipe.get("stages", 1))
    micro = int(pipe.get("micro_batches", 1)) if stages > 1 else 1
    samples = max(1, int(pipe.get("global_batch") or plan.options.get("batch") or 1) // micro)
    d = plan.devices // stages // cp
    dp = max(1, int(plan.dataset_strategy[0][0])) if plan.dataset_strategy else 1
    fits = [c for c in range(1, d + 1) if d % c == 0 and samples % c == 0
            and heads % (d // c) == 0 and kv_heads % (d // c) == 0]
    if not fits:
        raise PlanError(f"no data_parallel·model_parallel = {d} devices per stage"
                        f"{f' and context_parallel {cp}' if cp > 1 else ''} fits "
                        f"mindformers: data_parallel must divide the micro-batch's {samples} "
                        f"samples and model_parallel the {heads} heads and {kv_heads} KV heads "
                        "(plan with a larger --batch or fewer --micro-batches)")
    cand = min(fits, key=lambda c: (c < dp, abs(c - dp)))
    return cand, d // cand


def sequence_parallel(plan: Plan) -> bool:
    """Whether the plan is sequence parallel in mindformers' sense (``use_seq_parallel``: the
    row-parallel MatMuls reduce-scatter onto the tokens, the norms and residual additions cut
    on the sequence): the plan sets an out_strategy (:attr:`Plan.out_strategies`), or cuts the
    token axes of the norms' input beyond the data-input cut."""
    if plan.out_strategies:
        return True
    dp = int(plan.dataset_strategy[0][0]) if plan.dataset_strategy else 1
    for d in plan.decisions:
        if d.op_type in ("RmsNorm", "LayerNorm") and d.strategy and len(d.strategy[0]) >= 2:
            if math.prod(d.strategy[0][:-1]) > dp:
                return True
    return False


#: query-sequence (S1) axis of FlashAttentionScore's query by ``input_layout``
#: (``cost/operators/flash_attention.py``; TND has none the plan cuts)
FLASH_SEQUENCE_AXIS = {"BSH": 1, "BNSD": 2, "SBH": 0, "BSND": 1}


def context_parallel(plan: Plan, graph) -> int:
    """The plan's context-parallel degree in mindformers' sense (``parallel_config.
    context_parallel`` with its default ``context_parallel_algo: colossalai_cp``): the
    query-sequence (S1) cut of every ``FlashAttentionScore`` of the plan, keys and values whole
    along theirs (mindformers' ``FlashAttention._generate_flash_attention_strategy``: query
    ``(dp, tp, cp, 1)`` in BNSD, ``(dp, cp, tp)`` in BSH, keys and values uncut on the
    sequence; ``parallel_core/training_graph/transformer/flash_attention.py``). ``graph``: the
    plan's graph (the operators' ``input_layout``). 1 when no attention is cut on S1.

    Raises:
        PlanError: the attentions cut S1 unequally (mindformers has one ``context_parallel``
            for all layers), or cut the keys' sequence (ring attention: mindformers'
            ``use_ring_attention``, not written here).
    """
    from ..cost.operators.flash_attention import LAYOUTS, input_layout

    ops = {op.label: op for op in graph.ops if op.type == "FlashAttentionScore"}
    cuts = {}
    for d in plan.decisions:
        op = ops.get(d.name)
        if op is None or not d.strategy or len(d.strategy) < 3:
            continue
        layout = input_layout(op)
        layout = LAYOUTS.get(layout, layout) if isinstance(layout, int) else str(layout)
        axis = FLASH_SEQUENCE_AXIS.get(layout)
        if axis is None or len(d.strategy[0]) <= axis:
            continue
        if int(d.strategy[1][axis]) > 1:
            raise PlanError(f"{d.name}: the plan cuts the keys' sequence {d.strategy[1][axis]}"
                            "-way (ring attention), which this export does not write as "
                            "mindformers' parallel_config")
        cuts[d.name] = int(d.strategy[0][axis])
    if len(set(cuts.values())) > 1:
        listed = ", ".join(f"{k} {v}" for k, v in sorted(cuts.items())[:4])
        raise PlanError("the plan cuts the attention's query sequence unequally across layers "
                        f"({listed}); mindformers' parallel_config has one context_parallel")
    return next(iter(cuts.values()), 1)


def run_settings(plan: Plan, model_config: dict, graph=None) -> dict:
    """The plan's settings in mindformers' names: ``{"parallel_config": {...},
    "recompute": bool, "enable_parallel_optimizer": bool, "batch_size": int}``
    (``batch_size``: ``runner_config.batch_size``, samples per micro-batch per data-parallel
    replica, so mindformers' global batch is the plan's). ``expert_parallel`` is the plan's
    (:func:`apply_expert_parallel`, 1 without experts); ``context_parallel`` the plan's
    query-sequence cut of the flash attention (:func:`context_parallel`, with ``graph``; 1
    without it), written with ``context_parallel_algo: colossalai_cp`` (mindformers' form that
    cuts the queries and gathers the keys and values, the one the plan prices) and only with
    ``use_flash_attention`` (mindformers: "context_parallel is only available for flash
    attention"); a MoE plan with ``model_parallel > 1``
    gets ``use_seq_parallel`` (mindformers' ``MoELayer`` refuses tensor parallelism without it:
    "performance may degrade if MoE and tensor parallelism are enabled without also enabling
    sequence parallelism", ``moe_layer.py``)."""
    pipe = plan.pipeline or {}
    stages = int(pipe.get("stages", 1))
    micro = int(pipe.get("micro_batches", 1)) if stages > 1 else 1
    # a YAML may leave the heads to its configuration class's default (DeepSeek-V3's 671B YAML
    # names none): the heads the plan was captured with then
    heads = model_config.get("num_attention_heads") or plan.options.get("heads")
    if not heads:
        raise PlanError("the run configuration names no num_attention_heads: give --heads")
    kv_heads = (model_config.get("num_key_value_heads") or plan.options.get("kv_heads")
                or heads)
    cp = context_parallel(plan, graph) if graph is not None else 1
    if cp > 1 and not model_config.get("use_flash_attention", True):
        raise PlanError(f"the plan cuts the attention's sequence {cp}-way but the model has "
                        "use_flash_attention false (mindformers: context_parallel is only "
                        "available for flash attention)")
    dp, mp = parallel_sizes(plan, int(heads), int(kv_heads), cp)
    global_batch = int(pipe.get("global_batch") or plan.options.get("batch") or 1)
    if global_batch % (dp * micro):
        raise PlanError(f"the plan's global batch {global_batch} is not a multiple of "
                        f"data_parallel·micro_batch_num = {dp}·{micro}")
    ep = int((plan.totals or {}).get("expert_parallel", 1))
    par = {"data_parallel": dp, "model_parallel": mp, "pipeline_stage": stages,
           "micro_batch_num": micro, "expert_parallel": ep, "context_parallel": cp,
           "use_seq_parallel": sequence_parallel(plan)
           or ("expert_parallel" in (plan.totals or {}) and mp > 1)}
    if cp > 1:
        par["context_parallel_algo"] = "colossalai_cp"
    return {"parallel_config": par,
            "recompute": any(bool(v) for v in (pipe.get("recompute") or {}).values()),
            "enable_parallel_optimizer": bool(pipe.get("optimizer_sharding", False)),
            "batch_size": global_batch // (dp * micro)}


def apply_expert_parallel(plan: Plan, graph=None):
    """With mindformers' MoE layers in the plan's graph (:mod:`smsg_ms.cost.expert_dispatch`):
    choose the expert-parallel degree of least predicted step among those mindformers accepts,
    add its difference to ``plan.totals`` (``step_seconds``, ``memory_bytes``, ``grad_sync``)
    and record it as ``totals["expert_parallel"]`` with its parts (``expert_alltoall_seconds``,
    ``expert_grad_sync_seconds``, ``expert_memory_bytes``; ``expert_alltoall_forward``/
    ``_backward``: the AlltoAllV calls predicted in the compiled graph), and in
    ``plan.options`` (the network option of :func:`smsg_ms.networks.mf_run.build`, so ``check``
    compiles that layout). The planner priced the experts at ``ep = 1``; the decisions'
    predicted collectives are moved to ``ep`` (:func:`_decisions_at`), and the plan sealed
    again. Returns the graph (captured again from the plan when ``None``); a plan without
    experts is left as it was."""
    from ..cost.expert_dispatch import choose_expert_parallel, expert_layout
    from ..cost.hardware import get_hardware
    from ..cost.model import CostModel

    if graph is None:
        from ..graph.capture import capture_network
        graph = capture_network(plan.network, world=plan.built_for, **plan.build_options())
    batch = int(plan.build_options().get("batch") or 1)
    layout = expert_layout(graph, batch)
    if layout is None:
        return graph
    pipe = plan.pipeline or {}
    stages = int(pipe.get("stages", 1))
    micro = int(pipe.get("micro_batches", 1)) if stages > 1 else 1
    global_batch = int(pipe.get("global_batch") or batch)
    devices = plan.devices // stages
    model = CostModel(graph, devices, get_hardware(plan.hardware))
    ep, delta = choose_expert_parallel(layout, model, micro_batch=global_batch // micro,
                                       stages=stages, micro_batches=micro,
                                       sharding=pipe.get("optimizer_sharding", False))
    totals = dict(plan.totals or {})
    totals["step_seconds"] = float(totals.get("step_seconds", 0.0)) + delta["seconds"]
    totals["memory_bytes"] = float(totals.get("memory_bytes", 0.0)) + delta["memory_bytes"]
    if "grad_sync" in totals:
        totals["grad_sync"] = float(totals["grad_sync"]) + delta["grad_sync_seconds"]
    totals["expert_parallel"] = ep
    if ep > 1:      # check and compare build the experts' layout the plan chose
        plan.options = {**plan.options, "expert_parallel": ep}
        _decisions_at(plan, graph, layout, model, ep, global_batch // micro)
    totals["expert_alltoall_seconds"] = delta["alltoall_seconds"]
    totals["expert_grad_sync_seconds"] = delta["grad_sync_seconds"]
    totals["expert_memory_bytes"] = delta["memory_bytes"]
    totals["expert_alltoall_forward"] = delta["alltoall_forward"]
    totals["expert_alltoall_backward"] = delta["alltoall_backward"]
    plan.totals = totals
    plan.seal()
    return graph


def _decisions_at(plan: Plan, graph, layout, model, ep: int, micro_batch: int) -> None:
    """Move the predictions of ``plan``'s decisions from ``ep = 1`` to ``ep``: the expert
    weights' gradient AllReduces as :func:`~smsg_ms.cost.expert_dispatch.expert_sync_collectives`
    takes them (group ``d/ep`` of ``1/ep`` of the bytes, none at ``ep = d``), their exposed
    seconds repriced on ``model`` (``breakdown["grad_sync"]`` and ``seconds``), and the
    ``AlltoAllV`` decisions given their calls
    (:func:`~smsg_ms.cost.expert_dispatch.dispatch_collectives`; ``own_group``: the group is
    mindformers' own, which the compiled graph's reader cannot size)."""
    from ..cost.expert_dispatch import (dispatch_collectives, expert_grad_sync_seconds,
                                        expert_sync_ops)

    by_name = {d.name: d for d in plan.decisions}
    for op_id in expert_sync_ops(layout, graph):
        decision = by_name.get(graph.ops[op_id].label)
        if decision is None:
            continue
        before, after = (expert_grad_sync_seconds(layout, model, e, ops=[op_id])
                         for e in (1, ep))
        kept = []
        for c in decision.collectives:
            if c.get("phase") == "grad_sync" and c.get("tensor") in layout.weights:
                group = int(c["group"]) // ep
                if group <= 1:
                    continue
                c = dict(c, group=group, bytes=float(c["bytes"]) / ep)
            kept.append(c)
        decision.collectives = kept
        breakdown = dict(decision.breakdown)
        breakdown["grad_sync"] = float(breakdown.get("grad_sync", 0.0)) + after - before
        decision.breakdown = breakdown
        decision.seconds = float(decision.seconds) + after - before
    calls: dict = {}
    for call in dispatch_collectives(layout, model.devices, ep, micro_batch):
        op = graph.ops[call.pop("op")]
        calls.setdefault(op.label, []).append(dict(call, tensor=op.inputs[0], own_group=True))
    for decision in plan.decisions:
        if decision.name in calls:   # in place of the calls the plan predicted at ep = 1
            decision.collectives = [*(c for c in decision.collectives if not c.get("own_group")),
                                    *calls[decision.name]]


def planned_run(data: dict, plan: Plan, model_config: dict, ckpt_path: str,
                graph=None) -> dict:
    """A copy of the run configuration ``data`` with the plan's settings
    (:func:`run_settings`); every other key kept. ``model_config.offset`` is the one of
    :func:`layer_placement` (``model_config``: the YAML's merged over its model folder's, as
    :func:`smsg_ms.networks.mf_run.model_config_of` gives it), with ``pp_interleave_num`` the
    plan's virtual stages; ``parallel.dataset_strategy`` gets the new data-parallel cut on its
    first axis.

    Raises:
        PlanError: see :func:`run_settings`, :func:`layer_placement`."""
    import copy

    out = copy.deepcopy(data)
    s = run_settings(plan, model_config, graph)
    par = dict(out.get("parallel_config") or {})
    par.pop("context_parallel_algo", None)
    old_stages = int(par.get("pipeline_stage", 1))
    par.update(s["parallel_config"])
    out["parallel_config"] = par
    rec = dict(out.get("recompute_config") or {})
    rec["recompute"] = s["recompute"]
    out["recompute_config"] = rec
    runner = dict(out.get("runner_config") or {})
    runner["batch_size"] = s["batch_size"]
    runner["gradient_accumulation_steps"] = 1
    out["runner_config"] = runner
    out["micro_batch_interleave_num"] = 1
    section = dict(out.get("parallel") or {})
    section["enable_parallel_optimizer"] = s["enable_parallel_optimizer"]
    ckpt = dict(section.get("strategy_ckpt_config") or {})
    ckpt["load_file"] = str(ckpt_path)
    section["strategy_ckpt_config"] = ckpt
    if isinstance(section.get("dataset_strategy"), list):
        dp = s["parallel_config"]["data_parallel"]
        section["dataset_strategy"] = [[dp] + list(row[1:]) if isinstance(row, list) else row
                                       for row in section["dataset_strategy"]]
    out["parallel"] = section
    offset, virtual = layer_placement(plan, model_config, old_stages)
    model = out["model"]["model_config"]
    model["offset"] = offset
    if "pp_interleave_num" in model or virtual > 1:
        model["pp_interleave_num"] = virtual
    if virtual > 1:
        pipeline_config = dict(section.get("pipeline_config") or {})
        pipeline_config["pipeline_interleave"] = True
        section["pipeline_config"] = pipeline_config
    return out


def layer_placement(plan: Plan, model_config: dict, old_stages: int | None = None):
    """``(offset, virtual stages)`` of the planned run: the YAML's ``model_config.offset`` when
    the plan keeps its stage count (``old_stages``) and virtual stages and mindformers accepts
    it (:func:`.mf_offsets.offset_fits`), else :func:`.mf_offsets.stage_offsets` (0 when the
    stages divide the layers, per-stage counts otherwise).

    Raises:
        PlanError: the layers cannot be placed (:func:`.mf_offsets.stage_offsets`).
    """
    from .mf_offsets import offset_fits, stage_offsets

    pipe = plan.pipeline or {}
    stages = int(pipe.get("stages", 1))
    virtual = int(pipe.get("virtual_stages", 1)) if stages > 1 else 1
    layers = int(model_config["num_hidden_layers"])
    own = model_config.get("offset", 0)
    if stages == old_stages and virtual == int(model_config.get("pp_interleave_num") or 1) \
            and offset_fits(own, layers, stages, virtual):
        return own, virtual
    return stage_offsets(layers, stages, virtual), virtual


def write_run_yaml(data: dict, path: str) -> str:
    """Write ``data`` as YAML (``yaml.safe_dump``, keys in their order) atomically to ``path``.
    Comments and anchors of the original are not kept (PyYAML reads them away)."""
    import yaml

    return write_text_atomic(path, yaml.safe_dump(data, sort_keys=False,
                                                  default_flow_style=None, allow_unicode=True))


def extend_to_depth(items: dict, planned_layers: int, layers: int, stage_of: list[int]) -> dict:
    """Strategy checkpoint items (:func:`.strategy_files.strategy_ckpt_items`) of a plan made at
    ``planned_layers`` decoder layers, extended to ``layers``: each key naming ``.layers.i.``
    is given for every layer ``k ≡ i (mod planned_layers)``, on stage ``stage_of[k]`` (where
    mindformers places layer ``k``: :func:`.mf_offsets.stage_of_layers`); when
    ``planned_layers`` does not divide ``layers``, layer ``k`` takes planned layer
    ``min(k, planned_layers − 1)`` (the first layers keep their own kind: DeepSeek-V3's dense
    first layers before its MoE ones). A multi-token-prediction layer (``mtp.layers.i.``) is not
    a decoder layer and keeps its key.
    """
    out = {}
    for key, item in items.items():
        m = _LAYER.search(key)
        if m is None or ".mtp." in key[:m.start() + 1] or key.startswith("mtp."):
            out[key] = item
            continue
        i = int(m.group(1))
        if layers % planned_layers:
            mine = [k for k in range(layers) if min(k, planned_layers - 1) == i]
        else:
            mine = range(i, layers, planned_layers)
        for k in mine:
            name = key[:m.start()] + f".layers.{k}." + key[m.end():]
            out[name] = {**item, "stage": stage_of[k]}
    return dict(sorted(out.items()))


def write_run_strategy_ckpt(plan: Plan, graph, layers: int, path: str, offset=0) -> str:
    """The plan's strategy checkpoint at the run's full depth ``layers`` (:func:`extend_to_depth`,
    the layers on the stages mindformers gives them under ``offset``), written atomically as
    MindSpore's JSON format (:mod:`.strategy_files`).

    Raises:
        PlanError: as :func:`.mf_offsets.stage_of_layers`,
            :func:`.strategy_files.strategy_ckpt_items`.
    """
    from .mf_offsets import stage_of_layers
    from .strategy_files import strategy_ckpt_items

    if not str(path).endswith(".json"):
        raise PlanError(f"{path}: the strategy checkpoint name must end in .json")
    pipe = plan.pipeline or {}
    stages = int(pipe.get("stages", 1))
    virtual = int(pipe.get("virtual_stages", 1)) if stages > 1 else 1
    planned = int(plan.options.get("layers") or layers)
    stage_of = stage_of_layers(layers, stages, offset, virtual)
    items = extend_to_depth(strategy_ckpt_items(plan, graph), planned, layers, stage_of)
    data = {"current_stage": stages, "device_num": int(plan.devices),
            "parallel_strategy_item": items}
    return write_text_atomic(path, json.dumps(data, sort_keys=True, indent=1) + "\n")


def output_paths(plan_path: str) -> tuple[str, str]:
    """``(strategy checkpoint, run YAML)`` written beside the plan file ``X.plan.json``:
    ``X.strategy.json`` and ``X.yaml``."""
    base = str(plan_path)
    for suffix in (".plan.json", ".json"):
        if base.endswith(suffix):
            base = base[:-len(suffix)]
            break
    return base + ".strategy.json", base + ".yaml"


def write_run_outputs(plan: Plan, config: str, plan_path: str, graph=None) -> dict:
    """Write the plan's strategy checkpoint (full depth) and the planned copy of the run
    configuration ``config`` beside ``plan_path`` (:func:`output_paths`).

    Args:
        graph: the graph the plan was made for (captured again from the plan when ``None``).

    Returns:
        ``{"strategy_ckpt": path, "yaml": path, "settings": run_settings(...)}``.

    Raises:
        PlanError: see :func:`write_run_strategy_ckpt`, :func:`run_settings`.
        smsg_ms.networks.mf_run.RunConfigError: the YAML no longer reads.
    """
    import os

    from ..networks.mf_run import load_run_config, model_config_of

    data = load_run_config(config)
    model_config = model_config_of(data, config)
    ckpt, yaml_path = output_paths(plan_path)
    if graph is None:
        from ..graph.capture import capture_network
        graph = capture_network(plan.network, world=plan.built_for, **plan.build_options())
    run = planned_run(data, plan, model_config, os.path.abspath(ckpt), graph)
    write_run_strategy_ckpt(plan, graph, int(model_config["num_hidden_layers"]), ckpt,
                            run["model"]["model_config"]["offset"])
    write_run_yaml(run, yaml_path)
    return {"strategy_ckpt": ckpt, "yaml": yaml_path,
            "settings": run_settings(plan, model_config, graph)}


__all__ = ["apply_expert_parallel", "context_parallel", "extend_to_depth", "layer_placement", "output_paths", "parallel_sizes", "planned_run", "run_settings",
           "sequence_parallel", "write_run_outputs", "write_run_strategy_ckpt", "write_run_yaml"]
