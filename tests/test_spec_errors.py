"""A network spec (``package.module:function``) that names no network is refused in one line that
names the spec, the cause and what to give, with exit 2 (bad input, as argparse's); a function
that raises while building the network exits 1 (the network cannot be built). Never a
traceback. The installed command runs in a folder holding the user's modules, as a user runs
it."""
from __future__ import annotations

import pytest

from test_cli import one_line_error, smsg

MODULES = {
    "broken.py": "def build(:\n    pass\n",
    "needs_dep.py": "import no_such_dependency\n\ndef build():\n    pass\n",
    "raises_on_import.py": "raise ValueError('no config file')\n",
    "nets.py": ("WIDTH = 3\n\n"
                "def build(batch: int = 8):\n    raise RuntimeError('out of widgets')\n\n"
                "def small():\n    pass\n"),
}

FORM = "give package.module:function"


@pytest.fixture()
def folder(tmp_path):
    for name, text in MODULES.items():
        (tmp_path / name).write_text(text)
    return tmp_path


@pytest.mark.parametrize("spec, fragments", [
    (":build", ["network spec ':build': no module before ':'", FORM]),
    ("nets:", ["network spec 'nets:': no function after ':'", FORM]),
    ("nets:build:x", ["more than one ':'", FORM]),
    ("my-nets:build", ["'my-nets' is not a module name", FORM]),
    ("nets:build.x", ["'build.x' is not a function name", FORM]),
    ("nosuch", ["unknown network 'nosuch'", "'package.module:function'"]),
    ("no_such_module:build", ["network spec 'no_such_module:build': no module 'no_such_module'",
                              "PYTHONPATH"]),
    ("broken:build", ["network spec 'broken:build': module 'broken' has a syntax error",
                      "broken.py, line 1"]),
    ("needs_dep:build", ["module 'needs_dep' fails to import",
                         "No module named 'no_such_dependency'"]),
    ("raises_on_import:build", ["module 'raises_on_import' fails to import",
                                "ValueError: no config file"]),
    ("nets:WIDTH", ["'WIDTH' in module 'nets' is an int, not a function",
                    "its functions: build, small"]),
    ("nets:large", ["module 'nets' has no 'large'", "its functions: build, small"]),
])
def test_a_spec_naming_no_network_exits_2(folder, spec, fragments):
    proc = smsg(["graph", spec], folder)
    one_line_error(proc, *fragments)
    assert proc.returncode == 2
    assert proc.stderr.rstrip().endswith("(see 'smsg-ms graph --help')")


@pytest.mark.parametrize("command", [["plan", "--out", "p.plan.json"], ["score", "--devices", "8"],
                                     ["compare", "--devices", "8"]])
def test_every_command_refuses_a_bad_spec_alike(folder, command):
    proc = smsg([command[0], "nets:WIDTH", *command[1:]], folder)
    one_line_error(proc, "'WIDTH' in module 'nets' is an int, not a function")
    assert proc.returncode == 2
    assert not (folder / "p.plan.json").exists()


def test_a_function_that_raises_exits_1(folder):
    proc = smsg(["graph", "nets:build"], folder)
    one_line_error(proc, "network 'nets:build' failed to build: RuntimeError: out of widgets")
    assert proc.returncode == 1
