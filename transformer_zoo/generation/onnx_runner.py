"""onnxruntime sessions, and `OnnxRunner`: runs an exported directory's graphs by name."""

from __future__ import annotations

import os

import numpy as np
import onnx
import onnxruntime as ort
from onnxruntime.capi import onnxruntime_pybind11_state as C

from transformer_zoo.errors import ModelDirectoryError, first_line
from transformer_zoo.generation.engine import PADDING_FREE
from transformer_zoo.generation.onnx_greedy import greedy_graph

DEFAULT_THREADS = 2  # 2 intra-op threads decoded ~1.7x faster than 1 on a 2-core machine
# onnxruntime's own default. Spinning workers decoded 10-20% faster on an idle machine
# (benchmarks/serving.py); on cores that other processes share, they made 2-thread
# decoding up to 2x slower than 1 thread: turn it off there.
DEFAULT_SPINNING = True
_CPU = C.OrtDevice(C.OrtDevice.cpu(), C.OrtDevice.default_memory(), 0)


def make_session(
    path: str | bytes,
    intra_op_num_threads: int = DEFAULT_THREADS,
    enable_profiling: bool = False,
    allow_spinning: bool = DEFAULT_SPINNING,
) -> ort.InferenceSession:
    """A CPU session with every graph optimisation on, of the model file `path` (or of a
    serialized model).

    `allow_spinning`: idle intra-op threads busy-wait for the next piece of work
    (onnxruntime's default, the fastest on cores of one's own) or sleep (False: better
    where other processes use the same cores; spinning threads then made 2-thread
    decoding about 2× slower than 1 thread).

    Raises:
        ModelDirectoryError: `path` is missing or is not a loadable ONNX model.
    """
    if not isinstance(intra_op_num_threads, int) or intra_op_num_threads < 0:
        raise ValueError(
            "`intra_op_num_threads` must be a non-negative integer (0: onnxruntime's default). "
            f"Received: intra_op_num_threads={intra_op_num_threads!r}"
        )
    if not isinstance(path, bytes) and not os.path.isfile(path):
        raise ModelDirectoryError(f"Missing model file: {path}")
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    options.intra_op_num_threads = intra_op_num_threads
    options.inter_op_num_threads = 1
    options.log_severity_level = 3
    options.enable_profiling = enable_profiling
    options.add_session_config_entry(
        "session.intra_op.allow_spinning", "1" if allow_spinning else "0"
    )
    try:
        return ort.InferenceSession(path, options, providers=["CPUExecutionProvider"])
    except Exception as error:  # onnxruntime raises its own (non-ValueError) types
        what = "The serialized model" if isinstance(path, bytes) else path
        raise ModelDirectoryError(
            f"{what} is not a valid ONNX model that onnxruntime can load ({first_line(error)})."
        ) from None


