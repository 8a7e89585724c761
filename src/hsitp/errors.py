"""User-facing errors: the CLI prints their message (no traceback) and exits with status 2."""


class HsitpError(Exception):
    """An error the user can act on; the message says what was expected and what to do."""


def one_line(message: str) -> str:
    """An error message on one line: a multi-line one (``invalid config:`` then one problem a line) is joined
    with ``; `` so the terminal's and the log's last line holds all of it."""
    lines = [ln.strip() for ln in message.splitlines() if ln.strip()]
    if not lines:
        return message.strip()
    out = lines[0]
    for ln in lines[1:]:
        out += " " + ln if out.endswith(":") or ln.startswith("(") else "; " + ln
    return out
