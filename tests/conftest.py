import gc
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


_file_of_last_test = [None]


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item):
    """Before a test file's first test (the previous file's fixtures torn down): collect
    cycles, then freeze what is still alive (TensorFlow, Keras, the session's artifacts)
    out of the collector's reach. A process holds some 400,000 objects once TensorFlow
    is imported, and every full collection walked them all: four tests/models files took
    53 s in one process, 11 s of it collecting, and 44 s with the freeze (2 s collecting).
    Frozen objects are still freed when their last reference goes; only cycles made of
    them stay, and what a test makes is never frozen while that test runs."""
    if item.path != _file_of_last_test[0]:
        _file_of_last_test[0] = item.path
        gc.collect()
        gc.freeze()


from tests.artifacts import (  # noqa: E402,F401  (session fixtures shared by the suite)
    family_artifacts,
    hf_imports,
    plain_export,
    target_tokenizer,
    tokenizer,
    trained_runs,
    wordpiece_artifacts,
)
