"""The ONNX exporter: the Optimum file set and I/O names, a self-describing directory,
the plain graphs' fused LayerNorms and rewrites, and validation that fails loudly."""

import json

import numpy as np
import onnx
import pytest
from onnx import numpy_helper

from tests.artifacts import SMALL
from transformer_zoo.export import ExportError, export_onnx
from transformer_zoo.export.onnx.export import convert_graph, validate_onnx_file
from transformer_zoo.generation.graphs import step_graphs
from transformer_zoo.models import EncoderOnlyMaskedLM, from_preset
from transformer_zoo.models.family import dimensions_of
from transformer_zoo.run_directory import load_run_config


def _io(path):
    graph = onnx.load(str(path), load_external_data=False).graph
    return [i.name for i in graph.input], [o.name for o in graph.output]


def test_decoder_only_model_onnx_has_optimum_names(family_artifacts):
    art = family_artifacts("decoder-only")
    inputs, outputs = _io(art.export_dir / "model.onnx")
    past = [f"past_key_values.{i}.{kv}" for i in range(2) for kv in ("key", "value")]
    # + the fused graph's optional `logits_to_keep` (default 0: every position)
    assert inputs == ["input_ids", "attention_mask", "position_ids", *past, "logits_to_keep"]
    assert outputs == ["logits"] + [p.replace("past_key_values", "present") for p in past]


def test_encoder_decoder_exports_encoder_and_decoder_with_both_caches(family_artifacts):
    art = family_artifacts("encoder-decoder")
    enc_in, enc_out = _io(art.export_dir / "encoder_model.onnx")
    dec_in, dec_out = _io(art.export_dir / "decoder_model.onnx")
    assert enc_in == ["input_ids", "attention_mask"]
    cross = [f"{i}.encoder.{kv}" for i in range(2) for kv in ("key", "value")]
    assert enc_out == ["last_hidden_state"] + [f"present.{c}" for c in cross]
    self_ = [f"{i}.decoder.{kv}" for i in range(2) for kv in ("key", "value")]
    assert dec_in[:4] == ["input_ids", "attention_mask", "position_ids", "encoder_attention_mask"]
    assert set(dec_in[4:]) == {f"past_key_values.{c}" for c in self_ + cross} | {"logits_to_keep"}
    assert dec_out == ["logits"] + [f"present.{c}" for c in self_]


def test_encoder_only_classifier_outputs_hidden_states_embedding_pooler_and_logits(
    family_artifacts,
):
    art = family_artifacts("encoder-only")
    inputs, outputs = _io(art.export_dir / "model.onnx")
    assert inputs == ["input_ids", "attention_mask", "token_type_ids"]
    assert sorted(outputs) == ["last_hidden_state", "logits", "pooler_output", "sentence_embedding"]


@pytest.mark.parametrize("family", ["decoder-only", "encoder-decoder", "encoder-only"])
def test_export_directory_describes_itself(family_artifacts, family):
    art = family_artifacts(family)
    config = load_run_config(art.export_dir)
    assert config.family == family and config.task == art.config.task
    assert (art.export_dir / "tokenizer.model").is_file()
    assert (art.export_dir / "target_tokenizer.model").is_file() == (family == "encoder-decoder")
    graphs = config.export["onnx"]["graphs"]
    for entry in graphs.values():
        assert _io(art.export_dir / entry["file"]) == (entry["inputs"], entry["outputs"])
    assert config.export["model"]["num_layers"] == 2
    assert config.export["saved_model"]["directory"] == "saved_model"
    for report in art.onnx_report.values():
        assert report["max_abs_diff"] <= 1e-4


def test_every_layer_norm_is_one_onnx_node_in_the_plain_graph(plain_export):
    directory, report = plain_export("decoder-only")
    nodes = [n.op_type for n in onnx.load(str(directory / "model.onnx")).graph.node]
    assert nodes.count("LayerNormalization") == 2 * 2 + 1  # two per block + the final norm
    assert "GlobalAveragePool" not in nodes
    assert not any(
        node.domain == "com.microsoft"
        for node in onnx.load(str(directory / "model.onnx")).graph.node
    )
    assert report["model.onnx"]["fused_layer_norms"] == 5
    assert load_run_config(directory).export["onnx"]["graph_kind"] == "plain"


