"""`ServedModel.generate` and `translate` decode many texts in batches of `batch_size`
texts of similar length, not as one batch padded to the longest: every output is what
the text gives alone, in input order, and a text that cannot fit fails before any batch
runs."""

from __future__ import annotations

import pytest

from tests.artifacts import SENTENCES
from transformer_zoo.cli import main
from transformer_zoo.serving import InputError, load_onnx

TEXTS = sorted({s for s in SENTENCES if len(s) < 25}, key=lambda s: (len(s) * 7919) % 13)[:7]


@pytest.mark.parametrize("family", ["encoder-decoder", "decoder-only"])
def test_each_text_gets_what_it_gets_alone_in_input_order(family_artifacts, family):
    served = load_onnx(family_artifacts(family).export_dir)
    lengths = [len(ids) for ids in served.prompt_ids(TEXTS)]
    assert len(set(lengths)) > 2 and lengths != sorted(lengths)  # batches reorder them

    def run(texts, **batching):
        if family == "encoder-decoder":
            return served.translate(texts, 6, **batching)
        return served.generate(texts, 6, **batching)

    alone = [run([text])[0] for text in TEXTS]
    assert run(TEXTS, batch_size=2) == alone  # four batches, shortest first
    assert run(TEXTS) == alone  # one batch (the default holds 64)


def test_a_prompt_that_cannot_fit_fails_before_any_batch_runs(family_artifacts, monkeypatch):
    served = load_onnx(family_artifacts("decoder-only").export_dir)
    calls = []
    monkeypatch.setattr(served, "generate_ids", lambda *args, **kwargs: calls.append(args))
    context = served.dims.max_length
    long = " ".join(["the cat"] * 8)  # the longest, so its batch would run last
    room = context - len(served.prompt_ids([long])[0])
    with pytest.raises(InputError, match=f"does not fit the model's context of {context}"):
        served.generate([*TEXTS, long], room + 1, batch_size=1)
    assert calls == []
    with pytest.raises(InputError, match="`batch_size` must be a positive integer"):
        served.generate(TEXTS, 4, batch_size=0)


def test_the_command_takes_a_batch_size(family_artifacts, capsys):
    export = str(family_artifacts("encoder-decoder").export_dir)
    outputs = []
    for extra in ([], ["--batch-size", "2"]):
        assert main(["translate", *TEXTS, "--model", export, *extra]) == 0
        outputs.append(capsys.readouterr().out)
    assert outputs[0] == outputs[1] and len(outputs[0].splitlines()) == len(TEXTS)


def test_a_completion_continues_its_prompt_with_the_space_between(family_artifacts):
    """`prompt + completion` is the text of the prompt's and the generated ids together
    (as the server's completions and OpenAI's are): SentencePiece's first piece of a
    completion, `▁word`, keeps its space, which decoding the new ids alone drops."""
    served = load_onnx(family_artifacts("decoder-only").export_dir)
    prompts = [
        text for text in TEXTS if served.tokenizer.decode(served.prompt_ids([text])[0]) == text
    ]
    completions = served.generate(prompts, 6)
    tokens = served.generate_ids(served.prompt_ids(prompts), 6).tokens
    for prompt, ids, row, completion in zip(
        prompts, served.prompt_ids(prompts), tokens, completions, strict=True
    ):
        assert prompt + completion == served.tokenizer.decode([*ids, *row])
    assert any(c.startswith(" ") for c in completions)  # what decoding alone loses
