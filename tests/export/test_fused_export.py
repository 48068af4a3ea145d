"""The fused export (`export.onnx.fused`): graphs of onnxruntime's `com.microsoft`
operators written from the weights, held against the Keras model (every variant of each
family's layers) and against the plain tf2onnx graph (outputs and the task's score)."""

import dataclasses

import keras
import numpy as np
import onnx
import onnxruntime as ort
import pytest

from transformer_zoo.data.run_task import run_task
from transformer_zoo.evaluation.evaluate import evaluate, primary_score
from transformer_zoo.export import export_onnx
from transformer_zoo.export.onnx.export import validate_onnx_file
from transformer_zoo.export.onnx.fused import fused_graphs
from transformer_zoo.export.onnx.rewrites import untie_lm_heads
from transformer_zoo.export.validation import feed_cases, real_positions
from transformer_zoo.generation.engine import LOGITS_TO_KEEP
from transformer_zoo.generation.graphs import step_graphs
from transformer_zoo.generation.onnx_runner import OnnxRunner
from transformer_zoo.models import (
    DecoderOnly,
    EncoderDecoder,
    EncoderOnly,
    EncoderOnlyClassifier,
    EncoderOnlyMaskedLM,
)
from transformer_zoo.models.family import dimensions_of
from transformer_zoo.serving import load_onnx

SIZES = dict(num_layers=2, num_heads=2, hidden_dim=16, intermediate_dim=32, max_length=24)


def _randomize(model, seed=0):
    """Distinct random weights everywhere, LayerNorms included (zero-initialised biases
    and unit scales would hide a bias or a gamma left out)."""
    rng = np.random.default_rng(seed)
    for weight in model.weights:
        weight.assign(rng.normal(0.0, 0.3, weight.shape).astype("float32"))
    return model


VARIANTS = {
    "decoder-only, GPT-2 (gelu_tanh)": lambda: DecoderOnly(50, **SIZES),
    "decoder-only, swish": lambda: DecoderOnly(50, activation="swish", **SIZES),
    "decoder-only, relu": lambda: DecoderOnly(50, activation="relu", **SIZES),
    "encoder-decoder, paper (relu, sinusoid, scaled, tied)": lambda: EncoderDecoder(40, **SIZES),
    "encoder-decoder, Marian (swish, halves, output bias)": lambda: EncoderDecoder(
        40, activation="swish", position_layout="halves", output_bias=True, **SIZES
    ),
    "encoder-decoder, separate target vocabulary, untied": lambda: EncoderDecoder(
        40, target_vocabulary_size=30, tie_weights="none", activation="gelu", **SIZES
    ),
    "encoder-only, BERT classifier (pooler, segments)": lambda: EncoderOnlyClassifier(
        EncoderOnly(40, **SIZES), num_classes=3
    ),
    "encoder-only, no pooler, no segments": lambda: EncoderOnlyClassifier(
        EncoderOnly(40, use_pooler=False, type_vocabulary_size=0, **SIZES), num_classes=2
    ),
    "encoder-only, masked LM (transform head)": lambda: EncoderOnlyMaskedLM(
        EncoderOnly(40, **SIZES)
    ),
    "encoder-only, embeddings": lambda: EncoderOnly(40, **SIZES),
}


SLOW_VARIANTS = {
    "decoder-only, relu",
    "encoder-decoder, separate target vocabulary, untied",
    "encoder-only, embeddings",
}


@pytest.mark.parametrize(
    "variant",
    [pytest.param(v, marks=pytest.mark.slow) if v in SLOW_VARIANTS else v for v in VARIANTS],
)
def test_fused_graphs_reproduce_the_keras_model(variant, tmp_path):
    """Every graph on the exporter's own checks: two batch sizes, two lengths, empty and
    filled caches, left-padded masks (padding queries included) and right-padded
    encoder inputs; within 1e-4 of the Keras model."""
    keras.utils.set_random_seed(0)
    model = _randomize(VARIANTS[variant]())
    protos = fused_graphs(model, 17)
    for graph in step_graphs(model):
        path = tmp_path / graph.file
        onnx.save(protos[graph.name], path)
        assert validate_onnx_file(str(path), graph, dimensions_of(model)) <= 1e-4


def test_validation_catches_a_wrong_fused_graph(tmp_path):
    """The check that guards the fused export fails when a weight is wrong."""
    from transformer_zoo.export import ExportError

    keras.utils.set_random_seed(0)
    model = _randomize(DecoderOnly(50, **SIZES))
    proto = fused_graphs(model, 17)["model"]
    gamma = model.final_norm.gamma
    gamma.assign(gamma.numpy() * 1.01)
    onnx.save(proto, tmp_path / "model.onnx")
    with pytest.raises(ExportError, match="differs from the Keras model"):
        validate_onnx_file(
            str(tmp_path / "model.onnx"), step_graphs(model)[0], dimensions_of(model)
        )