@pytest.mark.parametrize(
    "family, graph_file",
    [
        ("decoder-only", "model.onnx"),
        # its plain (tf2onnx) export takes 30 s
        pytest.param("encoder-decoder", "decoder_model.onnx", marks=pytest.mark.slow),
    ],
)
def test_rewrites_leave_one_matmul_per_projection_and_fuse_qkv(plain_export, family, graph_file):
    directory, report = plain_export(family)
    graph = onnx.load(str(directory / graph_file)).graph
    producers = {out: node for node in graph.node for out in node.output}
    weights = {init.name: numpy_helper.to_array(init) for init in graph.initializer}
    projections = [n for n in graph.node if n.op_type == "MatMul" and n.input[1] in weights]

    def flattens(node):  # Reshape(x, [-1, D]): tensordot's move to 2-D
        return (
            node is not None
            and node.op_type == "Reshape"
            and (weights.get(node.input[1], np.zeros(0)).reshape(-1).tolist()[:1] == [-1])
        )

    # Dense's tensordot (Reshape to 2-D, MatMul, Reshape back) is one MatMul now.
    flattened = [n for n in projections if flattens(producers.get(n.input[0]))]
    assert not flattened
    rewrites = report[graph_file]["rewrites"]
    assert rewrites["merged_matmuls"] >= 2  # the query and key/value of each self-attention
    assert rewrites["nodes_after"] < 0.8 * rewrites["nodes_before"]


def test_genai_config_describes_the_decoder(family_artifacts):
    art = family_artifacts("decoder-only")
    config = json.loads((art.export_dir / "genai_config.json").read_text())
    model = config["model"]
    assert model["type"] == "decoder" and model["vocab_size"] == art.model.vocabulary_size
    assert model["context_length"] == 48
    assert model["decoder"]["session_options"]["intra_op_num_threads"] == 2
    assert model["decoder"]["num_key_value_heads"] == model["decoder"]["num_attention_heads"] == 2
    assert config["search"]["past_present_share_buffer"] is False


def test_model_built_in_user_code_exports_without_run_dir_or_tokenizer(tmp_path):
    model = EncoderOnlyMaskedLM(
        from_preset("tiny", family="encoder-only", vocabulary_size=40, max_length=16, **SMALL)
    )
    report = export_onnx(model, tmp_path)
    config = load_run_config(tmp_path)
    assert (config.preset, config.task, config.export["tokenizer"]) == (
        "custom",
        "masked-lm",
        False,
    )
    assert sorted(_io(tmp_path / "model.onnx")[1]) == [
        "last_hidden_state",
        "logits",
        "pooler_output",
        "sentence_embedding",
    ]
    assert report["model.onnx"]["max_abs_diff"] <= 1e-4


def test_a_model_built_under_mixed_bfloat16_exports_as_its_float32_copy(tmp_path):
    import keras

    from transformer_zoo.generation import generate
    from transformer_zoo.models.family import float32_copy
    from transformer_zoo.serving import load_onnx

    keras.config.set_dtype_policy("mixed_bfloat16")  # as a user training in bf16 would
    model = from_preset("tiny", family="decoder-only", vocabulary_size=40, max_length=16, **SMALL)
    report = export_onnx(model, tmp_path)  # fed bfloat16 caches to onnxruntime before
    assert keras.config.dtype_policy().name == "mixed_bfloat16"  # the caller's, untouched
    assert report["model.onnx"]["max_abs_diff"] <= 1e-4
    prompts = [[5, 6, 7], [8, 9]]
    expected = generate(float32_copy(model), prompts, 4).tokens
    np.testing.assert_array_equal(load_onnx(tmp_path).generate_ids(prompts, 4).tokens, expected)


def test_validation_rejects_a_graph_that_differs_from_the_model(tmp_path):
    model = from_preset("tiny", family="encoder-only", vocabulary_size=40, max_length=16, **SMALL)
    (graph,) = step_graphs(model)
    proto, _ = convert_graph(graph)
    path = str(tmp_path / "model.onnx")
    onnx.save(proto, path)
    # The model changes after conversion: the file no longer reproduces it.
    kernel = model.blocks[0].feed_forward.weights[0]
    noise = np.random.default_rng(0).normal(0.0, 0.1, kernel.shape).astype("float32")
    kernel.assign(kernel.numpy() + noise)
    with pytest.raises(ExportError, match="differs from the Keras model"):
        validate_onnx_file(path, graph, dimensions_of(model))
