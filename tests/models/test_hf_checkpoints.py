"""GPT-2 and Marian checkpoints made by transformers itself (tests/data/make_hf_references.py:
random weights, realistic layout) imported with `import-hf`: their logits within 1e-4 of
transformers', their tokenizers' ids, and the same greedy and beam tokens as
transformers' `generate()`, through the Keras and the ONNX engines."""

import json

import numpy as np
import pytest
from safetensors.numpy import load_file, save_file

from tests.helpers import DATA_DIR
from transformer_zoo import cli
from transformer_zoo.export.run_export import export_run
from transformer_zoo.generation import BeamSearch, Greedy
from transformer_zoo.models import DecoderOnly, EncoderDecoder
from transformer_zoo.models.hf.gpt2 import import_hf_gpt2
from transformer_zoo.models.hf.marian import import_hf_marian, sinusoid_halves
from transformer_zoo.models.hf.run import import_hf_run
from transformer_zoo.serving import load_served_model
from transformer_zoo.text.byte_level_bpe import ByteLevelBPETokenizer
from transformer_zoo.text.marian import MarianTokenizer

CHECKPOINTS = {"gpt2": DATA_DIR / "hf_gpt2", "marian": DATA_DIR / "hf_marian"}


def reference(name):
    directory = CHECKPOINTS[name]
    return json.loads((directory / "reference.json").read_text()), np.load(
        directory / "reference.npz"
    )


def gpt2_logits(model, ids):
    x = np.array([ids])
    return np.asarray(model({"token_ids": x, "padding_mask": np.ones_like(x, bool)}))[0]


def marian_logits(model, ids, decoder_ids):
    x, y = np.array([ids]), np.array([decoder_ids])
    inputs = {
        "encoder_token_ids": x,
        "encoder_padding_mask": np.ones_like(x, bool),
        "decoder_token_ids": y,
        "decoder_padding_mask": np.ones_like(y, bool),
    }
    return np.asarray(model(inputs))[0]


def test_gpt2_logits_match_transformers():
    ref, logits = reference("gpt2")
    model = import_hf_gpt2(CHECKPOINTS["gpt2"])
    assert isinstance(model, DecoderOnly) and model.activation == "gelu_tanh"
    for i, ids in enumerate(ref["inputs"]):  # ids start with <|endoftext|>, id 0 here
        np.testing.assert_allclose(gpt2_logits(model, ids), logits[f"logits_{i}"], atol=1e-4)


def test_marian_logits_match_transformers():
    ref, logits = reference("marian")
    model = import_hf_marian(CHECKPOINTS["marian"])
    assert isinstance(model, EncoderDecoder)
    assert (model.activation, model.position_layout, model.tie_weights) == (
        "swish",
        "halves",
        "all",
    )
    for i, ids in enumerate(ref["inputs"]):  # sources end with </s>, id 0
        got = marian_logits(model, ids, ref["decoder_inputs"])
        np.testing.assert_allclose(got, logits[f"logits_{i}"], atol=1e-4)


@pytest.mark.parametrize("scale", [False, None], ids=["false", "missing"])
def test_marian_scales_its_embeddings_only_where_scale_embedding_says(scale, tmp_path):
    """transformers' Marian multiplies the shared embeddings by √d_model only with
    `scale_embedding` true (MarianConfig's default is false): the encoder's and the
    decoder's inputs are then E[ids] + the sinusoid table, E the checkpoint's own."""
    checkpoint = _copy("marian", tmp_path)
    config = json.loads((checkpoint / "config.json").read_text())
    if scale is None:
        del config["scale_embedding"]
    else:
        config["scale_embedding"] = scale
    (checkpoint / "config.json").write_text(json.dumps(config))
    model = import_hf_marian(checkpoint)
    table = load_file(checkpoint / "model.safetensors")["model.shared.weight"]  # (V, D)
    ids = np.array([[5, 0, 17, 279, 3]])
    expected = table[ids] + sinusoid_halves(ids.shape[1], table.shape[1])
    for embedding in (model.encoder_embeddings, model.decoder_embeddings):
        np.testing.assert_allclose(np.asarray(embedding(ids)), expected, atol=1e-6)
    scaled = import_hf_marian(CHECKPOINTS["marian"]).encoder_embeddings(ids)  # true
    expected = table[ids] * np.sqrt(table.shape[1]) + sinusoid_halves(ids.shape[1], table.shape[1])
    np.testing.assert_allclose(np.asarray(scaled), expected, atol=1e-5)


