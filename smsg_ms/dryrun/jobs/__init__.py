"""The jobs the dry-run child does, one module per family (:data:`smsg_ms.dryrun.child.JOBS`).

Each job takes the JSON job dict and returns a JSON-able result dict; they run only inside the
child process (:func:`smsg_ms.dryrun.runner.run_child`), where MindSpore sees the fake devices.
"""
