"""The graphs of a pipeline search's stage plans, by (devices per stage, micro-batch size).

A stage of ``p`` stages on ``n`` devices runs on ``d = n / p`` devices, and MindSpore's compile
builds the network there with ``pipeline_stages = p`` on ``n`` devices: mindformers'
``parallel_core`` models then read ``data_parallel = n / p = d`` (``smsg_ms.networks.families``).
A capture on one device built for ``d`` devices (:func:`smsg_ms.graph.capture.capture_network`'s
``world``) has the stage's shapes. :class:`StageGraphs` captures per distinct ``d`` only when the
network reads the world size (its first capture says: ``OpGraph.built_for``); a network that
does not is captured for one family of micro-batch sizes shared by every ``d``, as before.
"""
from __future__ import annotations

from ..graph.batch_scale import BatchFamily
from ..graph.model import OpGraph


class StageGraphs:
    """``graph(d, b)``: the network at micro-batch size ``b`` as a stage of ``d`` devices sees it.

    Args:
        spec: the network spec; options: its options, ``batch`` excluded.
        capture: ``batch -> OpGraph`` (a cache; tests, benchmarks) or a
            :class:`~smsg_ms.graph.batch_scale.BatchFamily`: one family for every ``d``, not
            built per stage size. Default: :func:`~smsg_ms.graph.capture.capture_network`.
        build_for_devices: capture the network built for ``d`` devices (default); ``False``:
            built for the capture's one device, one family for every ``d``.

    Each family (one per ``d`` for a network that reads the world size, else one) captures its
    first two micro-batch sizes and rescales the others
    (:class:`~smsg_ms.graph.batch_scale.BatchFamily`).
    """

    def __init__(self, spec: str, options: dict, capture=None, build_for_devices: bool = True):
        self.spec, self.options = spec, dict(options)
        self.shared: BatchFamily | None = None
        if isinstance(capture, BatchFamily):
            self.shared = capture
        elif capture is not None:
            self.shared = BatchFamily(capture)
        elif not build_for_devices:
            self.shared = BatchFamily(self._capture_unbuilt)
        #: per stage size: ``None`` until the first capture, then whether the network read it
        self.reads_world: bool | None = None if self.shared is None else False
        self.families: dict[int, BatchFamily] = {}

    def _capture_unbuilt(self, b: int) -> OpGraph:
        from ..graph.capture import capture_network

        return capture_network(self.spec, batch=b, **self.options)

    def _capture_for(self, d: int):
        def capture(b: int) -> OpGraph:
            from ..graph.capture import capture_network

            graph = capture_network(self.spec, batch=b, world=d, **self.options)
            if self.reads_world is None:
                self.reads_world = graph.built_for is not None
            return graph
        return capture

    def family(self, d: int) -> BatchFamily:
        """The micro-batch family of stages of ``d`` devices (the shared one when the network
        does not read the world size)."""
        if self.shared is not None:
            return self.shared
        if self.reads_world is False:       # learnt from the first family's first capture
            self.shared = next(iter(self.families.values()))
            return self.shared
        if d not in self.families:
            self.families[d] = BatchFamily(self._capture_for(d))
        return self.families[d]

    def graph(self, d: int, b: int) -> OpGraph:
        return self.family(d)(b)

    def key(self, d: int) -> int | None:
        """What the graphs of stages of ``d`` devices depend on: ``d`` for a network that reads
        the world size, ``None`` otherwise (call after a graph of ``d`` was asked for)."""
        return d if self.reads_world else None

    def all_families(self) -> list[BatchFamily]:
        return [self.shared] if self.shared is not None else list(self.families.values())

    @property
    def captures(self) -> int:
        """Captures made, every family together."""
        return sum(f.captures for f in self.all_families())

    @property
    def built_for_sizes(self) -> list[int]:
        """The stage sizes captured built for, sorted (``[]`` for a network that does not
        read the world size)."""
        return sorted(self.families) if self.reads_world else []

    @property
    def micro_batch_sizes(self) -> list[int]:
        """Micro-batch sizes of the graphs made, every family together, sorted."""
        return sorted({b for f in self.all_families() for b in f.graphs})


__all__ = ["StageGraphs"]