def test_tokenizers_give_the_ids_transformers_gave():
    ref, _ = reference("gpt2")
    bpe = ByteLevelBPETokenizer.from_directory(CHECKPOINTS["gpt2"])
    assert bpe.encode(ref["prompts"]) == ref["tokenizer_ids"]
    assert [bpe.decode(ids) for ids in ref["tokenizer_ids"]] == ref["prompts"]
    ref, _ = reference("marian")
    source, target = MarianTokenizer.from_directory(CHECKPOINTS["marian"])
    assert [ids + [source.eos_id] for ids in source.encode(ref["sources"])] == ref["inputs"]
    assert [target.decode(ids) for ids in ref["greedy"]] == ref["greedy_text"]


def test_marian_sinusoid_is_the_layers_halves_layout():
    from transformer_zoo.layers import PositionalEncoding

    ours = np.asarray(PositionalEncoding(64, layout="halves")(np.zeros((1, 64, 16), "float32")))
    np.testing.assert_allclose(ours[0], sinusoid_halves(64, 16), atol=1e-5)
    interleaved = np.asarray(PositionalEncoding(64)(np.zeros((1, 64, 16), "float32")))[0]
    np.testing.assert_allclose(interleaved[:, 0::2], ours[0, :, :8], atol=1e-6)  # same sines


@pytest.fixture(scope="module", params=sorted(CHECKPOINTS))
def imported(request, hf_imports):
    """`(name, run_dir, export_dir)`: the checkpoint imported and exported to ONNX, as
    the serving tests have it (`hf_imports`)."""
    return (request.param, *hf_imports(request.param))


@pytest.mark.parametrize("engine", ["keras", "onnx"])
def test_generation_matches_transformers_generate(imported, engine):
    name, run_dir, export_dir = imported
    ref, _ = reference(name)
    served = load_served_model(run_dir if engine == "keras" else export_dir, engine)
    for strategy, search in (("greedy", Greedy()), ("beam", BeamSearch(ref["num_beams"]))):
        for ids, expected in zip(ref["inputs"], ref[strategy], strict=True):
            if name == "gpt2":
                result = served.generate_ids([ids], ref["new_tokens"], search=search)
            else:
                result = served.translate_ids([ids], ref["new_tokens"], search=search)
            assert result.tokens[0].tolist() == expected, (strategy, ids)
    texts = ref["prompts"] if name == "gpt2" else ref["sources"]
    run = served.generate if name == "gpt2" else served.translate
    assert run(texts, ref["new_tokens"]) == ref["greedy_text"]


def test_imported_run_directories_describe_themselves(imported):
    name, run_dir, export_dir = imported
    config = json.loads((run_dir / "config.json").read_text())
    exported = json.loads((export_dir / "config.json").read_text())
    if name == "gpt2":
        assert config["tokenizer"] == "tokenizer.json" and config["task"] == "language-model"
        assert config["special_ids"]["bos"] == config["special_ids"]["eos"] == 0
    else:
        assert (config["tokenizer"], config["target_tokenizer"]) == ("source.spm", "target.spm")
        assert config["special_ids"]["bos"] == config["special_ids"]["pad"] == 279
        assert (export_dir / "vocab.json").is_file()
    assert exported["preset"] == f"hf-{name}"


def _fail(capsys, *argv):
    assert cli.main(["import-hf", *map(str, argv)]) == 2
    error = capsys.readouterr().err
    assert len(error.strip().splitlines()) == 1, error
    return error


