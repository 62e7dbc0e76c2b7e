"""A mindformers run configuration's own parallel settings as a :class:`~.configs.Config` to price
(``smsg-ms score --mindformers-config RUN.yaml``), and as the ``expert`` row of ``compare``.

Keys read (mindformers 1.9.0 names, ``parallel_core/transformer_config_utils.py``
``COMMON_CONFIG_MAPPING``): ``parallel_config.data_parallel``, ``model_parallel``,
``pipeline_stage``, ``micro_batch_num``, ``expert_parallel``, ``context_parallel``,
``use_seq_parallel`` (:attr:`~.configs.Config.sequence_parallel`), ``vocab_emb_dp``, ``gradient_aggregation_group``;
``recompute_config.recompute``; ``parallel.enable_parallel_optimizer``;
``runner_config.batch_size`` (samples per micro-batch per data-parallel replica) and the global
batch as mindformers computes it (:func:`smsg_ms.networks.mf_run.global_batch`).
"""
from __future__ import annotations

from .configs import Config, ConfigError


def _int(section: dict, key: str, default: int = 1) -> int:
    value = section.get(key, default)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ConfigError(f"parallel_config.{key} must be a positive integer, got {value!r}")
    return value


def config_of_run(data: dict) -> tuple[Config, list[str]]:
    """``(configuration, notes)`` of the parsed run configuration ``data``; a note names a key
    read but not priced (its effect is left out of the prediction).

    ``expert_parallel`` is not part of the configuration: :func:`expert_parallel_of` reads it
    (priced on top by :mod:`smsg_ms.cost.expert_dispatch`).

    Raises:
        ConfigError: one line naming the key that cannot be priced yet: ``context_parallel``
            above 1, a per-stage ``recompute_config.recompute`` list, or a malformed value.
    """
    from ..networks.mf_run import global_batch

    par = data.get("parallel_config") or {}
    for key in ("context_parallel",):
        if _int(par, key) > 1:
            raise ConfigError(f"parallel_config.{key} = {par[key]} cannot be priced yet (the "
                              "Megatron layout of smsg_ms.compare.configs has no "
                              f"{key.replace('_', ' ')} dimension)")
    recompute = (data.get("recompute_config") or {}).get("recompute", False)
    notes = []
    if isinstance(recompute, list):
        # layers recomputed per stage (mindformers): all of the model's layers, or none, can be
        # priced; a part cannot yet
        flat = [int(x) for x in _flatten(recompute)]
        layers = int(((data.get("model") or {}).get("model_config") or {}).get(
            "num_hidden_layers") or 0)
        if sum(flat) not in (0, layers):
            raise ConfigError(f"recompute_config.recompute = {recompute!r} recomputes {sum(flat)} "
                              f"of {layers} layers: a part cannot be priced yet (all or none)")
        recompute = sum(flat) == layers > 0
        notes.append(f"recompute_config.recompute = {recompute!r}: layers per stage, "
                     f"{'all' if recompute else 'none'} of the {layers} layers")
    if not isinstance(recompute, bool):
        raise ConfigError(f"recompute_config.recompute = {recompute!r} cannot be priced yet: "
                          "only True, False or layers per stage")
    runner = data.get("runner_config") or {}
    interleave = int(data.get("micro_batch_interleave_num", 1) or 1)
    micro = _int(runner, "batch_size") * interleave
    config = Config(dp=_int(par, "data_parallel"), tp=_int(par, "model_parallel"),
                    pp=_int(par, "pipeline_stage"), micro_batch=micro,
                    global_batch=global_batch(data), recompute=recompute,
                    optimizer_shard=bool((data.get("parallel") or {}).get(
                        "enable_parallel_optimizer", False)),
                    sequence_parallel=bool(par.get("use_seq_parallel", False)))
    if config.sequence_parallel and config.tp == 1:
        notes.append("use_seq_parallel with model_parallel = 1: nothing to cut on the tokens")
    if _int(par, "gradient_aggregation_group") > 1:
        notes.append("gradient_aggregation_group: communication fusion, not priced")
    if (data.get("recompute_config") or {}).get("select_recompute"):
        notes.append("recompute_config.select_recompute: not priced")
    return config, notes


def expert_parallel_of(data: dict) -> int:
    """``parallel_config.expert_parallel`` of the run (1 when absent).

    Raises:
        ConfigError: not a positive integer.
    """
    return _int(data.get("parallel_config") or {}, "expert_parallel")


def _flatten(value) -> list:
    if isinstance(value, (list, tuple)):
        return [x for v in value for x in _flatten(v)]
    return [value]


__all__ = ["config_of_run", "expert_parallel_of"]
