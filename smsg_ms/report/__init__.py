"""Human-readable views of a plan: summary and explain tables (rich), plots (matplotlib)."""
