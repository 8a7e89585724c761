"""Errors raised by the parallel layers before any collective is issued (user-facing: HsitpError)."""

from __future__ import annotations

from hsitp.errors import HsitpError


class ShardingError(HsitpError, ValueError):
    """A dimension cannot be split as asked (P larger than it, heads not divisible, bad mesh)."""


class DistributedSetupError(HsitpError, RuntimeError):
    """The process group cannot be set up as configured (backend, world size, env vars)."""
