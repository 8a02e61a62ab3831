"""Build-time generators that are not part of the installed package (run from the repository root)."""
