"""Errors the advisor's CLI turns into one line and exit code 2."""


class UsageError(Exception):
    """Bad arguments or unusable input."""
