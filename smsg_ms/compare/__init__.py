"""Side-by-side comparison of smsg with MindSpore's own planners, judged by MindSpore's compiler.

:func:`smsg_ms.compare.runner.compare` compiles a network once per planner in the CPU dry-run and
measures the result (:mod:`.measures`); :func:`smsg_ms.compare.score.score` evaluates any
planner's strategies with smsg's cost model; :mod:`.report` writes the Markdown table and plot.
"""
