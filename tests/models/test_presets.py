"""Presets: parameter counts against published figures, name resolution, `describe`."""

import json

import pytest

from tests.helpers import cli_error
from transformer_zoo.cli import main
from transformer_zoo.models import PRESETS, from_preset, resolve_preset
from transformer_zoo.models.presets import preset_config

PUBLISHED = {"gpt2_small": 124_439_808, "bert_base": 109_482_240, "minilm_l6": 22_713_216}
PAPER = {"transformer_base": 65e6, "transformer_big": 213e6}  # §6.1, Table 3


def expected_params(family, config):
    """The count written out layer by layer: an independent reference for the models."""
    d, ff, layers = config["hidden_dim"], config["intermediate_dim"], config["num_layers"]
    attention = 4 * (d * d + d)  # W_Q, W_K, W_V, W_O with biases
    ffn = d * ff + ff + ff * d + d
    norm = 2 * d
    vocab = config["vocabulary_size"]
    if family == "decoder-only":  # tokens, learned positions, blocks, final LN; tied head
        return (vocab + config["max_length"]) * d + layers * (attention + ffn + 2 * norm) + norm
    if family == "encoder-only":
        embeddings = (vocab + config["max_length"] + config["type_vocabulary_size"]) * d + norm
        pooler = d * d + d if config.get("use_pooler", True) else 0
        return embeddings + layers * (attention + ffn + 2 * norm) + pooler
    target = config.get("target_vocabulary_size") or vocab
    tie = config.get("tie_weights", "decoder")
    tables = vocab * d + (0 if tie == "all" else target * d) + (target * d if tie == "none" else 0)
    encoder = layers * (attention + ffn + 2 * norm)
    decoder = layers * (2 * attention + ffn + 3 * norm)  # self + cross attention
    return tables + encoder + decoder  # sinusoidal positions have no weights


@pytest.mark.parametrize("name", [n for n in PRESETS if n.startswith("tiny")])
def test_tiny_presets_build_with_the_counted_number_of_parameters(name):
    model = from_preset(name)
    assert model.count_params() == expected_params(PRESETS[name]["family"], PRESETS[name]["config"])


@pytest.mark.parametrize("name", sorted(PUBLISHED))
def test_published_presets_count_exactly_the_published_parameters(name):
    assert expected_params(PRESETS[name]["family"], PRESETS[name]["config"]) == PUBLISHED[name]


@pytest.mark.parametrize("name", sorted(PAPER))
def test_paper_presets_land_within_5_percent_of_the_paper(name):
    config = PRESETS[name]["config"]
    assert config["vocabulary_size"] == 37000 and config["tie_weights"] == "all"
    count = expected_params("encoder-decoder", config)
    assert abs(count / PAPER[name] - 1) < 0.05


@pytest.mark.slow
@pytest.mark.parametrize("name", ["gpt2_small", "bert_base", "minilm_l6", *sorted(PAPER)])
def test_large_presets_build_with_the_published_parameter_count(name):
    count = from_preset(name).count_params()
    assert count == PUBLISHED.get(name, expected_params("encoder-decoder", PRESETS[name]["config"]))


def test_tiny_resolves_per_family_and_overrides_apply():
    assert resolve_preset("tiny", family="encoder-decoder") == "tiny_encoder_decoder"
    model = from_preset(
        "tiny", family="encoder-decoder", vocabulary_size=500, target_vocabulary_size=3000
    )
    assert (model.vocabulary_size, model.output_vocabulary_size) == (500, 3000)
    tiny = PRESETS["tiny_encoder_decoder"]["config"]
    assert (
        tiny["hidden_dim"],
        tiny["num_layers"],
        tiny["num_heads"],
        tiny["intermediate_dim"],
    ) == (128, 2, 4, 512)


@pytest.mark.parametrize(
    "args, kwargs, message",
    [
        (("tiny",), {}, "family"),
        (("tiny",), {"family": "decoder"}, "family"),
        (("gpt3",), {}, "Unknown preset"),
        (("gpt2_small",), {"family": "encoder-only"}, "decoder-only"),
        (("tiny_decoder_only",), {"num_blocks": 3}, "num_blocks"),
    ],
)
def test_bad_preset_requests_are_rejected_clearly(args, kwargs, message):
    with pytest.raises(ValueError, match=message):
        preset_config(*args, **kwargs)


def test_describe_prints_one_json_object_with_the_built_parameter_count(capsys):
    assert main(["describe", "tiny_decoder_only"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["preset"] == "tiny_decoder_only" and summary["family"] == "decoder-only"
    assert summary["params"] == from_preset("tiny_decoder_only").count_params()


@pytest.mark.parametrize("name", ["tiny", "no_such_preset"])
def test_describe_of_an_unknown_or_ambiguous_preset_exits_2_with_one_error_line(name, capsys):
    line = cli_error(capsys, ["describe", name])
    assert line.startswith("transformer-zoo describe: error:")
    assert ("--family" if name == "tiny" else "invalid choice: 'no_such_preset'") in line


def test_an_override_of_none_is_refused_naming_the_argument():
    """`from_preset(dropout=None)` failed in a comparison naming no argument."""
    with pytest.raises(ValueError, match=r"`dropout` must be in \[0, 1\). Received: dropout=None"):
        from_preset("tiny", family="decoder-only", dropout=None)
