"""The package version, alone in a module so that :mod:`smsg_ms.plan` can stamp plans with it
without importing the package root (which imports the integration layer, which imports plans)."""
__version__ = "0.1.0"
