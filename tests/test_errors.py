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


def test_a_keras_error_whose_first_line_ends_in_a_colon_keeps_its_cause():
    """Keras' "... could not be loaded. Example error message for object <X>:" is followed
    by the cause on a line of its own."""
    error = ValueError(
        "A total of 1 objects could not be loaded. Example error message for object "
        "<Dense name=d, built=True>:\n\nLayer 'd' expected 2 variables, but received 1 "
        "variables during loading. Expected: ['kernel', 'bias']\n\nList of objects that "
        "could not be loaded:\n[<Dense name=d, built=True>]"
    )
    assert first_line(error) == (
        "A total of 1 objects could not be loaded. Example error message for object "
        "<Dense name=d, built=True>: Layer 'd' expected 2 variables, but received 1 "
        "variables during loading. Expected: ['kernel', 'bias']"
    )


def test_tensorflows_user_code_error_is_its_last_line_and_other_colons_stay_alone():
    """TensorFlow's error from a traced function starts "in user code:", then frames,
    then the error; a first line that merely ends in a colon is not joined to the next."""
    import tensorflow as tf

    @tf.function
    def traced(x):
        raise ValueError("the real cause")

    with pytest.raises(ValueError) as error:
        traced(tf.constant(1))
    assert str(error.value).startswith("in user code:")
    assert first_line(error.value) == "ValueError: the real cause"
    graph = ValueError("Graph execution error:\n\nDetected at node GatherV2 defined at:")
    assert first_line(graph) == "Graph execution error:"


def test_is_flag_takes_python_and_numpy_bools_only():
    import numpy as np

    from transformer_zoo.errors import is_flag

    assert all(is_flag(v) for v in (True, False, np.bool_(True), np.False_))
    assert not any(is_flag(v) for v in ("no", "", 1, 0, None, np.int64(1), 1.0))
