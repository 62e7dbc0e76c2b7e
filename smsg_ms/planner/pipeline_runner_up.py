"""The exact runner-up configuration of a pipelined plan (issue #17, item 7), for
``smsg-ms explain --runner-up``.

The runner-up a pipelined plan records (``Plan.pipeline["runner_up"]``) comes from the
configurations the pipeline search evaluated; the search skips ``(stages, micro-batches)``
pairs whose lower bound exceeds a step already found, so a skipped pair may be the true second
best. Here the search runs again with that pruning off
(:func:`~smsg_ms.planner.pipelined.plan_pipelined_with`'s ``unpruned``): every configuration
``(stages, micro-batches, optimizer level, virtual stages)`` of the search space is evaluated
(each with its exact stage cut and recompute choice), and the cheapest one other than the
chosen one is the runner-up; :func:`runner_up_plan` plans it held, for its stage plan's
``dp``/``tp``. It is computed at explain time, never stored: storing it would change the
plan's content hash.
"""
from __future__ import annotations

from .options import PlanningOptions

#: the keys that name one configuration of the pipeline search (what it enumerates)
CONFIGURATION_KEYS = ("stages", "micro_batches", "optimizer_level", "virtual_stages")


class NotReproducedError(ValueError):
    """The pipeline search, run in the search space given, does not choose the plan's own
    configuration (another space, memory limit or smsg-ms version than the plan's)."""


def own_spaces(plan) -> list[tuple[str, PlanningOptions]]:
    """The search spaces ``explain --runner-up`` tries, in order, when none is given (the plan
    file does not record the one it was planned in): ``--pipeline auto``; the plan's stage
    count with micro-batches searched; the plan's stage count and micro-batches. Each with
    optimizer levels searched and virtual stages as the plan chose (searched when ``v > 1``).
    ``[(the flags that give it, PlanningOptions)]``."""
    record = plan.pipeline
    p, m = int(record["stages"]), int(record["micro_batches"])
    v = None if int(record.get("virtual_stages", 1)) > 1 else 1
    spaces = [("--pipeline auto", PlanningOptions(virtual_stages=v))]
    if p > 1:
        spaces += [(f"--pipeline {p}", PlanningOptions(stages=p, virtual_stages=v)),
                   (f"--pipeline {p} --micro-batches {m}",
                    PlanningOptions(stages=p, micro_batches=m, virtual_stages=v))]
    return spaces


def single_configuration(settings: PlanningOptions) -> bool:
    """``True`` where ``settings`` fixes every key of :data:`CONFIGURATION_KEYS` (stages,
    micro-batches, optimizer sharding, virtual stages): its search space holds one
    configuration, so it has no runner-up whatever fits."""
    return (settings.stages != "auto" and settings.micro_batches is not None
            and settings.optimizer_sharding is not None and settings.virtual_stages is not None)


def chosen_configuration(record: dict) -> dict:
    """The configuration a plan's pipeline record chose: :data:`CONFIGURATION_KEYS` (optimizer
    level ``"off"`` when optimizer sharding is off, ``"level1"`` when on without a level)."""
    level = record.get("optimizer_level") or ("level1" if record.get("optimizer_sharding")
                                              else "off")
    return {"stages": int(record["stages"]), "micro_batches": int(record["micro_batches"]),
            "optimizer_level": level, "virtual_stages": int(record.get("virtual_stages", 1))}