def _op_types(proto):
    """The graph's operators, less the sentence embedding's few (`fused._sentence_embedding`)."""
    nodes = [n for n in proto.graph.node if not n.name.startswith("sentence_embedding/")]
    return [node.op_type for node in nodes]


@pytest.mark.parametrize(
    "make, attention_per_layer",
    [
        (lambda: DecoderOnly(50, **SIZES), {"model": 1}),
        (lambda: EncoderDecoder(40, **SIZES), {"encoder": 1, "decoder": 2}),
        (lambda: EncoderOnly(40, **SIZES), {"model": 1}),
    ],
)
def test_each_block_is_a_handful_of_fused_nodes(make, attention_per_layer):
    model = make()
    for name, proto in fused_graphs(model, 17).items():
        ops = _op_types(proto)
        layers = SIZES["num_layers"]
        assert ops.count("MultiHeadAttention") == attention_per_layer[name] * layers
        # One per sublayer: the residual add and the LayerNorm after it are one node.
        assert ops.count("SkipLayerNormalization") >= (attention_per_layer[name] + 1) * layers
        for decomposed in ("Softmax", "Erf", "Tanh", "Pow", "ReduceMean", "Sqrt"):
            if decomposed == "Tanh" and name == "model" and isinstance(model, EncoderOnly):
                continue  # the pooler's tanh
            assert decomposed not in ops, (name, decomposed)
        assert ops.count("Cast") <= 3  # the masks, once per graph, not once per layer


@pytest.mark.parametrize(
    "make",
    [
        lambda: EncoderOnlyMaskedLM(EncoderOnly(40, **SIZES)),
        lambda: EncoderOnlyClassifier(
            EncoderOnly(40, use_pooler=False, type_vocabulary_size=0, **SIZES), 3
        ),
    ],
    ids=["masked LM, segments", "classifier, no pooler, no segments"],
)
def test_the_fused_encoder_computes_the_real_tokens_only(make, tmp_path):
    """Padding-free (`packing.Packing`): rows of a padded batch get what each gives alone,
    unpadded, and what the Keras model gives them; padding positions hold zeros; the graph
    says so in its metadata, which the runner reads."""
    keras.utils.set_random_seed(0)
    model = _randomize(make())
    onnx.save(fused_graphs(model, 17)["model"], tmp_path / "model.onnx")
    runner = OnnxRunner({"model": str(tmp_path / "model.onnx")})
    assert runner.padding_free("model")
    rng = np.random.default_rng(1)
    lengths = [9, 2, 5, 1]
    ids = rng.integers(1, 40, (4, 9))
    mask = (np.arange(9) < np.array(lengths)[:, None]).astype(np.int64)
    segments = (np.arange(9) >= 1).astype(np.int64) * mask
    inputs = {"input_ids": ids, "attention_mask": mask, "token_type_ids": segments}
    if not runner.accepts("model", "token_type_ids"):
        del inputs["token_type_ids"]
    batch = runner.run("model", inputs)
    keras_inputs = {"token_ids": ids, "padding_mask": mask}
    if "token_type_ids" in inputs:
        keras_inputs["segment_ids"] = segments
    keras_out = model(keras_inputs)
    for row, length in enumerate(lengths):
        alone = runner.run("model", {k: v[row : row + 1, :length] for k, v in inputs.items()})
        for name, value in batch.items():
            expected = alone[name][0]
            got = value[row, :length] if value.ndim == 3 else value[row]
            np.testing.assert_allclose(got, expected, atol=1e-5, rtol=0, err_msg=name)
            if value.ndim == 3:
                assert not value[row, length:].any(), f"{name}: padding not zero"
        logits = np.asarray(keras_out["logits"] if isinstance(keras_out, dict) else keras_out)
        got = batch["logits"][row, :length] if logits.ndim == 3 else batch["logits"][row]
        np.testing.assert_allclose(
            got, logits[row, :length] if logits.ndim == 3 else logits[row], atol=1e-4, rtol=0
        )


# The families compared with their plain (tf2onnx) export: decoder-only in the default set,
# the others in the slow one (the encoder-decoder's plain export alone takes 30 s).
PLAIN_FAMILIES = [
    "decoder-only",
    pytest.param("encoder-decoder", marks=pytest.mark.slow),
    pytest.param("encoder-only", marks=pytest.mark.slow),
]


