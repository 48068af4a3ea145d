import numpy as np
import pytest

from transformer_zoo.errors import first_line
from transformer_zoo.layers import PositionalEncoding


def test_first_line_of_a_keras_wrapped_error_is_the_projects_message_without_ansi_codes():
    """Keras wraps an error from inside a layer's call: its first line is "Exception
    encountered when calling PositionalEncoding.call().", the message in ANSI bold on
    the third; the command line printed the wrapper line."""
    with pytest.raises(ValueError) as error:
        PositionalEncoding(4)(np.zeros((1, 6, 8), "float32"))
    message = str(error.value)
    assert message.startswith("Exception encountered when calling PositionalEncoding")
    assert "\x1b[" in message
    assert first_line(error.value) == (
        "The sequence is too long: positions up to 6 were requested but max_length=4. "
        "Received: length=6, start_index=0."
    )


def test_first_line_of_a_plain_error_is_its_first_line_or_its_type():
    assert first_line(ValueError("one\ntwo")) == "one"
    assert first_line(KeyError()) == "KeyError"
    assert first_line(ValueError("Exception encountered when calling X.call().")) == (
        "Exception encountered when calling X.call()."
    )


def test_is_flag_takes_python_and_numpy_bools_only():
    import numpy as np

    from transformer_zoo.errors import is_flag

    assert all(is_flag(v) for v in (True, False, np.bool_(True), np.False_))
    assert not any(is_flag(v) for v in ("no", "", 1, 0, None, np.int64(1), 1.0))