def pipelined_runner_up(plan, settings: PlanningOptions | None = None, *,
                        capture=None) -> dict | None:
    """The exact runner-up configuration of a pipelined :class:`~smsg_ms.plan.Plan` (one
    carrying a pipeline record, ``--pipeline auto`` plans of one stage included).

    Args:
        plan: the plan, read from a file.
        settings: the search space, as given to ``plan`` (stages, micro-batches, optimizer
            sharding, virtual stages, memory limit); default ``--pipeline auto``, micro-batches
            and optimizer levels searched, virtual stages searched when the plan chose ``v > 1``
            (1 otherwise), under the plan's hardware preset. Its ``hardware`` is replaced by the
            plan's.
        capture: ``batch -> OpGraph`` replacing the capture of the network (a cache; tests).

    Returns:
        ``None`` when no other configuration fits; otherwise ``{"stages", "micro_batches",
        "optimizer_level", "virtual_stages", "step_seconds", "difference_seconds",
        "devices_per_stage", "micro_batch_size"}`` (``recomputed`` / ``selective``: blocks
        recomputed whole / selectively, when the search returned that configuration's own
        plan): the cheapest configuration whose :data:`CONFIGURATION_KEYS` differ from the
        chosen one, its predicted super-step (s) and its excess over the chosen step (s,
        ``≥ 0``).

    Raises:
        ValueError: a plan without a pipeline record.
        NotReproducedError: the unpruned search does not reproduce the plan under
            ``settings`` (another search space, memory limit or smsg-ms version: pass the
            settings it was planned with; :func:`own_spaces` lists the likely ones).
        smsg_ms.graph.capture.CaptureError: the network cannot be captured here.
    """
    from dataclasses import replace

    from ..cost.hardware import get_hardware
    from .options import VIRTUAL_STAGES
    from .pipelined import plan_pipelined_with

    record = plan.pipeline
    if not record:
        raise ValueError("this plan has no pipeline record: its runner-up configuration is the "
                         "single-stage one (smsg_ms.planner.runner_up)")
    chosen = chosen_configuration(record)
    if settings is None:
        settings = PlanningOptions(
            virtual_stages=None if chosen["virtual_stages"] > 1 else 1)
    settings = replace(settings, hardware=get_hardware(plan.hardware), progress=False)
    if settings.virtual_stages is None and chosen["virtual_stages"] not in VIRTUAL_STAGES:
        settings = replace(settings, virtual_stages=chosen["virtual_stages"])
    options = {k: v for k, v in plan.options.items() if k != "batch"}
    # built for its stages' devices as the plan was (a network that reads the world size
    # records it: built_for; one that does not captures the same either way)
    again = plan_pipelined_with(plan.network, plan.devices, int(record["global_batch"]),
                                settings, capture=capture, network_options=options,
                                unpruned=True, build_for_devices=plan.built_for is not None)
    got = chosen_configuration(again.pipeline)
    step, step_again = float(record["step_seconds"]), float(again.pipeline["step_seconds"])
    if got != chosen or abs(step_again - step) > 1e-9 * max(abs(step), 1e-30):
        raise NotReproducedError(
            "the pipeline search does not reproduce this plan's configuration "
            f"({_describe(chosen)}) under these settings (it chose {_describe(got)}): pass "
            "explain the --pipeline, --micro-batches, --optimizer-sharding, --virtual-stages "
            "and --memory the plan was made with, or re-plan it")
    runner = again.pipeline.get("runner_up")
    if runner is None:
        return None
    out = dict(runner, difference_seconds=float(runner["step_seconds"]) - step)
    out.update(devices_per_stage=plan.devices // int(runner["stages"]),
               micro_batch_size=int(record["global_batch"]) // int(runner["micro_batches"]))
    return out


def runner_up_plan(plan, runner: dict, settings: PlanningOptions | None = None, *,
                   capture=None):
    """The plan of the runner-up configuration ``runner`` (:func:`pipelined_runner_up`'s):
    the pipeline search held to its stages, micro-batches, optimizer level and virtual stages
    (other settings from ``settings``, as there), so that its stage plan's degrees (``dp``,
    ``tp``) can be read (:func:`smsg_ms.report.degrees.chosen_degrees`).

    Raises:
        ValueError: the held search does not find the runner-up's step again.
        smsg_ms.graph.capture.CaptureError: the network cannot be captured here.
    """
    from dataclasses import replace

    from ..cost.hardware import get_hardware
    from .pipelined import plan_pipelined_with

    level = runner["optimizer_level"]
    held = replace(settings or PlanningOptions(), hardware=get_hardware(plan.hardware),
                   progress=False, stages=int(runner["stages"]),
                   micro_batches=None if int(runner["stages"]) == 1 and
                   int(runner["micro_batches"]) == 1 else int(runner["micro_batches"]),
                   optimizer_sharding={"off": False, "level1": True}.get(level, level),
                   virtual_stages=int(runner["virtual_stages"]))
    options = {k: v for k, v in plan.options.items() if k != "batch"}
    out = plan_pipelined_with(plan.network, plan.devices, int(plan.pipeline["global_batch"]),
                              held, capture=capture, network_options=options,
                              build_for_devices=plan.built_for is not None)
    step = float(runner["step_seconds"])
    if abs(float(out.pipeline["step_seconds"]) - step) > 1e-9 * max(abs(step), 1e-30):
        raise ValueError(f"the runner-up configuration ({_describe(runner)}) planned alone "
                         "does not find its step again")
    return out


def _describe(config: dict) -> str:
    """``pp P, micro-batches M, optimizer L, virtual stages V``."""
    return (f"pp {config['stages']}, micro-batches {config['micro_batches']}, optimizer "
            f"{config['optimizer_level']}, virtual stages {config['virtual_stages']}")


__all__ = ["CONFIGURATION_KEYS", "NotReproducedError", "chosen_configuration", "own_spaces",
           "pipelined_runner_up", "runner_up_plan", "single_configuration"]
