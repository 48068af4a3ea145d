"""A Marian checkpoint with opus-mt's generation config (4 beams, `</s>` forced at the length
limit, `<pad>` a bad word), and what transformers' `generate` gives on it
(tests/data/hf_marian/generation_reference.json, made by tests/data/make_hf_references.py
marian-generation): the import records that config as our search, which then gives
transformers' `model.generate(x)`; greedy search with `forced_eos` and beam search under
each `early_stopping` give transformers' tokens too."""

import json

import numpy as np
import pytest
from safetensors.numpy import load_file, save_file

from tests.helpers import DATA_DIR
from transformer_zoo.export.run_export import export_run
from transformer_zoo.generation import BeamSearch, Greedy
from transformer_zoo.generation.search import search_config
from transformer_zoo.models.hf.marian import generation_defaults
from transformer_zoo.models.hf.run import import_hf_run
from transformer_zoo.serving import load_served_model

MARIAN = DATA_DIR / "hf_marian"
REFERENCE = json.loads((MARIAN / "generation_reference.json").read_text())
PAD = REFERENCE["generation_config"]["pad_token_id"]


@pytest.fixture(scope="module")
def opus_like(tmp_path_factory):
    """`(config, run_dir, export_dir)`: `hf_marian` with `</s>`'s output bias raised as the
    reference's was and its generation config, imported and exported to ONNX."""
    root = tmp_path_factory.mktemp("opus_like")
    checkpoint = root / "checkpoint"
    checkpoint.mkdir()
    for path in MARIAN.iterdir():
        (checkpoint / path.name).write_bytes(path.read_bytes())
    tensors = load_file(checkpoint / "model.safetensors")
    tensors["final_logits_bias"][0, 0] += np.float32(REFERENCE["eos_bias_added"])
    save_file(tensors, checkpoint / "model.safetensors")
    config = json.dumps(REFERENCE["generation_config"])
    (checkpoint / "generation_config.json").write_text(config)
    run_config = import_hf_run(checkpoint, root / "run")
    export_run(root / "run", root / "export", formats=("onnx",))
    return run_config, root / "run", root / "export"


def assert_tokens(result, expected, what):
    """`result`'s rows are `expected`, then padding (a batch is as wide as its longest)."""
    for row, tokens in zip(result.tokens.tolist(), expected, strict=True):
        assert row[: len(tokens)] == tokens, what
        assert set(row[len(tokens) :]) <= {PAD}, what


def test_the_import_records_the_checkpoints_generation_config_as_our_search(opus_like):
    config, _, export_dir = opus_like
    expected = {
        "search": {
            "strategy": "beam",
            "num_beams": 4,
            "length_penalty": 1.0,
            "early_stopping": False,  # transformers' default, where the file has none
            "forced_eos": True,
        },
        "max_new_tokens": 63,  # max_length 64 counts the decoder's start token
    }
    assert config.extra["generation"] == expected
    assert json.loads((export_dir / "config.json").read_text())["extra"]["generation"] == expected


@pytest.mark.parametrize("engine", ["keras", "onnx"])
def test_the_recorded_search_gives_transformers_default_generate(opus_like, engine):
    _, run_dir, export_dir = opus_like
    served = load_served_model(run_dir if engine == "keras" else export_dir, engine)
    recorded = served.config.extra["generation"]
    search = search_config(**recorded["search"])
    result = served.translate_ids(REFERENCE["inputs"], recorded["max_new_tokens"], search=search)
    assert_tokens(result, REFERENCE["default"]["tokens"], engine)
    # Rows that reach the limit end with the forced </s>, which transformers' did too.
    assert sum(len(t) == 63 and t[-1] == 0 for t in REFERENCE["default"]["tokens"]) == 2


@pytest.mark.parametrize("engine", ["keras", "onnx"])
def test_greedy_with_forced_eos_ends_rows_at_the_limit_as_transformers(opus_like, engine):
    _, run_dir, export_dir = opus_like
    served = load_served_model(run_dir if engine == "keras" else export_dir, engine)
    greedy = REFERENCE["greedy_forced_eos"]
    result = served.translate_ids(REFERENCE["inputs"], greedy["new_tokens"], Greedy(True))
    assert_tokens(result, greedy["tokens"], engine)
    assert sum(len(t) == greedy["new_tokens"] for t in greedy["tokens"]) == 3  # forced ones


