"""User-facing errors: the CLI prints their message (no traceback) and exits with status 2."""


class HsitpError(Exception):
    """An error the user can act on; the message says what was expected and what to do."""
