"""LayerShape: the one layer description every stage shares refuses sizes and dtypes no stage could build."""

from __future__ import annotations

import numpy as np
import pytest

from hsitp.errors import HsitpError
from hsitp.shape import DTYPE_BYTES, LayerShape, ShapeError


@pytest.mark.parametrize("field", ["N", "D", "L", "batch", "heads", "mlp_ratio", "groups", "patch"])
@pytest.mark.parametrize("bad", [0, -3])
def test_sizes_below_one_are_refused_by_name(field: str, bad: int):
    """Catches a zero or negative size reaching the cost model (a zero-FLOP layer and a CCR of inf or NaN)."""
    with pytest.raises(ShapeError, match=rf"LayerShape\.{field} must be >= 1, got {bad}"):
        LayerShape(**{"N": 4, "D": 4, field: bad})


@pytest.mark.parametrize("bad", [2.5, "8", True, None])
def test_non_integer_sizes_are_refused(bad):
    """Catches a fractional or string size (e.g. a YAML value read as text) silently priced as a float."""
    with pytest.raises(ShapeError, match=r"LayerShape\.heads must be an integer"):
        LayerShape(N=4, D=4, heads=bad)


def test_dtype_is_a_known_name_and_gives_its_bytes():
    """Catches an unknown dtype name accepted (and priced at some default size) or a wrong element size."""
    with pytest.raises(ShapeError, match="LayerShape.dtype must be one of float32, bfloat16, float16"):
        LayerShape(N=4, D=4, dtype="int8")
    assert {d: LayerShape(N=4, D=4, dtype=d).dtype_bytes for d in DTYPE_BYTES} == {
        "float32": 4,
        "bfloat16": 2,
        "float16": 2,
    }


def test_errors_are_user_errors_and_numpy_integers_become_ints():
    """Catches a traceback instead of a message (errors must be HsitpError) and numpy sizes leaking into JSON."""
    assert issubclass(ShapeError, HsitpError) and issubclass(ShapeError, ValueError)
    s = LayerShape(N=np.int64(36), D=np.int32(8))
    assert type(s.N) is int and type(s.D) is int and s == LayerShape(N=36, D=8)
