"""Make the small random-weight GPT-2 and Marian checkpoints, and what transformers computes
with them, that the import tests compare against (issue 15).

Not a test (pytest collects only ``test_*.py``): it needs torch and transformers, which the
project never depends on. Run it once, in a throwaway venv, as tests/data/README.md says:

    /tmp/torch-venv/bin/python tests/data/make_hf_references.py

It writes, with transformers' own classes and `save_pretrained`:

- tests/data/hf_gpt2/: `GPT2LMHeadModel` (2 layers, width 64, 4 heads, context 64) with a
  byte-level BPE vocabulary of 384 tokens trained on tests/data/shakespeare/input_head.txt
  (`vocab.json`, `merges.txt`, `tokenizer.json`, ...);
- tests/data/hf_marian/: `MarianMTModel` (2 + 2 layers, width 64, 4 heads, swish, scaled
  embeddings, shared embeddings, a random `final_logits_bias`) with `source.spm` trained
  on the same English slice, `target.spm` on the phones of tests/data/g2p/train.tsv and
  the joint `vocab.json` (`</s>` 0, `<unk>` 1, `<pad>` last, as the opus-mt models);
- `reference.json` in each: the texts, the tokenizer's ids, the greedy and beam tokens of
  `generate()` and the decoded text; `reference.npz`: the logits of the forward pass.

Weights are random (seeded): the point is that our layers compute what transformers
computes, to 1e-4, for a checkpoint of a realistic layout.
"""

from __future__ import annotations

import json
import pathlib
import platform
import tempfile

import numpy as np
import sentencepiece
import tokenizers
import torch
import transformers
from tokenizers import decoders, models, pre_tokenizers, processors, trainers

HERE = pathlib.Path(__file__).resolve().parent
ENGLISH = HERE / "shakespeare" / "input_head.txt"
PHONES = HERE / "g2p" / "train.tsv"
NEW_TOKENS = 12
NUM_BEAMS = 4
EMBEDDING_SCALE = 0.2
MARIAN_INIT_STD = 0.2

PROMPTS = [
    "First Citizen:\nBefore we proceed",
    "You are all resolved rather to die than to famish?",
    "We know't, we know't.",
]
SOURCES = [
    "Let us kill him, and we'll have corn at our own price.",
    "Speak, speak.",
    "What authority surfeits on would relieve us.",
]


def versions() -> dict:
    return {
        "python": platform.python_version(),
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "tokenizers": tokenizers.__version__,
        "sentencepiece": sentencepiece.__version__,
        "numpy": np.__version__,
    }


def write_reference(directory: pathlib.Path, reference: dict, logits: dict) -> None:
    reference["versions"] = versions()
    text = json.dumps(reference, indent=1, ensure_ascii=True) + "\n"
    (directory / "reference.json").write_text(text, encoding="utf-8")
    np.savez_compressed(directory / "reference.npz", **logits)


def generations(model, inputs: list[list[int]], **extra) -> dict:
    """Greedy and beam tokens (the new ones only) of `generate` for each input alone."""
    out = {"greedy": [], "beam": []}
    for ids in inputs:
        tensor = torch.tensor([ids])
        mask = torch.ones_like(tensor)
        for name, options in (
            ("greedy", {"do_sample": False, "num_beams": 1}),
            ("beam", {"do_sample": False, "num_beams": NUM_BEAMS, "early_stopping": True}),
        ):
            generated = model.generate(
                tensor,
                attention_mask=mask,
                max_new_tokens=NEW_TOKENS,
                length_penalty=1.0,
                **options,
                **extra,
            )[0].tolist()
            out[name].append(generated)
    return out


