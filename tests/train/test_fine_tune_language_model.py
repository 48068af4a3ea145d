"""A decoder-only run continues training on a plain-text file (`train --init RUN_DIR`):
GPT-2 imported from a checkpoint fine-tunes on your text, as nanoGPT's `init_from`.

The checkpoint is tests/data/hf_gpt2 (random weights, made by transformers; its
`<|endoftext|>`, begin and end of text, is id 0): a window of a token stream has no
padding, so its id 0 is attended to and trained on, as transformers does."""

import json

import keras
import numpy as np
import pytest

from tests.models.test_hf_checkpoints import CHECKPOINTS, reference
from transformer_zoo.data import load_task
from transformer_zoo.evaluation.evaluate import evaluate_directory
from transformer_zoo.export.run_export import export_run
from transformer_zoo.models.hf.run import import_hf_run
from transformer_zoo.serving import load_served_model
from transformer_zoo.train import TrainConfig
from transformer_zoo.train.family_setup import FamilySetup
from transformer_zoo.train.trainer import train

WINDOW = 16  # the imported context: a 27-token prompt holds one window


@pytest.fixture(scope="module")
def imported(tmp_path_factory):
    root = tmp_path_factory.mktemp("fine_tune")
    import_hf_run(CHECKPOINTS["gpt2"], root / "gpt2", max_length=WINDOW)
    return root


def _log_softmax(logits):
    shifted = logits - logits.max(-1, keepdims=True)
    return shifted - np.log(np.exp(shifted).sum(-1, keepdims=True))


def test_a_window_is_scored_as_transformers_scores_it(imported):
    ref, logits = reference("gpt2")
    text = imported / "prompt.txt"
    text.write_text(ref["prompts"][1], encoding="utf-8")
    ids = ref["tokenizer_ids"][1]  # transformers' ids of the text, without the begin token
    # transformers' logits over `<|endoftext|>` + the text: position i predicts ids[i].
    picked = _log_softmax(logits["logits_1"])[np.arange(WINDOW), ids[:WINDOW]]
    scores = evaluate_directory(str(imported / "gpt2"), engine="keras", test=str(text))
    assert scores["tokens"] == WINDOW  # one window
    np.testing.assert_allclose(scores["loss"], -picked.mean(), rtol=1e-4)


def test_a_run_from_init_keeps_its_max_length_and_the_checkpoints_dropout(
    imported, tmp_path, capsys
):
    """`train --init` trained at the model's 64 positions, not the 16 its run was imported
    with (`import-hf --max-length 16`), and with dropout 0, not the checkpoint's."""
    ref, _ = reference("gpt2")
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("\n".join(ref["prompts"] * 20) + "\n", encoding="utf-8")
    init = imported / "gpt2"
    length = json.loads((init / "config.json").read_text())["max_length"]
    dropout = json.loads((CHECKPOINTS["gpt2"] / "config.json").read_text())["resid_pdrop"]
    assert length == WINDOW < 64  # the imported run's, below GPT-2's n_positions
    config = TrainConfig(
        family="decoder-only", data=str(corpus), init=str(init), out=str(tmp_path / "run"),
        steps=2, steps_per_execution=2, batch_size=4, evaluate=False,
    )  # fmt: skip
    train(config, verbose=0)
    assert f"dropout {dropout:g} (the initial model's)" in capsys.readouterr().out
    written = json.loads((tmp_path / "run" / "config.json").read_text())
    assert written["max_length"] == length
    model = keras.saving.load_model(tmp_path / "run" / "model.keras", compile=False)
    assert model.max_length == 64 and model.dropout == dropout  # the positions are kept
    task = load_task(str(corpus), "decoder-only", stream=True)  # as `train` reads it
    setup = FamilySetup.create(task, "tiny", init=str(init))
    inputs = next(iter(setup.dataset("train", setup.build_model(), batch_size=4)))[0]
    assert setup.max_length == length and inputs["token_ids"].shape == (4, length)


@pytest.mark.slow  # an import, a training run and its evaluation: 11 s
def test_an_imported_gpt2_fine_tunes_on_a_text(imported, tmp_path):
    ref, _ = reference("gpt2")
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("\n".join(ref["prompts"] * 20) + "\n", encoding="utf-8")
    out = tmp_path / "run"
    result = train(
        TrainConfig(
            family="decoder-only",
            data=str(corpus),
            init=str(imported / "gpt2"),
            out=str(out),
            steps=30,
            batch_size=8,
            learning_rate=3e-3,
            warmup_steps=3,
            seed=0,
        ),
        verbose=0,
    )
    before = evaluate_directory(str(imported / "gpt2"), engine="keras", test=str(corpus))
    after = result.metrics["test"]  # the last 5% of the text
    assert after["loss"] < 0.8 * before["loss"]  # it learnt the text (5.97 → 3.82 nats here)
    config = json.loads((out / "config.json").read_text())
    assert config["tokenizer"] == "tokenizer.json" and (out / "tokenizer.json").is_file()
    assert (
        config["special_ids"]
        == json.loads((imported / "gpt2" / "config.json").read_text())["special_ids"]
    )
    # It exports (validated against Keras) and serves like the imported run.
    export_run(out, tmp_path / "export", formats=("onnx",))
    prompts = ref["prompts"][:2]
    keras_text = load_served_model(out, "keras").generate(prompts, 6)
    assert load_served_model(tmp_path / "export").generate(prompts, 6) == keras_text


def test_init_of_another_family_or_padded_examples_is_refused(imported, tmp_path):
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("some text\n" * 50, encoding="utf-8")
    with pytest.raises(ValueError, match="fine-tunes on windows of a plain-text file"):
        TrainConfig(family="decoder-only", data=str(corpus), init=".", windows="lines")
    with pytest.raises(ValueError, match="an encoder-decoder trains from scratch"):
        TrainConfig(family="encoder-decoder", data=str(corpus), init=".")
