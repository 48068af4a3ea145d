import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
# numpy references are small: OpenBLAS threads only contend with TensorFlow's.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("KERAS_BACKEND", "tensorflow")

import keras  # noqa: E402
import pytest  # noqa: E402


@pytest.fixture(autouse=True)
def _reset_keras_state():
    """Each test starts with float32 and a fixed seed, whatever the previous one set."""
    keras.config.set_dtype_policy("float32")
    keras.utils.set_random_seed(0)
    yield
    keras.config.set_dtype_policy("float32")


from tests.artifacts import (  # noqa: E402,F401  (session fixtures shared by the suite)
    family_artifacts,
    plain_export,
    target_tokenizer,
    tokenizer,
    trained_runs,
    wordpiece_artifacts,
)
