"""Bad command-line input is refused in one line before any capture, saying what is wrong and
what to do, with exit 2 pointing at the subcommand's ``--help`` as argparse does: argparse's type
checks for numbers (MindSpore's device-count rule included), an unknown flag, and the rules found
after parsing (the built-in networks' widths, :mod:`smsg_ms.networks.width_rules`; flags that do
not go together). In-process through :func:`smsg_ms.cli.main`: every case
stops before a network is built, so each takes milliseconds."""
from __future__ import annotations

import pytest

from smsg_ms.cli import main


def refused(capsys, argv, quiet: bool = True) -> tuple[int, str]:
    """``main(argv)``'s exit status (argparse's ``SystemExit`` included) and its one stderr
    line (nothing else on stderr; nothing on stdout unless ``quiet`` is false)."""
    try:
        rc = main(argv)
    except SystemExit as exc:
        rc = exc.code
    captured = capsys.readouterr()
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("smsg-ms: error: "), captured.err
    assert captured.out == "" or not quiet
    return rc, lines[0]


@pytest.mark.parametrize("argv, fragment", [
    (["plan", "mlp", "--devices", "x"], "argument --devices: 'x' is not an integer"),
    (["plan", "mlp", "--devices", "0"], "argument --devices: must be at least 1, got 0"),
    (["plan", "mlp", "--memory", "-3"], "argument --memory: must be a positive number, got -3"),
    (["plan", "mlp", "--memory", "nan"], "argument --memory: must be a positive number"),
    (["plan", "mlp", "--pipeline", "2", "--micro-batches", "0"],
     "argument --micro-batches: must be at least 1, got 0"),
    (["plan", "mlp", "--devices-per-node", "0"], "argument --devices-per-node: must be at least"),
    (["dryrun", "train.py", "--rank", "-1"], "argument --rank: must be 0 or more, got -1"),
    (["check", "p.json", "--rank", "-2"], "argument --rank: must be 0 or more, got -2"),
    (["compare", "mlp", "--devices", "8", "--timeout", "-1"],
     "argument --timeout: must be a positive number of seconds, got -1"),
    (["score", "mlp", "--devices", "8x"], "argument --devices: '8x' is not an integer"),
    # MindSpore 2.10 takes 1, 2, 4 or a multiple of 8 devices (mindspore-notes.md): the
    # accepted counts around 6 are 4 and 8, around 12 8 and 16, around 20 16 and 24
    (["plan", "llama", "--devices", "6"], "argument --devices: MindSpore 2.10 does not accept "
                                         "6 devices (only 1, 2, 4 or a multiple of 8): use 4 or 8"),
    (["score", "llama", "--devices", "12"], "argument --devices: MindSpore 2.10 does not accept "
                                            "12 devices"),
    (["compare", "mlp", "--devices", "20"], "use 16 or 24"),
    (["check", "s.json", "--network", "mlp", "--devices", "6"], "use 4 or 8"),
    (["plan", "mlp", "--pipeline", "x"], "argument --pipeline: 'x' is not an integer (give "
                                         "'auto' or a count of at least 1)"),
    (["plan", "mlp", "--pipeline", "0"], "argument --pipeline: must be at least 1, got 0"),
])
def test_numbers_are_checked_by_argparse(capsys, argv, fragment):
    rc, line = refused(capsys, argv)
    assert rc == 2 and fragment in line, line
    assert line.endswith(f"(see 'smsg-ms {argv[0]} --help')"), line


@pytest.mark.parametrize("command", ["graph", "plan", "explain", "check", "export", "compare",
                                     "score", "dryrun"])
def test_an_unknown_flag_points_at_its_subcommand_help(capsys, command):
    positional = {"explain": ["p.json"], "check": ["p.json"], "export": ["p.json", "o.json"],
                  "dryrun": ["train.py"], "graph": ["mlp"], "plan": ["mlp"], "compare": ["mlp"],
                  "score": ["mlp"]}[command]
    rc, line = refused(capsys, [command, *positional, "--bogus"])
    assert rc == 2
    assert line == (f"smsg-ms: error: unrecognized arguments: --bogus (see 'smsg-ms {command} "
                    "--help')")


@pytest.mark.parametrize("argv, fragments", [
    # llama's defaults (networks/llama.py): hidden 1024, heads 16; 1024 = 2^10 has the
    # divisors 4 and 8 on either side of 5 (and 2, farther)
    (["plan", "llama", "--heads", "5"],
     ["--heads 5 does not divide --hidden 1024 (the default)", "give --heads 4 or 8"]),
    # divisors of 16 around 3: 2 and 4
    (["graph", "llama", "--kv-heads", "3"],
     ["--kv-heads 3 does not divide --heads 16 (the default)", "give --kv-heads 2 or 4"]),
    (["graph", "llama", "--hidden", "96", "--heads", "12", "--kv-heads", "5"],
     ["--kv-heads 5 does not divide --heads 12", "give --kv-heads 4 or 6"]),
    # moe's default: 8 experts (networks/moe.py)
    (["score", "moe", "--devices", "8", "--top-k", "9"],
     ["--top-k 9 is more than --experts 8 (the default)", "give --top-k at most 8"]),
    (["compare", "gpt", "--devices", "8", "--hidden", "100", "--heads", "3"],
     ["--heads 3 does not divide --hidden 100", "give --heads 2 or 4"]),
    # Llama 2 70B's hidden 8192 (presets.py): 48 heads do not divide it; 32 and 64 do
    (["plan", "llama", "--shape", "llama2-70b", "--heads", "48"],
     ["--heads 48 does not divide --hidden 8192 (from --shape llama2-70b)",
      "give --heads 32 or 64"]),
])
def test_width_rules_before_capture(capsys, argv, fragments):
    rc, line = refused(capsys, argv)
    assert rc == 2 and line.endswith(f"(see 'smsg-ms {argv[0]} --help')"), line
    for f in fragments:
        assert f in line, line


@pytest.mark.parametrize("argv, fragment", [
    # 16 devices on nodes of 3: 16 = 5·3 + 1 fills no whole number of nodes
    (["plan", "mlp", "--devices", "16", "--devices-per-node", "3"],
     "--devices-per-node: 3 devices per node do not divide --devices 16"),
    (["plan", "mlp", "--micro-batches", "2"], "need --pipeline (use --pipeline 1 for one stage)"),
    (["plan", "mlp", "--out", " "], "--out must name a file"),
    # gpt has no grouped-query attention (README: --hidden --heads --layers --seq --vocab)
    (["graph", "gpt", "--kv-heads", "2"], "network 'gpt' takes no --kv-heads"),
    # the presets of networks/presets.py: none is called 'nosuch'
    (["plan", "llama", "--shape", "nosuch"], "unknown --shape 'nosuch': choose one of"),
])
def test_flags_refused_after_parsing_exit_2_as_argparse(capsys, argv, fragment):
    """Found after argparse (one flag against another): the same one line and exit 2."""
    rc, line = refused(capsys, argv)
    assert rc == 2 and fragment in line, line
    assert line.endswith(f"(see 'smsg-ms {argv[0]} --help')"), line


def test_width_rules_are_for_builtins_only():
    """A user's function has its own rules: nothing is checked for it here."""
    from smsg_ms.networks.width_rules import check_widths

    check_widths("smsg_ms.networks.llama:build", {"hidden": 100, "heads": 3})
    with pytest.raises(ValueError, match="does not divide"):
        check_widths("llama", {"hidden": 100, "heads": 3})