@pytest.mark.parametrize("family", PLAIN_FAMILIES)
def test_fused_and_plain_graphs_give_the_same_outputs(family, family_artifacts, plain_export):
    """Fused (the default export) against tf2onnx's plain graph, on the same inputs."""
    art = family_artifacts(family)
    plain_dir, _ = plain_export(family)
    dims = dimensions_of(art.model)
    for graph in step_graphs(art.model):
        fused = ort.InferenceSession(str(art.export_dir / graph.file))
        plain = ort.InferenceSession(str(plain_dir / graph.file))
        assert any(
            n.domain == "com.microsoft" for n in onnx.load(art.export_dir / graph.file).graph.node
        )
        for _, feeds in feed_cases(graph, dims):
            names = [output.name for output in fused.get_outputs()]
            ours, theirs = fused.run(names, feeds), plain.run(names, feeds)
            for name, a, b in zip(names, ours, theirs, strict=True):
                real = real_positions(feeds, name, a.shape)  # the fused encoder skips padding
                if real is not None:
                    a, b = a[real], b[real]
                np.testing.assert_allclose(a, b, atol=1e-4, rtol=0)


@pytest.mark.parametrize("family", PLAIN_FAMILIES)
def test_fused_and_plain_graphs_name_their_inputs_and_outputs_alike(
    family, family_artifacts, plain_export
):
    """Names, types and shapes, dimension names included: tf2onnx named every symbolic
    dimension of the plain graphs `unk__N`, each apart."""
    art = family_artifacts(family)
    plain_dir, _ = plain_export(family)

    def signature(session, values):
        return {v.name: (v.type, v.shape) for v in values(session)}

    for graph in step_graphs(art.model):
        fused = ort.InferenceSession(str(art.export_dir / graph.file))
        plain = ort.InferenceSession(str(plain_dir / graph.file))
        for values in (ort.InferenceSession.get_inputs, ort.InferenceSession.get_outputs):
            ours = signature(fused, values)
            ours.pop("logits_to_keep", None)  # the fused decoders' optional input
            assert signature(plain, values) == ours


@pytest.mark.parametrize("family", PLAIN_FAMILIES)
def test_fused_and_plain_exports_score_the_same_on_the_task(family, family_artifacts, plain_export):
    art = family_artifacts(family)
    # The artifacts' models were built, not trained, on the built-in task's tokenizers.
    task = run_task(dataclasses.replace(art.config, data="builtin:dates-zh"))
    fused = evaluate(load_onnx(art.export_dir), task, limit=40, samples=0)
    plain = evaluate(load_onnx(plain_export(family)[0]), task, limit=40, samples=0)
    assert primary_score(fused) == primary_score(plain)
    assert fused.keys() == plain.keys()
    del fused["seconds"], plain["seconds"]
    for key, value in fused.items():  # predictions equal, losses to float32 rounding
        assert value == (
            pytest.approx(plain[key], rel=1e-6) if isinstance(value, float) else plain[key]
        )


def test_the_export_records_its_graph_kind(family_artifacts, plain_export):
    from transformer_zoo.run_directory import load_run_config

    assert (
        load_run_config(family_artifacts("decoder-only").export_dir).export["onnx"]["graph_kind"]
        == "fused"
    )
    assert load_run_config(plain_export("decoder-only")[0]).export["onnx"]["graph_kind"] == "plain"


def test_export_refuses_an_unknown_graph_kind(tmp_path):
    with pytest.raises(ValueError, match="`graphs` must be one of"):
        export_onnx(DecoderOnly(50, **SIZES), tmp_path, graphs="fast")


@pytest.mark.parametrize(
    "make, graph, tied",
    [
        (lambda: DecoderOnly(50, **SIZES), "model", True),
        (lambda: EncoderDecoder(40, **SIZES), "decoder", True),
        (lambda: EncoderOnlyMaskedLM(EncoderOnly(40, **SIZES)), "model", True),
        (lambda: EncoderDecoder(40, tie_weights="none", **SIZES), "decoder", False),
    ],
    ids=["decoder-only", "encoder-decoder", "masked LM", "encoder-decoder, untied"],
)
def test_a_tied_head_reads_the_embedding_table_stored_once(make, graph, tied):
    model = make()
    proto = fused_graphs(model, 17)[graph]
    shapes = {t.name: tuple(t.dims) for t in proto.graph.initializer}
    (table,) = [name for name, shape in shapes.items() if name.endswith(".token")]
    vocabulary, width = shapes[table]
    heads = [n for n in proto.graph.node if n.op_type in ("FusedMatMul", "MatMul")
             and shapes.get(n.input[1]) in ((vocabulary, width), (width, vocabulary))]  # fmt: skip
    (head,) = heads
    if tied:  # h Eᵀ over the Gather's own table; no transposed copy anywhere
        assert head.op_type == "FusedMatMul" and head.input[1] == table
        assert (width, vocabulary) not in shapes.values()
    else:
        assert head.op_type == "MatMul" and shapes[head.input[1]] == (width, vocabulary)


