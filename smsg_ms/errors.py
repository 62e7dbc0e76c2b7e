"""The one mark of bad input: :class:`InputError`. No imports: every layer may raise it."""
from __future__ import annotations


class InputError(ValueError):
    """Bad input the user gave: a flag's value, flags that do not go together, a file named on
    the command line that cannot be read or is not what it should be, a network spec that names
    no network. The command line reports it in one line with exit 2, as argparse does a bad flag
    (a network that cannot be planned, or a failed check, exits 1). Its subclasses keep their
    own base (``class PlanFileError(PlanError, InputError)``), so callers catching that base
    still catch them."""


__all__ = ["InputError"]
