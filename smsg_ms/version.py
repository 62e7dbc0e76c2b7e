"""The package version, in a module of its own so that :mod:`smsg_ms.plan` (which records it in
every plan) need not import the package's public API, which imports the plan."""
__version__ = "0.1.0"