def _copy(name, tmp_path, change_config=None, change_tensors=None):
    """The checkpoint `name` copied to tmp_path, its config and tensors changed."""
    directory = tmp_path / name
    directory.mkdir(parents=True)
    for path in CHECKPOINTS[name].iterdir():
        (directory / path.name).write_bytes(path.read_bytes())
    if change_config:
        config = json.loads((directory / "config.json").read_text())
        (directory / "config.json").write_text(json.dumps({**config, **change_config}))
    if change_tensors:
        tensors = load_file(directory / "model.safetensors")
        change_tensors(tensors)
        save_file(tensors, directory / "model.safetensors")
    return directory


def test_bad_gpt2_and_marian_checkpoints_fail_in_one_line(tmp_path, capsys):
    out = tmp_path / "out"

    def drop(name):
        return lambda tensors: tensors.pop(name)

    def add(name, value):
        return lambda tensors: tensors.__setitem__(name, value)

    cases = [
        ("gpt2", {"activation_function": "quick_gelu"}, None, "activation_function"),
        ("gpt2", {"scale_attn_by_inverse_layer_idx": True}, None, "scale_attn_by_inverse"),
        ("gpt2", None, drop("transformer.h.1.attn.c_attn.bias"), "Missing: ['h.1.attn.c_attn.bias']"),
        ("gpt2", None, add("transformer.extra", np.zeros(3, np.float32)), "Unused: ['extra']"),
        ("gpt2", None, add("lm_head.weight", np.zeros((384, 64), np.float32)), "tied"),
        ("gpt2", {"tie_word_embeddings": False}, add("lm_head.weight", np.zeros((384, 64), np.float32)), "untied head (tie_word_embeddings=false)"),
        ("marian", {"decoder_layers": 3}, None, "decoder_layers=3"),
        ("marian", {"share_encoder_decoder_embeddings": False}, None, "separate"),
        ("marian", None, add("model.encoder.embed_positions.weight", np.ones((64, 64), np.float32)), "sinusoidal"),
        ("marian", {"model_type": "t5"}, None, "model_type"),
    ]  # fmt: skip
    for i, (name, config, tensors, message) in enumerate(cases):
        checkpoint = _copy(name, tmp_path / str(i), config, tensors)
        assert message in _fail(capsys, checkpoint, "--out", out), (name, config)
    assert not out.exists()  # nothing is written before everything is checked


def test_transformers_layout_buffers_are_checked_and_dropped(tmp_path):
    """Older files keep GPT-2's causal-mask buffers and a copy of the tied head, and
    Marian's position tables and per-stack copies of the shared embedding."""

    def gpt2_extras(tensors):
        tensors["lm_head.weight"] = tensors["transformer.wte.weight"].copy()
        tensors["transformer.h.0.attn.bias"] = np.tril(np.ones((1, 1, 64, 64), np.float32))

    def marian_extras(tensors):
        for stack in ("encoder", "decoder"):
            tensors[f"model.{stack}.embed_positions.weight"] = sinusoid_halves(64, 64)
            tensors[f"model.{stack}.embed_tokens.weight"] = tensors["model.shared.weight"].copy()

    expected = import_hf_gpt2(CHECKPOINTS["gpt2"]).get_weights()
    got = import_hf_gpt2(_copy("gpt2", tmp_path, change_tensors=gpt2_extras)).get_weights()
    assert all(np.array_equal(a, b) for a, b in zip(expected, got, strict=True))
    model = import_hf_marian(_copy("marian", tmp_path, change_tensors=marian_extras))
    assert len(model.get_weights()) == len(import_hf_marian(CHECKPOINTS["marian"]).get_weights())


GPT2_DROPOUT = ("resid_pdrop", "embd_pdrop", "attn_pdrop")