def make_gpt2(directory: pathlib.Path) -> None:
    directory.mkdir(exist_ok=True)
    bpe = tokenizers.Tokenizer(models.BPE())
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    bpe.decoder = decoders.ByteLevel()
    bpe.post_processor = processors.ByteLevel(trim_offsets=False)
    trainer = trainers.BpeTrainer(
        vocab_size=384,
        special_tokens=["<|endoftext|>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    bpe.train([str(ENGLISH)], trainer)
    tokenizer = transformers.GPT2TokenizerFast(tokenizer_object=bpe)
    tokenizer.eos_token = tokenizer.bos_token = tokenizer.unk_token = "<|endoftext|>"
    eos = tokenizer.convert_tokens_to_ids("<|endoftext|>")

    torch.manual_seed(0)
    config = transformers.GPT2Config(
        vocab_size=len(tokenizer),
        n_positions=64,
        n_embd=64,
        n_layer=2,
        n_head=4,
        activation_function="gelu_new",
        initializer_range=0.1,
        bos_token_id=eos,
        eos_token_id=eos,
    )
    model = transformers.GPT2LMHeadModel(config).eval()
    with torch.no_grad():  # non-zero biases and norms, so that every weight shows
        for name, parameter in model.named_parameters():
            if name.endswith(("bias", "ln_1.weight", "ln_2.weight", "ln_f.weight")):
                parameter.add_(torch.randn_like(parameter) * 0.1)
        # A smaller token embedding keeps the residual stream from repeating its input
        # token through the tied head, so that greedy and beam search differ.
        model.transformer.wte.weight.mul_(EMBEDDING_SCALE)
    model.save_pretrained(directory)
    tokenizer.save_pretrained(directory)

    # The prompts as our decoder-only format gives them: <|endoftext|> + pieces.
    inputs = [[eos] + tokenizer.encode(text) for text in PROMPTS]
    with torch.no_grad():
        logits = {
            f"logits_{i}": model(torch.tensor([ids])).logits[0].numpy()
            for i, ids in enumerate(inputs)
        }
    generated = generations(model, inputs, pad_token_id=eos)
    reference = {
        "prompts": PROMPTS,
        "tokenizer_ids": [tokenizer.encode(text) for text in PROMPTS],
        "inputs": inputs,
        "new_tokens": NEW_TOKENS,
        "num_beams": NUM_BEAMS,
        "greedy": [row[len(ids) :] for row, ids in zip(generated["greedy"], inputs, strict=True)],
        "beam": [row[len(ids) :] for row, ids in zip(generated["beam"], inputs, strict=True)],
        "greedy_text": [
            tokenizer.decode(row[len(ids) :], skip_special_tokens=True)
            for row, ids in zip(generated["greedy"], inputs, strict=True)
        ],
    }
    write_reference(directory, reference, logits)


def train_spm(lines: list[str], prefix: str, vocab_size: int) -> None:
    sentencepiece.SentencePieceTrainer.train(
        sentence_iterator=iter(lines),
        model_prefix=prefix,
        vocab_size=vocab_size,
        model_type="unigram",
        character_coverage=1.0,
        pad_id=-1,
        bos_id=-1,
        eos_id=2,
        unk_id=1,
        control_symbols=[],
        minloglevel=2,
    )


def make_marian(directory: pathlib.Path) -> None:
    directory.mkdir(exist_ok=True)
    english = [line for line in ENGLISH.read_text(encoding="utf-8").splitlines() if line.strip()]
    phones = [line.split("\t")[1] for line in PHONES.read_text(encoding="utf-8").splitlines()]
    with tempfile.TemporaryDirectory() as scratch:
        train_spm(english, f"{scratch}/source", 256)
        train_spm(phones, f"{scratch}/target", 48)
        pieces = []
        for name in ("source", "target"):
            processor = sentencepiece.SentencePieceProcessor(model_file=f"{scratch}/{name}.model")
            pieces += [processor.id_to_piece(i) for i in range(processor.get_piece_size())]
            (directory / f"{name}.spm").write_bytes(
                pathlib.Path(f"{scratch}/{name}.model").read_bytes()
            )
    vocabulary = ["</s>", "<unk>"]
    for piece in pieces:
        if piece not in vocabulary and piece not in ("<s>", "<pad>"):
            vocabulary.append(piece)
    vocabulary.append("<pad>")
    (directory / "vocab.json").write_text(
        json.dumps({piece: i for i, piece in enumerate(vocabulary)}, ensure_ascii=False, indent=1),
        encoding="utf-8",
    )
    tokenizer = transformers.MarianTokenizer(
        str(directory / "source.spm"), str(directory / "target.spm"), str(directory / "vocab.json")
    )
    pad = tokenizer.pad_token_id

    torch.manual_seed(0)
    config = transformers.MarianConfig(
        vocab_size=len(vocabulary),
        d_model=64,
        encoder_layers=2,
        decoder_layers=2,
        encoder_attention_heads=4,
        decoder_attention_heads=4,
        encoder_ffn_dim=128,
        decoder_ffn_dim=128,
        max_position_embeddings=64,
        activation_function="swish",
        scale_embedding=True,
        share_encoder_decoder_embeddings=True,
        init_std=MARIAN_INIT_STD,
        pad_token_id=pad,
        eos_token_id=0,
        decoder_start_token_id=pad,
        forced_eos_token_id=None,
    )
    model = transformers.MarianMTModel(config).eval()
    with torch.no_grad():
        for name, parameter in model.named_parameters():
            if name.endswith(("bias", "layer_norm.weight")):
                parameter.add_(torch.randn_like(parameter) * 0.1)
        model.final_logits_bias.add_(torch.randn_like(model.final_logits_bias) * 0.1)
    model.save_pretrained(directory)
    tokenizer.save_pretrained(directory)

    inputs = [tokenizer(text).input_ids for text in SOURCES]  # pieces + </s>
    decoder_inputs = [pad] + inputs[0][:5]  # any target ids, teacher-forced
    with torch.no_grad():
        logits = {
            f"logits_{i}": model(
                input_ids=torch.tensor([ids]), decoder_input_ids=torch.tensor([decoder_inputs])
            )
            .logits[0]
            .numpy()
            for i, ids in enumerate(inputs)
        }
    generated = generations(model, inputs)
    # generate() returns the decoder start token first.
    reference = {
        "sources": SOURCES,
        "inputs": inputs,
        "decoder_inputs": decoder_inputs,
        "new_tokens": NEW_TOKENS,
        "num_beams": NUM_BEAMS,
        "greedy": [row[1:] for row in generated["greedy"]],
        "beam": [row[1:] for row in generated["beam"]],
        "greedy_text": [
            tokenizer.decode(row, skip_special_tokens=True) for row in generated["greedy"]
        ],
    }
    write_reference(directory, reference, logits)


if __name__ == "__main__":
    make_gpt2(HERE / "hf_gpt2")
    make_marian(HERE / "hf_marian")