class OnnxRunner:
    """Runs the graphs of an exported directory: `run(graph, feeds) -> outputs`.

    The cache tensors stay `ort.OrtValue`s from one step to the next (the outputs of a
    step are fed back as they are, without a round trip through numpy); everything the
    search code reads is returned as numpy.

    Greedy search runs in one call where `in_graph_greedy` is on (`greedy`): the step
    graph wrapped in an ONNX `Loop` (`onnx_greedy.greedy_graph`), whose session is made
    the first time it is asked for and then holds a second copy of the decoder's weights.

    Args:
        files: graph name (`"model"`, `"encoder"`, `"decoder"`) → `.onnx` path.
        intra_op_num_threads: onnxruntime's intra-op threads per session.
        allow_spinning: let idle intra-op threads busy-wait (see `make_session`).
        in_graph_greedy: decode greedily in one onnxruntime call (False: a call per token,
            driven by `greedy.greedy_search`, with one copy of the weights).
    """

    def __init__(
        self,
        files: dict[str, str],
        intra_op_num_threads: int = DEFAULT_THREADS,
        allow_spinning: bool = DEFAULT_SPINNING,
        in_graph_greedy: bool = True,
    ):
        self.files = dict(files)
        self.in_graph_greedy = in_graph_greedy
        self._session_options = (intra_op_num_threads, allow_spinning)
        self.sessions, self.inputs, self.outputs = {}, {}, {}
        # The sessions' C bindings (see `run`); None where an onnxruntime lacks the one we know.
        self.bindings = {}
        # Inputs with a default (an initializer of the same name), such as `logits_to_keep`.
        self.optional_inputs = {}
        # Graphs that compute only the real tokens of a padded batch (`PADDING_FREE`).
        self.padding_free_graphs = set()
        for name, path in files.items():
            self._add(name, path)

    def _add(self, name: str, model: str | bytes) -> None:
        threads, spinning = self._session_options
        session = make_session(model, threads, allow_spinning=spinning)
        self.sessions[name] = session
        self.inputs[name] = {i.name: i for i in session.get_inputs()}
        self.outputs[name] = [o.name for o in session.get_outputs()]
        self.bindings[name] = _c_binding(session)
        self.optional_inputs[name] = {i.name for i in session.get_overridable_initializers()}
        if session.get_modelmeta().custom_metadata_map.get(PADDING_FREE) == "true":
            self.padding_free_graphs.add(name)

    def run(self, graph: str, feeds: dict, numpy_outputs: tuple[str, ...] = ()) -> dict:
        """Runs `graph` on `feeds` (numpy arrays or OrtValues, by name).

        Returns:
            Every output by name: numpy for `numpy_outputs` (all of them if empty),
            onnxruntime's C-level `OrtValue`s otherwise (they have `.numpy()`).

        This calls the session's C binding (`InferenceSession._sess`) the way
        `InferenceSession.run_with_ort_values` does, without its per-call Python work
        (checks of the names it is given and a Python wrapper around every output): at
        1-2 ms per decoded token that work was 10-15% of the step (`benchmarks/serving.py`).
        An onnxruntime without that binding gets the public method, with the same results.
        """
        session = self.sessions[graph]
        arrays = []  # a C OrtValue of a numpy array reads the array's buffer: keep it alive
        values = {}
        for name, value in feeds.items():
            if isinstance(value, ort.OrtValue):
                value = value._ortvalue
            elif not isinstance(value, C.OrtValue):
                array = np.asarray(value, order="C")  # 0-d stays 0-d
                arrays.append(array)
                value = C.OrtValue.ortvalue_from_numpy(array, _CPU)
            values[name] = value
        names = self.outputs[graph]
        binding = self.bindings[graph]
        if binding is not None:
            outputs = binding.run_with_ort_values(values, names, None)
        else:
            wrapped = {name: ort.OrtValue(value) for name, value in values.items()}
            outputs = [value._ortvalue for value in session.run_with_ort_values(names, wrapped)]
        # Indexed, not iterated: iterating the binding's vector took 4x as long.
        return {
            name: outputs[i].numpy() if not numpy_outputs or name in numpy_outputs else outputs[i]
            for i, name in enumerate(names)
        }

    def greedy(self, graph: str, feeds: dict) -> dict:
        """Greedy search over the step graph `graph` in one call: `feeds` as
        `onnx_greedy.greedy_graph` takes them; returns its `tokens` and `scores`."""
        name = f"{graph}+greedy"
        if name not in self.sessions:
            step = onnx.load(self.files[graph])
            self._add(name, greedy_graph(step).SerializeToString())
        return self.run(name, feeds)

    def accepts(self, graph: str, name: str) -> bool:
        return name in self.inputs.get(graph, {}) or name in self.optional_inputs.get(graph, ())

    def padding_free(self, graph: str) -> bool:
        """Whether `graph` computes only the real tokens of a padded batch (`PADDING_FREE`),
        as its metadata said when its session was made."""
        return graph in self.padding_free_graphs

    def take(self, value, indices: np.ndarray):
        """Rows `indices` of a cache tensor (beam search reorders them)."""
        if isinstance(value, (ort.OrtValue, C.OrtValue)):
            value = value.numpy()
        return np.ascontiguousarray(value[indices])


def _c_binding(session: ort.InferenceSession):
    """The C object behind `session` (onnxruntime's `_sess`), where it has the
    `run_with_ort_values(feeds, output_names, run_options)` that `OnnxRunner.run` calls."""
    binding = getattr(session, "_sess", None)
    return binding if callable(getattr(binding, "run_with_ort_values", None)) else None