def test_gpt2s_dropout_is_imported_and_written_back(tmp_path, caplog):
    """The import set dropout 0, so `train --init` fine-tuned without the checkpoint's
    dropout and `export --format hf` wrote 0.0 back for transformers to train with."""
    from transformer_zoo.models.hf.gpt2 import to_gpt2

    original = json.loads((CHECKPOINTS["gpt2"] / "config.json").read_text())  # transformers'
    model = import_hf_gpt2(CHECKPOINTS["gpt2"])
    assert model.dropout == original["resid_pdrop"] > 0
    assert model.get_config()["dropout"] == original["resid_pdrop"]
    exported, _ = to_gpt2(model)
    assert {key: exported[key] for key in GPT2_DROPOUT} == {k: original[k] for k in GPT2_DROPOUT}
    # Rates that differ: the residual one, in one warning naming the others.
    differ = {"resid_pdrop": 0.2, "embd_pdrop": 0.1, "attn_pdrop": 0.0}
    with caplog.at_level("WARNING", logger="transformer_zoo"):
        model = import_hf_gpt2(_copy("gpt2", tmp_path, differ))
    assert model.dropout == differ["resid_pdrop"]
    [warning] = [r.getMessage() for r in caplog.records]
    assert "resid_pdrop=0.2, also in place of embd_pdrop=0.1, attn_pdrop=0" in warning
    assert {key: to_gpt2(model)[0][key] for key in GPT2_DROPOUT} == dict.fromkeys(
        GPT2_DROPOUT, differ["resid_pdrop"]
    )


@pytest.mark.parametrize("imported", ["gpt2"], indirect=True)
def test_optimum_decoded_our_onnx_export_to_our_tokens(imported):
    """benchmarks/hf_checkpoints.py --record loaded our ONNX export of this checkpoint in
    Optimum's ORTModelForCausalLM and our `--format hf` export in transformers
    (tests/data/hf_gpt2/through_optimum.json); our engines agree with what they gave."""
    _, _, export_dir = imported
    record = json.loads((CHECKPOINTS["gpt2"] / "through_optimum.json").read_text())
    served = load_served_model(export_dir, "onnx")
    ref, _ = reference("gpt2")
    for ids, tokens in zip(record["inputs"], record["optimum_greedy"], strict=True):
        ours = served.generate_ids([ids], ref["new_tokens"]).tokens[0].tolist()
        assert ours == tokens
    model = import_hf_gpt2(CHECKPOINTS["gpt2"])
    for ids, logits in zip(record["inputs"], record["hf_export_last_logits"], strict=True):
        np.testing.assert_allclose(gpt2_logits(model, ids)[-1], logits, atol=1e-4)


def test_marian_never_emits_its_bad_words_as_transformers_generate(tmp_path):
    """opus-mt's `bad_words_ids=[[pad]]`, with `<pad>`'s output bias raised so that it would
    win everywhere (tests/data/hf_marian/bad_words_reference.json, transformers' tokens for
    the same checkpoint): greedy (the numpy search and the ONNX Loop) and beam search of
    every engine give transformers' tokens, and the run keeps the original bias."""
    record = json.loads((CHECKPOINTS["marian"] / "bad_words_reference.json").read_text())
    (pad,) = record["bad_words_ids"][0]
    assert all(pad in row for row in record["greedy_without_bad_words"])  # a real test

    def raise_pad(tensors):
        tensors["final_logits_bias"][0, pad] += np.float32(record["pad_bias_added"])

    checkpoint = _copy("marian", tmp_path, change_tensors=raise_pad)
    generation = json.loads((checkpoint / "generation_config.json").read_text())
    generation["bad_words_ids"] = record["bad_words_ids"]
    (checkpoint / "generation_config.json").write_text(json.dumps(generation))
    config = import_hf_run(checkpoint, tmp_path / "run")
    bias = load_file(checkpoint / "model.safetensors")["final_logits_bias"][0]
    assert config.extra["bad_words"] == {"ids": [pad], "final_logits_bias": [float(bias[pad])]}
    export_run(tmp_path / "run", tmp_path / "export", formats=("onnx",))
    for directory, engine in ((tmp_path / "run", "keras"), (tmp_path / "export", "onnx")):
        served = load_served_model(directory, engine)
        for strategy, search in (("greedy", Greedy()), ("beam", BeamSearch(4))):
            for ids, expected in zip(record["inputs"], record[strategy], strict=True):
                tokens = served.translate_ids([ids], 12, search=search).tokens[0].tolist()
                assert tokens == expected, (engine, strategy, ids)


