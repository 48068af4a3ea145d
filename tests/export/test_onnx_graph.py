import keras
import numpy as np
import onnx
import onnxruntime as ort
import pytest
import tensorflow as tf
import tf2onnx

from transformer_zoo.export.onnx.layer_norm import fuse_layer_norm
from transformer_zoo.layers import TransformerBlock

D = 16


@pytest.fixture(scope="module")
def converted():
    blocks = [TransformerBlock(2, 32, norm_first=True, causal=True) for _ in range(2)]
    final_norm = keras.layers.LayerNormalization(epsilon=1e-5)
    spec = [tf.TensorSpec((None, None, D), tf.float32, name="x")]

    @tf.function(input_signature=spec)
    def fn(x):
        for block in blocks:
            x = block(x)
        return {"y": final_norm(x)}

    x = np.random.default_rng(0).normal(size=(2, 5, D)).astype("float32")
    fn(x)
    for w in final_norm.weights:  # non-trivial gamma and beta
        w.assign(np.random.default_rng(1).normal(size=w.shape))
    model, _ = tf2onnx.convert.from_function(fn, input_signature=spec, opset=17)
    return model, x, fn(x)["y"].numpy()


def _run(model, x):
    return ort.InferenceSession(model.SerializeToString()).run(["y"], {"x": x})[0]


def test_each_keras_layer_norm_becomes_one_onnx_node_with_the_same_outputs(converted):
    model, x, expected = converted
    before = _run(model, x)
    fused_model, count = fuse_layer_norm(onnx.ModelProto.FromString(model.SerializeToString()))
    onnx.checker.check_model(fused_model)
    assert count == 5  # two blocks × two norms + the final norm
    ops = [n.op_type for n in fused_model.graph.node]
    assert ops.count("LayerNormalization") == 5
    assert "GlobalAveragePool" not in ops and "Reciprocal" not in ops
    after = _run(fused_model, x)
    np.testing.assert_allclose(after, before, atol=1e-5)
    np.testing.assert_allclose(after, expected, atol=1e-5)


def test_graphs_below_opset_17_are_left_alone(converted):
    model, _, _ = converted
    old = onnx.ModelProto.FromString(model.SerializeToString())
    old.opset_import[0].version = 16
    _, count = fuse_layer_norm(old)
    assert count == 0