def test_untying_the_head_for_the_quantizers_keeps_the_logits(tmp_path):
    # `untie_lm_heads` (run before int8 and int4 quantization): a MatMul over Eᵀ, the same
    # logits on onnxruntime.
    model = _randomize(DecoderOnly(50, **SIZES))
    export_onnx(model, tmp_path)
    tied = onnx.load(tmp_path / "model.onnx")
    untied = onnx.load(tmp_path / "model.onnx")
    assert untie_lm_heads(untied) == 1
    assert "FusedMatMul" not in {n.op_type for n in untied.graph.node}
    values = {t.name: onnx.numpy_helper.to_array(t) for t in untied.graph.initializer}
    np.testing.assert_array_equal(
        values["embeddings.token.transposed"], values["embeddings.token"].T
    )
    ids = np.array([[3, 9, 14, 2], [0, 0, 7, 30]])
    feeds = {
        "input_ids": ids,
        "attention_mask": (ids != 0).astype(np.int64),
        "position_ids": np.maximum(np.cumsum(ids != 0, axis=1) - 1, 0),
    }
    sessions = [ort.InferenceSession(m.SerializeToString()) for m in (tied, untied)]
    names = {i.name for i in sessions[0].get_inputs()}
    for name in names - set(feeds):  # the empty caches
        shape = next(i.shape for i in sessions[0].get_inputs() if i.name == name)
        feeds[name] = np.zeros((2, shape[1], 0, shape[3]), np.float32)
    logits = [
        s.run(["logits"], {k: v for k, v in feeds.items() if k in names})[0] for s in sessions
    ]
    np.testing.assert_allclose(logits[0], logits[1], rtol=0, atol=1e-5)


@pytest.mark.parametrize(
    "make", [lambda: DecoderOnly(50, **SIZES), lambda: EncoderDecoder(40, **SIZES)]
)
def test_logits_to_keep_skips_the_positions_nobody_reads(make):
    """`logits_to_keep` = 1 gives the last position's logits alone, and the same caches;
    left out, every position (the graphs' I/O of the other runners)."""
    keras.utils.set_random_seed(0)
    model = _randomize(make())
    graph = step_graphs(model)[-1]  # the cached step graph
    session = ort.InferenceSession(fused_graphs(model, 17)[graph.name].SerializeToString())
    names = [o.name for o in session.get_outputs()]
    for _, feeds in feed_cases(graph, dimensions_of(model)):
        every = dict(zip(names, session.run(None, feeds), strict=True))
        last = dict(
            zip(names, session.run(None, {**feeds, LOGITS_TO_KEEP: np.array(1)}), strict=True)
        )
        np.testing.assert_array_equal(last["logits"], every["logits"][:, -1:])
        for name in names[1:]:
            np.testing.assert_array_equal(last[name], every[name])


def test_only_the_fused_graphs_are_fed_logits_to_keep(family_artifacts, plain_export):
    from transformer_zoo.generation.engine import CachedEngine
    from transformer_zoo.generation.keras_runner import KerasRunner

    art = family_artifacts("decoder-only")
    engines = {
        "fused": load_onnx(art.export_dir).engine,
        "plain": load_onnx(plain_export("decoder-only")[0]).engine,
        "keras": CachedEngine(KerasRunner(art.model), dimensions_of(art.model), "decoder-only"),
    }
    assert {name: e.keeps_logits for name, e in engines.items()} == {
        "fused": True, "plain": False, "keras": False
    }  # fmt: skip
    prompts = {"token_ids": np.array([[2, 7, 9, 11, 5], [0, 0, 2, 8, 4]])}
    first = {name: e.start(prompts)[0] for name, e in engines.items()}
    np.testing.assert_allclose(first["fused"], first["plain"], atol=1e-4)
    np.testing.assert_allclose(first["fused"], first["keras"], atol=1e-4)


def test_a_fused_graph_that_fails_validation_points_to_the_plain_one(tmp_path, monkeypatch):
    """Nothing is written, and the error names the way out."""
    keras.utils.set_random_seed(0)
    model = DecoderOnly(50, **SIZES)
    written = fused_graphs(model, 17)
    model.final_norm.gamma.assign(model.final_norm.gamma.numpy() + 1.0)  # now they differ
    monkeypatch.setattr("transformer_zoo.export.onnx.fused.fused_graphs", lambda *args: written)
    from transformer_zoo.export import ExportError

    with pytest.raises(ExportError, match=r"differs from the Keras model.*export --plain"):
        export_onnx(model, tmp_path)
    assert not (tmp_path / "model.onnx").exists()