def _gpt2_weights(checkpoint):
    return import_hf_gpt2(checkpoint).get_weights()


def test_bfloat16_and_sharded_gpt2_checkpoints_read_as_the_original(tmp_path):
    """transformers' `torch_dtype=bfloat16` files and `save_pretrained(max_shard_size=...)`'s
    shards with their `model.safetensors.index.json`, made here from the float32 file."""
    import ml_dtypes

    tensors = load_file(CHECKPOINTS["gpt2"] / "model.safetensors")
    bf16 = _copy("gpt2", tmp_path / "bf16")
    rounded = {name: value.astype(ml_dtypes.bfloat16) for name, value in tensors.items()}
    save_file(rounded, bf16 / "model.safetensors")
    expected = [
        w.astype(ml_dtypes.bfloat16).astype(np.float32) for w in _gpt2_weights(CHECKPOINTS["gpt2"])
    ]
    got = _gpt2_weights(bf16)
    assert all(np.array_equal(a, b) for a, b in zip(expected, got, strict=True))

    sharded = _copy("gpt2", tmp_path / "sharded")
    (sharded / "model.safetensors").unlink()
    names = sorted(tensors)
    weight_map = {}
    for i, part in enumerate(np.array_split(np.array(names), 3)):
        shard = f"model-{i + 1:05d}-of-00003.safetensors"
        save_file({name: tensors[name] for name in part}, sharded / shard)
        weight_map.update(dict.fromkeys(part.tolist(), shard))
    index = {"metadata": {"total_size": 0}, "weight_map": weight_map}
    (sharded / "model.safetensors.index.json").write_text(json.dumps(index))
    expected = _gpt2_weights(CHECKPOINTS["gpt2"])
    assert all(np.array_equal(a, b) for a, b in zip(expected, _gpt2_weights(sharded), strict=True))


def test_float16_marian_with_its_position_tables_reads_as_the_original(tmp_path):
    """The Hub's opus-mt layout in float16: the sinusoidal tables and the tied copies saved
    beside the weights, rounded to float16 (transformers computes the table in float32)."""

    def to_float16(tensors):
        for stack in ("encoder", "decoder"):
            tensors[f"model.{stack}.embed_positions.weight"] = sinusoid_halves(64, 64)
            tensors[f"model.{stack}.embed_tokens.weight"] = tensors["model.shared.weight"]
        tensors["lm_head.weight"] = tensors["model.shared.weight"]
        for name, value in tensors.items():
            tensors[name] = value.astype(np.float16)

    model = import_hf_marian(_copy("marian", tmp_path, change_tensors=to_float16))
    original = import_hf_marian(CHECKPOINTS["marian"]).get_weights()
    expected = [w.astype(np.float16).astype(np.float32) for w in original]
    assert all(np.array_equal(a, b) for a, b in zip(expected, model.get_weights(), strict=True))


def test_a_git_lfs_pointer_or_a_truncated_weights_file_fails_in_one_line(tmp_path, capsys):
    """A clone without `git lfs pull`, or a download cut short, was a SafetensorError
    traceback."""
    out = tmp_path / "out"
    pointer = _copy("gpt2", tmp_path / "pointer")
    (pointer / "model.safetensors").write_text(
        "version https://git-lfs.github.com/spec/v1\noid sha256:4fb1\nsize 517704\n"
    )
    error = _fail(capsys, pointer, "--out", out)
    assert "model.safetensors is a Git LFS pointer" in error, error
    truncated = _copy("gpt2", tmp_path / "truncated")
    data = (truncated / "model.safetensors").read_bytes()
    (truncated / "model.safetensors").write_bytes(data[: len(data) // 2])
    error = _fail(capsys, truncated, "--out", out)
    assert "Cannot read" in error and "model.safetensors" in error, error
    assert not out.exists()
