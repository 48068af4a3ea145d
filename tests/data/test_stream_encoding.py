"""A token stream is encoded once, in pieces, into an int32 array: a 100 MB text was
encoded twice into Python lists (4 GB, six minutes before the first step)."""

from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from transformer_zoo.data import examples, load_task
from transformer_zoo.data.examples import encode_stream
from transformer_zoo.text.byte_level_bpe import ByteLevelBPETokenizer

DATA = Path(__file__).resolve().parent
# Spaces and blank lines beside newlines, tabs, a line separator: where a piece may end
# and where it may not.
TEXT = (DATA / "shakespeare" / "input_head.txt").read_text(encoding="utf-8") + (
    "\n  two spaces \n\nthen\ta tab\t\nand a\u2028line separator x\n"
)


def _stream_task(tmp_path, text=TEXT):
    path = tmp_path / "text.txt"
    path.write_text(text, encoding="utf-8")
    return load_task(str(path), "decoder-only", stream=True)


@pytest.mark.parametrize("kind", ["unigram", "bpe", "char", "gpt2"])
def test_a_stream_encoded_in_pieces_has_the_ids_of_the_whole_text(tmp_path, monkeypatch, kind):
    if kind == "gpt2":
        tokenizer = ByteLevelBPETokenizer.from_directory(DATA / "hf_gpt2")
    else:
        tokenizer, _ = _stream_task(tmp_path).fit_tokenizers(300, kind=kind)
    monkeypatch.setattr(examples, "STREAM_PIECE", 200)  # some 45 pieces
    monkeypatch.setattr(examples, "STREAM_BATCH", 16)  # in 3 calls
    ids = encode_stream(tokenizer, TEXT)
    assert ids.dtype == np.int32
    assert ids.tolist() == tokenizer.encode(TEXT)


def test_a_stream_is_encoded_once_for_the_window_check_and_the_pipelines(tmp_path, monkeypatch):
    from transformer_zoo.train.family_setup import FamilySetup

    task = _stream_task(tmp_path)
    tokenizer, _ = task.fit_tokenizers(kind="char")
    encoded = []
    encode = tokenizer.encode
    monkeypatch.setattr(tokenizer, "encode", lambda text: encoded.append(text) or encode(text))
    setup = FamilySetup.create(task, "tiny", (tokenizer, tokenizer), overrides={"max_length": 16})
    model = SimpleNamespace(max_length=16)  # all the pipelines read of the model
    pipelines = {split: setup.dataset(split, model, 4) for split in ("train", "valid", "test")}
    assert len(encoded) == 2  # the training text and the validation text, the test split's too
    (labels,) = next(iter(pipelines["valid"].unbatch().take(1)))[1:2]
    np.testing.assert_array_equal(labels, encode(task.valid[0].text)[:16])  # its first window
