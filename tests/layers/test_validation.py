import numpy as np
import pytest

from transformer_zoo.layers.validation import (
    check_flag,
    check_indices,
    check_positive_number,
    check_rate,
    check_size,
    check_sizes,
)


def test_sizes_are_integers_numpy_included_never_bools_and_come_back_as_ints():
    assert check_sizes(a=3, b=np.int64(4), c=np.uint8(5)) == (3, 4, 5)
    assert type(check_size("a", np.int32(2))) is int
    for bad in (True, np.True_, 2.0, "2", None, 0):
        with pytest.raises(ValueError, match=r"^`a` must be a positive integer\. Received: a="):
            check_size("a", bad)
    assert check_size("a", 0, minimum=0) == 0


def test_flags_are_bools_only():
    assert check_flag("f", np.True_) is True and check_flag("f", False) is False
    for bad in ("no", "False", 0, 1, None):
        with pytest.raises(ValueError, match=rf"^`f` must be True or False\. Received: f={bad!r}"):
            check_flag("f", bad)


def test_rates_and_positive_numbers_are_numbers_not_strings_none_or_bools():
    assert check_rate("dropout", np.float32(0.5)) == 0.5 and check_rate("dropout", 0) == 0.0
    assert check_positive_number("eps", 1e-12) == 1e-12
    for bad in ("0.1", None, True, 1.0, float("nan")):
        with pytest.raises(ValueError, match=r"^`dropout` must be in \[0, 1\)"):
            check_rate("dropout", bad)
    for bad in ("1e-5", None, 0, -1.0):
        with pytest.raises(ValueError, match=r"^`eps` must be a positive number"):
            check_positive_number("eps", bad)


@pytest.mark.parametrize(
    "values", [[[1.5]], np.array([[1.0]]), np.array([[True]]), np.array([["a"]])]
)
def test_indices_must_be_integers(values):
    with pytest.raises(ValueError, match="`mask_positions` must hold integer positions"):
        check_indices(values, 4, "mask_positions", "T", "a position", "positions")