@pytest.mark.parametrize(
    "case",
    # Each early_stopping at the default length penalty in the default set; the other
    # penalties (12 cases, 10 s of the suite in all) in the slow one.
    [c if c["length_penalty"] == 1.0 else pytest.param(c, marks=pytest.mark.slow)
     for c in REFERENCE["beam"]],
    ids=[f"{c['early_stopping']}-{c['length_penalty']}" for c in REFERENCE["beam"]],
)  # fmt: skip
def test_beam_search_stops_as_transformers_under_each_early_stopping(opus_like, case):
    _, run_dir, _ = opus_like
    served = load_served_model(run_dir, "keras")
    config = BeamSearch(4, case["length_penalty"], case["early_stopping"])
    result = served.translate_ids(REFERENCE["inputs"], 40, search=config)
    assert_tokens(result, case["tokens"], case)


def test_the_three_early_stoppings_differ_on_the_reference():
    """The references are a test of `early_stopping`: its three values give different
    tokens at length penalties 1 and 2."""
    by_case = {(c["early_stopping"], c["length_penalty"]): c["tokens"] for c in REFERENCE["beam"]}
    for penalty in (1.0, 2.0):
        rows = [by_case[(stopping, penalty)] for stopping in (True, False, "never")]
        assert rows[0] != rows[1] != rows[2]


def _checkpoint(tmp_path, generation=None, config=None):
    """A directory with a Marian `config.json` and, given, a `generation_config.json`."""
    base = {"model_type": "marian", "eos_token_id": 0, "pad_token_id": 9, "vocab_size": 10}
    (tmp_path / "config.json").write_text(json.dumps({**base, **(config or {})}))
    if generation is not None:
        (tmp_path / "generation_config.json").write_text(json.dumps(generation))
    return tmp_path, {**base, **(config or {})}


def test_generation_defaults_read_transformers_keys_and_defaults(tmp_path):
    # No generation_config.json: config.json's keys (opus-mt's older layout).
    directory, config = _checkpoint(tmp_path, None, {"num_beams": 4, "max_length": 512})
    assert generation_defaults(directory, config, 512) == {
        "search": {
            "strategy": "beam",
            "num_beams": 4,
            "length_penalty": 1.0,
            "early_stopping": False,
            "forced_eos": False,
        },
        "max_new_tokens": 511,
    }
    # generation_config.json wins; transformers' max_length 20 when it has none.
    directory, config = _checkpoint(tmp_path, {"eos_token_id": 0}, {"num_beams": 4})
    assert generation_defaults(directory, config, 512) == {
        "search": {"strategy": "greedy", "forced_eos": False},
        "max_new_tokens": 19,
    }
    # do_sample: transformers' top_k 50; max_new_tokens as given, cut to the run's room.
    generation = {"do_sample": True, "top_p": 0.9, "max_new_tokens": 900, "forced_eos_token_id": 0}
    directory, config = _checkpoint(tmp_path, generation)
    recorded = generation_defaults(directory, config, 128)
    assert recorded["max_new_tokens"] == 127
    assert search_config(**recorded["search"]) == search_config(
        "sample", temperature=1.0, top_k=50, top_p=0.9, forced_eos=True
    )


@pytest.mark.parametrize(
    "generation, message",
    [
        ({"do_sample": True, "num_beams": 4}, "Beam sampling"),
        ({"forced_eos_token_id": 3}, "forced_eos_token_id=3"),
        ({"max_length": "512"}, "max_length"),
    ],
)
def test_generation_configs_we_cannot_follow_are_refused_in_one_line(tmp_path, generation, message):
    directory, config = _checkpoint(tmp_path, generation)
    with pytest.raises(ValueError, match=message) as error:
        generation_defaults(directory, config, 64)
    assert "\n" not in str(error.value)


def test_a_generation_config_we_cannot_follow_does_not_stop_the_import(tmp_path, caplog):
    """It is only recorded: beam sampling made `import-hf` of the whole checkpoint fail."""
    checkpoint = tmp_path / "checkpoint"
    checkpoint.mkdir()
    for path in MARIAN.iterdir():
        (checkpoint / path.name).write_bytes(path.read_bytes())
    (checkpoint / "generation_config.json").write_text(
        json.dumps({"do_sample": True, "num_beams": 4})
    )
    with caplog.at_level("WARNING"):
        config = import_hf_run(checkpoint, tmp_path / "run")
    assert "generation" not in config.extra
    assert "not recorded: Beam sampling" in caplog.text
