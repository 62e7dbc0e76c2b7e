"""MindSpore's own parallel compiler on a CPU machine (the "dry-run").

* :mod:`.toolchain`: the fake ``nvcc``, stub CUDA libraries and environment that let the GPU
  plugin of the PyPI wheel load and ``init()`` succeed without devices;
* :mod:`.runner`: :func:`~smsg_ms.dryrun.runner.run_child` runs one JSON job in a child process
  (:mod:`.child`) under that environment and raises :class:`~smsg_ms.dryrun.runner.DryRunError`;
* :mod:`.jobs`: what the child does (capture, compile, pipeline compile, planner compile ...);
* :mod:`.collectives`, :mod:`.compiled`: readers of the compiled MindIR in the child (inserted
  collectives, compute operators, the strategy each primitive got).

Nothing here is imported by ``import smsg_ms``; MindSpore is imported only in the child.
"""
