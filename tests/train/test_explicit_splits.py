"""User files as they come (issue 13): explicit `--valid` / `--test` files and a tokenizer
per side, end to end through the command line on a slice of the CMUdict G2P split."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from transformer_zoo.cli import main
from transformer_zoo.data import load_task
from transformer_zoo.data.user_files import read_translation_tsv
from transformer_zoo.run_directory import load_run_config
from transformer_zoo.text.files import load_tokenizers

G2P = Path(__file__).resolve().parents[1] / "data" / "g2p"


def test_explicit_splits_replace_the_cut_ones():
    train, test = str(G2P / "train.tsv"), str(G2P / "test.tsv")
    both = load_task(train, "encoder-decoder", valid=test, test=test)
    assert len(both.train) == len(read_translation_tsv(train))  # nothing cut from --data
    assert both.test == read_translation_tsv(test) == both.valid
    only_test = load_task(train, "encoder-decoder", test=test)
    assert only_test.test == read_translation_tsv(test)
    assert only_test.valid and len(only_test.train) + len(only_test.valid) == len(both.train)
    with pytest.raises(ValueError, match="has its own splits"):
        load_task("builtin:dates-zh", "encoder-decoder", test=test)


def test_a_tokenizer_per_side_letters_in_and_phones_out():
    task = load_task(str(G2P / "train.tsv"), "encoder-decoder", test=str(G2P / "test.tsv"))
    source, target = task.fit_tokenizers(kind="char", target_kind="word")
    assert [source.id_to_piece(i) for i in source.encode("ABC")] == ["\u2581", "A", "B", "C"]
    assert [target.id_to_piece(i) for i in target.encode("K AE T")] == [
        "\u2581K",
        "\u2581AE",
        "\u2581T",
    ]
    assert target.decode(target.encode("K AE T")) == "K AE T"


@pytest.mark.slow  # about 60 s of training and scoring on 2 cores
def test_g2p_command_trains_with_a_test_file_and_a_tokenizer_per_side(tmp_path, capsys):
    out = tmp_path / "g2p"
    code = main([
        "train", "--family", "encoder-decoder", "--data", str(G2P / "train.tsv"),
        "--test", str(G2P / "test.tsv"), "--source-tokenizer", "char",
        "--target-tokenizer", "word", "--epochs", "1", "--batch-size", "32",
        "--precision", "float32", "--out", str(out), "--verbose", "0",
    ])  # fmt: skip
    assert code == 0
    config = load_run_config(out)
    source, target = load_tokenizers(out, config)
    assert [source.id_to_piece(i) for i in source.encode("ABC")] == ["\u2581", "A", "B", "C"]
    phones = "K AE T"
    assert target.decode(target.encode(phones)) == phones
    assert len(target.encode(phones)) == 3  # one piece per phone
    metrics = json.loads((out / "metrics.json").read_text())["test"]
    assert metrics["examples"] == 120 and metrics["sources"] < 120  # words with 2+ lines
    assert 0 <= metrics["wer"]["all"] <= 1 and 0 <= metrics["per"]["all"]
    capsys.readouterr()


def test_tokenizer_flags_are_checked():
    with pytest.raises(SystemExit):
        main(["train", "--family", "decoder-only", "--tokenizer", "letters"])
