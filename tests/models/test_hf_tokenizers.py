"""The tokenizer of an imported checkpoint, through the run, its ONNX export and its
`--format hf` export, against transformers 5.25 (tests/data/hf_tokenizer_reference.json):
a BERT classifier saved by transformers 5 with added tokens and embeddings resized for
them, and a GPT-2 whose tokenizer_config.json sets `add_prefix_space`."""

import json
import logging
import shutil

import numpy as np
import pytest
from safetensors.numpy import load_file, save_file

from tests.data.hf_tokenizer_cases import make_case, reference
from tests.helpers import DATA_DIR
from tests.models.test_hf_classifiers import assert_like_the_pipeline
from transformer_zoo.export.run_export import export_run
from transformer_zoo.models.hf.run import import_hf_run
from transformer_zoo.serving import load_served_model
from transformer_zoo.text import load_tokenizers
from transformer_zoo.text.wordpiece import WordPieceTokenizer

REFERENCE = reference()
CLASSIFIER = REFERENCE["bert_classifier"]
BERT_CASES = {case["name"]: case for case in REFERENCE["bert"]["cases"]}
GPT2_CASES = {case["name"]: case for case in REFERENCE["gpt2"]["cases"]}


def resized_classifier(directory, case_name=CLASSIFIER["case"]):
    """hf_bert_classifier with its word embeddings grown by the recorded rows (as
    `resize_token_embeddings` left them for the added tokens) and the tokenizer files of
    `case_name`."""
    base = DATA_DIR / REFERENCE["bert"]["base"]
    make_case(base, BERT_CASES[case_name], directory)
    tensors = load_file(base / "model.safetensors")
    name = "bert.embeddings.word_embeddings.weight"
    rows = np.asarray(CLASSIFIER["new_embedding_rows"], np.float32)
    tensors[name] = np.concatenate([tensors[name], rows])
    save_file(tensors, directory / "model.safetensors")
    config = json.loads((directory / "config.json").read_text())
    (directory / "config.json").write_text(json.dumps({**config, "vocab_size": len(tensors[name])}))
    return directory


@pytest.fixture(scope="module")
def classifier_run(tmp_path_factory):
    root = tmp_path_factory.mktemp("added")
    checkpoint = resized_classifier(root / "checkpoint")
    assert not (checkpoint / "vocab.txt").exists()  # transformers 5 writes none
    import_hf_run(checkpoint, root / "run")
    export_run(root / "run", root / "export", formats=("onnx",))
    return root


@pytest.mark.parametrize("directory", ["run", "export"])
def test_a_classifier_saved_by_transformers_5_with_added_tokens_scores_as_its_pipeline(
    classifier_run, directory
):
    """Before, the import failed ("No vocab.txt"), and with a vocab.txt beside it the
    added tokens came as pieces and the scores differed (the top label flipped)."""
    served = load_served_model(
        classifier_run / directory, "keras" if directory == "run" else "onnx"
    )
    assert served.tokenizer.vocabulary_size == CLASSIFIER["vocab_size"]
    case = BERT_CASES[CLASSIFIER["case"]]
    assert served.tokenizer.encode_ids(case["texts"]) == case["ids"]
    assert_like_the_pipeline(served.classify(CLASSIFIER["texts"]), CLASSIFIER["scores"])


def test_the_hf_export_carries_the_added_tokens_back(classifier_run, tmp_path):
    """`export --format hf` copies the run's tokenizer_config.json, whose
    added_tokens_decoder transformers reads, and import-hf reads it back."""
    export_run(classifier_run / "run", tmp_path / "hf", formats=("hf",))
    settings = json.loads((tmp_path / "hf" / "tokenizer_config.json").read_text())
    added = {v["content"]: int(k) for k, v in settings["added_tokens_decoder"].items()}
    assert {t: added[t] for t in ("[E1]", "[/E1]", "covid19", "<ent>")} == {
        "[E1]": 1305, "[/E1]": 1306, "covid19": 1307, "<ent>": 1308,
    }  # fmt: skip
    case = BERT_CASES[CLASSIFIER["case"]]
    assert (
        WordPieceTokenizer.from_directory(tmp_path / "hf").encode_ids(case["texts"]) == case["ids"]
    )


def test_a_vocab_size_beyond_the_tokenizer_is_warned_of(tmp_path, caplog):
    """The resized classifier with the tokenizer files of before the tokens were added:
    no text reaches the last four rows, and the text the model was tuned on reads as
    pieces. Before, the import said nothing."""
    checkpoint = resized_classifier(tmp_path / "checkpoint", "as_saved")
    with caplog.at_level(logging.WARNING, logger="transformer_zoo"):
        import_hf_run(checkpoint, tmp_path / "run")
    assert [r.getMessage() for r in caplog.records] == [
        "config.json's vocab_size is 1309 but the tokenizer has 1305 tokens: no text gives "
        "the ids 1305..1308 (added tokens missing from the tokenizer files?)"
    ]


def test_a_gpt2_with_add_prefix_space_keeps_it_in_the_run_and_the_export(tmp_path):
    case = GPT2_CASES["add_prefix_space"]
    checkpoint = make_case(DATA_DIR / REFERENCE["gpt2"]["base"], case, tmp_path / "checkpoint")
    shutil.copyfile(DATA_DIR / "hf_gpt2" / "model.safetensors", checkpoint / "model.safetensors")
    import_hf_run(checkpoint, tmp_path / "run")
    assert not (tmp_path / "run" / "tokenizer_config.json").exists()
    export_run(tmp_path / "run", tmp_path / "export", formats=("onnx",))
    for directory in ("run", "export"):
        served = load_served_model(tmp_path / directory, "keras" if directory == "run" else "onnx")
        assert served.tokenizer.encode(case["texts"]) == case["ids"], directory
    tokenizer, _ = load_tokenizers(tmp_path / "export", served.config)
    assert tokenizer.add_prefix_space
    # `export --format hf` writes it back (it wrote `add_prefix_space: false`), and the
    # checkpoint imports with the ids it was made with.
    export_run(tmp_path / "run", tmp_path / "hf", formats=("hf",))
    settings = json.loads((tmp_path / "hf" / "tokenizer_config.json").read_text())
    assert settings["add_prefix_space"] is True
    import_hf_run(tmp_path / "hf", tmp_path / "again")
    served = load_served_model(tmp_path / "again", "keras")
    assert served.tokenizer.encode(case["texts"]) == case["ids"]
