"""The tf.data pipelines: teacher forcing, loss masks, bucketing, truncation, packing,
and agreement with `transformer_zoo.text.formats` (what generation and serving feed)."""

import dataclasses
import logging
import warnings
from collections import Counter
from functools import partial

import keras
import numpy as np
import pytest
import tensorflow as tf
from hypothesis import given
from hypothesis import strategies as st

from transformer_zoo.data import PromptCompletion
from transformer_zoo.data.bucketing import bucket_boundaries
from transformer_zoo.data.builtin.dates_zh import LABELS
from transformer_zoo.data.masked_lm import masked_lm_dataset
from transformer_zoo.data.pipelines import (
    classification_dataset,
    language_model_dataset,
    stream_dataset,
    translation_dataset,
)
from transformer_zoo.errors import InputError
from transformer_zoo.models import (
    DecoderOnly,
    EncoderDecoder,
    EncoderOnly,
    EncoderOnlyClassifier,
    EncoderOnlyMaskedLM,
)
from transformer_zoo.text.formats import (
    language_model_example,
    pair_budget,
    pair_ids,
    prompt_ids,
    source_ids,
)
from transformer_zoo.text.wordpiece import WordPieceTokenizer
from transformer_zoo.train.recipe import MaskedSparseCategoricalCrossentropy


def _unpad(row) -> tuple:
    row = list(np.asarray(row))
    while row and row[-1] == 0:
        row.pop()
    return tuple(int(i) for i in row)


def _batches(dataset):
    return [
        tuple(
            {k: v.numpy() for k, v in part.items()} if isinstance(part, dict) else part.numpy()
            for part in batch
        )
        for batch in dataset
    ]


def _check_masks(inputs, prefix=""):
    ids = inputs[f"{prefix}token_ids"]
    # int32 1/0, not bool: MirroredStrategy cannot aggregate boolean inputs.
    assert inputs[f"{prefix}padding_mask"].dtype == np.int32
    np.testing.assert_array_equal(inputs[f"{prefix}padding_mask"], ids != 0)
    for row in ids:  # padding only at the end of a row
        nonzero = np.flatnonzero(row)
        assert len(nonzero) == 0 or nonzero[-1] == len(nonzero) - 1


def test_translation_is_teacher_forced_and_matches_the_formats(
    dates, source_tokenizer, target_tokenizer
):
    pairs = dates.pairs("valid")
    got = Counter()
    for inputs, labels, weights in _batches(
        translation_dataset(pairs, source_tokenizer, target_tokenizer, 16)
    ):
        _check_masks(inputs, "encoder_")
        _check_masks(inputs, "decoder_")
        np.testing.assert_array_equal(weights, (labels != 0).astype(np.float32))
        assert inputs["decoder_token_ids"].shape == labels.shape
        for enc, dec, lab in zip(
            inputs["encoder_token_ids"], inputs["decoder_token_ids"], labels, strict=True
        ):
            got[_unpad(enc), _unpad(dec), _unpad(lab)] += 1
    expected = Counter()
    for pair in pairs:
        target = target_tokenizer.encode(pair.target)
        expected[tuple(source_ids(source_tokenizer, pair.source)), (2, *target), (*target, 3)] += 1
    assert got == expected


def test_examples_of_similar_length_share_a_batch(dates, source_tokenizer, target_tokenizer):
    edges = bucket_boundaries(128)
    dataset = translation_dataset(dates.pairs("train"), source_tokenizer, target_tokenizer, 32)
    for inputs, labels, _ in _batches(dataset):
        lengths = np.maximum((inputs["encoder_token_ids"] != 0).sum(1), (labels != 0).sum(1))
        assert len(set(np.searchsorted(edges, lengths, side="right"))) == 1
        assert (
            inputs["encoder_token_ids"].shape[1] == (inputs["encoder_token_ids"] != 0).sum(1).max()
        )


def test_pad_to_bucket_boundary_pads_to_the_bucket_edges(dates, source_tokenizer, target_tokenizer):
    widths = {edge - 1 for edge in bucket_boundaries(64)}
    dataset = translation_dataset(
        dates.pairs("valid"),
        source_tokenizer,
        target_tokenizer,
        8,
        64,
        64,
        pad_to_bucket_boundary=True,
    )
    for inputs, labels, _ in _batches(dataset):
        assert inputs["encoder_token_ids"].shape[1] in widths and labels.shape[1] in widths


def test_truncation_respects_the_maximum_and_drops_the_cut_eos(
    dates, source_tokenizer, target_tokenizer
):
    pairs = dates.pairs("valid")
    dataset = translation_dataset(pairs, source_tokenizer, target_tokenizer, 16, 6, 5)
    rows = 0
    for inputs, labels, _ in _batches(dataset):
        assert inputs["encoder_token_ids"].shape[1] <= 6 and labels.shape[1] <= 5
        for enc in inputs["encoder_token_ids"]:
            assert _unpad(enc)[-1] == 3
            rows += 1
    assert rows == len(pairs)
    long_target = next(p for p in pairs if len(target_tokenizer.encode(p.target)) >= 5)
    (inputs, labels, _) = _batches(
        translation_dataset([long_target], source_tokenizer, target_tokenizer, 1, 6, 5)
    )[0]
    assert labels.shape == (1, 5) and 3 not in labels and labels[0, -1] != 0


def test_cut_rows_are_teacher_forced_like_the_uncut_ones(dates, source_tokenizer, target_tokenizer):
    """With T = max_target_length, every row, cut or not, is decoder = ([bos] + target)[:T]
    and labels = (target + [eos])[:T], so decoder[1:] == labels[:-1] (the encoder:
    (source[:S - 1] + [eos]))."""
    pairs = dates.pairs("valid")
    got = Counter()
    for inputs, labels, _ in _batches(
        translation_dataset(pairs, source_tokenizer, target_tokenizer, 16, 6, 5)
    ):
        for enc, dec, lab in zip(
            inputs["encoder_token_ids"], inputs["decoder_token_ids"], labels, strict=True
        ):
            got[_unpad(enc), _unpad(dec), _unpad(lab)] += 1
    expected, cut = Counter(), 0
    for pair in pairs:
        target = target_tokenizer.encode(pair.target)
        source = source_tokenizer.encode(pair.source)
        cut += len(target) >= 5
        expected[(*source[:5], 3), (2, *target)[:5], (*target, 3)[:5]] += 1
    assert cut > 0 and got == expected


def test_shuffling_is_deterministic_for_a_seed_and_changes_every_epoch(
    dates, source_tokenizer, target_tokenizer
):
    def epochs(seed, count):
        dataset = translation_dataset(
            dates.pairs("valid"), source_tokenizer, target_tokenizer, 8, shuffle=True, seed=seed
        )
        return [
            [_unpad(r) for b in _batches(dataset) for r in b[0]["encoder_token_ids"]]
            for _ in range(count)
        ]

    first, second = epochs(1, 2)
    assert epochs(1, 1)[0] == first
    assert first != second and sorted(first) == sorted(second)
    assert epochs(2, 1)[0] != first


def test_decoder_only_loss_covers_only_the_completion(dates, shared_tokenizer):
    examples = dates.prompt_completions("valid")
    got = Counter()
    for inputs, labels, weights in _batches(language_model_dataset(examples, shared_tokenizer, 16)):
        _check_masks(inputs)
        np.testing.assert_array_equal(weights, (labels != 0).astype(np.float32))
        for ids, lab in zip(inputs["token_ids"], labels, strict=True):
            got[_unpad(ids), tuple(int(i) for i in lab[: len(_unpad(ids))])] += 1
    expected = Counter()
    for e in examples:
        prompt, completion = (
            shared_tokenizer.encode(e.prompt),
            shared_tokenizer.encode(e.completion),
        )
        inputs = prompt_ids(shared_tokenizer, e.prompt) + completion
        expected[tuple(inputs), (0,) * len(prompt) + (*completion, 3)] += 1
    assert got == expected


def test_decoder_only_can_train_on_the_prompt_too(dates, shared_tokenizer):
    example = dates.prompt_completions("valid")[0]
    dataset = language_model_dataset([example], shared_tokenizer, completion_only_loss=False)
    (inputs, labels, _) = _batches(dataset)[0]
    sequence = (
        [2]
        + shared_tokenizer.encode(example.prompt)
        + shared_tokenizer.encode(example.completion)
        + [3]
    )
    assert list(inputs["token_ids"][0]) == sequence[:-1] and list(labels[0]) == sequence[1:]


def test_plain_text_trains_on_every_token_and_cut_away_completions_are_dropped(shared_tokenizer):
    text = PromptCompletion("", "March 5, 2021")
    (inputs, labels, weights) = _batches(language_model_dataset([text], shared_tokenizer))[0]
    pieces = shared_tokenizer.encode(text.completion)
    assert list(inputs["token_ids"][0]) == [2, *pieces] and list(labels[0]) == [*pieces, 3]
    assert weights.all()
    long_prompt = PromptCompletion("the fifth of March, 2021 =>", "2021年3月5日")
    kept = [text, long_prompt]
    batches = _batches(language_model_dataset(kept, shared_tokenizer, max_length=4))
    assert sum(len(b[1]) for b in batches) == 1  # the long prompt left no completion


def test_classification_packs_pairs_like_the_formats(dates, shared_tokenizer):
    examples = dates.classification("valid")
    got = Counter()
    for inputs, labels in _batches(classification_dataset(examples, shared_tokenizer, LABELS, 32)):
        _check_masks(inputs)
        for ids, segments, label in zip(
            inputs["token_ids"], inputs["segment_ids"], labels, strict=True
        ):
            n = len(_unpad(ids))
            got[_unpad(ids), tuple(int(s) for s in segments[:n]), int(label)] += 1
    expected = Counter()
    for e in examples:
        ids, segments = pair_ids(shared_tokenizer, e.text, e.text2)
        expected[tuple(ids), tuple(segments), LABELS.index(e.label)] += 1
    assert got == expected


@pytest.mark.parametrize("segments", [0, 1])
def test_a_model_of_fewer_than_two_segments_trains_on_pairs_as_it_serves_them(
    dates, shared_tokenizer, segments
):
    """A one-segment model (RoBERTa's `type_vocab_size` 1) was fed segment 1 for a pair's
    second text and failed mid-fit; a model without segments was fed `segment_ids`, which
    it refuses. The rows are the formats' for that model (`pair_ids`), which serving reads."""
    examples = dates.classification("valid")[:8]
    model = EncoderOnlyClassifier(
        EncoderOnly(shared_tokenizer.vocabulary_size, 1, 2, 16, 32, type_vocabulary_size=segments),
        num_classes=len(LABELS),
    )
    data = classification_dataset(
        examples, shared_tokenizer, LABELS, 8, type_vocabulary_size=segments, keep_order=True
    )
    inputs, _ = next(iter(data))
    assert ("segment_ids" in inputs) == bool(segments)
    for row, e in zip(inputs.get("segment_ids", inputs["token_ids"]), examples, strict=True):
        ids, types = pair_ids(shared_tokenizer, e.text, e.text2, type_vocabulary_size=segments)
        assert e.text2 is not None and types == [0] * len(ids)
        assert not segments or list(row[: len(ids)]) == types
    assert tuple(model(inputs).shape) == (8, len(LABELS))  # every segment id in range


@pytest.mark.parametrize("max_length", [4, 7, 12])
def test_long_texts_and_pairs_are_trimmed_like_the_formats(dates, shared_tokenizer, max_length):
    examples = dates.classification("valid")[:40]
    examples += [type(e)(e.label, e.text) for e in examples[:10]]  # single texts too
    got = Counter()
    for inputs, _ in _batches(
        classification_dataset(examples, shared_tokenizer, LABELS, 8, max_length)
    ):
        assert inputs["token_ids"].shape[1] <= max_length
        for ids, segments in zip(inputs["token_ids"], inputs["segment_ids"], strict=True):
            n = len(_unpad(ids))
            got[_unpad(ids), tuple(int(s) for s in segments[:n])] += 1
    expected = Counter(
        tuple(map(tuple, pair_ids(shared_tokenizer, e.text, e.text2, max_length))) for e in examples
    )
    assert got == expected


def _longest_first(length_a, length_b, budget):
    """Hugging Face tokenizers' `TruncationStrategy::LongestFirst` (utils/truncation.rs),
    transcribed: n1 the shorter length, n2 the longer."""
    if length_a + length_b <= budget:
        return length_a, length_b
    n1, n2 = length_a, length_b
    swap = n1 > n2
    if swap:
        n1, n2 = n2, n1
    n2 = n1 if n1 > budget else max(n1, budget - n1)
    if n1 + n2 > budget:
        n1 = budget // 2
        n2 = n1 + budget % 2
    if swap:
        n1, n2 = n2, n1
    return min(length_a, n1), min(length_b, n2)


@given(st.integers(0, 60), st.integers(0, 60), st.integers(0, 80))
def test_pair_budget_is_the_longest_first_truncation_of_hugging_face_tokenizers(a, b, budget):
    assert pair_budget(a, b, budget) == _longest_first(a, b, budget)


def test_unknown_labels_and_empty_inputs_are_rejected(dates, shared_tokenizer, source_tokenizer):
    with pytest.raises(ValueError, match="not in `label_names`"):
        classification_dataset(dates.classification("valid"), shared_tokenizer, ["correct"])
    with pytest.raises(ValueError, match="empty"):
        translation_dataset([], source_tokenizer, source_tokenizer)
    with pytest.raises(ValueError, match="max_source_length"):
        translation_dataset(
            dates.pairs("valid"), source_tokenizer, source_tokenizer, max_source_length=1
        )
    with pytest.raises(ValueError, match="batch_size"):
        language_model_dataset(dates.prompt_completions("valid"), shared_tokenizer, batch_size=0)


def test_keep_order_batches_the_examples_in_their_order(
    dates, shared_tokenizer, source_tokenizer, target_tokenizer
):
    """Unshuffled, the batches still group examples by length: `model.predict` on one
    scored against the examples in their order got 0.51 accuracy for a perfect model."""
    examples = dates.classification("valid")
    labels = [LABELS.index(e.label) for e in examples]
    batches = _batches(classification_dataset(examples, shared_tokenizer, LABELS, 8))
    assert [int(y) for _, y in batches for y in y] != labels  # grouped by length
    ordered = classification_dataset(examples, shared_tokenizer, LABELS, 8, keep_order=True)
    assert [int(y) for _, y in _batches(ordered) for y in y] == labels
    pairs = dates.pairs("valid")
    ordered = translation_dataset(pairs, source_tokenizer, target_tokenizer, 8, keep_order=True)
    sources = [_unpad(ids) for inputs, _, _ in _batches(ordered) for ids in inputs["encoder_token_ids"]]  # fmt: skip
    assert sources == [tuple(source_ids(source_tokenizer, p.source)) for p in pairs]
    with pytest.raises(ValueError, match="keep_order"):
        classification_dataset(examples, shared_tokenizer, LABELS, shuffle=True, keep_order=True)


def test_numpy_sizes_are_taken_and_a_foreign_tokenizer_is_refused(dates, source_tokenizer):
    """np.int64 sizes were refused; a Marian tokenizer's ids were silently wrong here."""
    from transformer_zoo.text.wordpiece import WordPieceTokenizer

    pairs = dates.pairs("valid")[:4]
    data = translation_dataset(
        pairs, source_tokenizer, source_tokenizer, np.int64(2), max_source_length=np.int64(16)
    )
    assert len(_batches(data)) == 2
    foreign = WordPieceTokenizer(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "a"], max_length=8)
    with pytest.raises(ValueError, match="take this package's SentencePiece `Tokenizer`"):
        translation_dataset(pairs, foreign, foreign)


def test_a_text_stream_is_pointed_to_stream_dataset(shared_tokenizer):
    """`language_model_dataset(task.train)` of a stream task raised AttributeError."""
    from transformer_zoo.data.examples import TextStream

    with pytest.raises(ValueError, match=r"stream_dataset\(stream.token_ids\(tokenizer\)"):
        language_model_dataset([TextStream("some text to read as one stream")], shared_tokenizer)


@pytest.fixture
def pipeline_warnings():
    """The pipelines' warning lines, read at their own logger: the command line's handler
    keeps the library's records from reaching the root logger, and so `caplog`."""
    records = []
    handler = logging.Handler(logging.WARNING)
    handler.emit = records.append
    logger = logging.getLogger("transformer_zoo.data.pipelines")
    logger.addHandler(handler)
    yield lambda: [r.getMessage() for r in records]
    logger.removeHandler(handler)


@pytest.mark.parametrize("max_length", [8, 10, 40])
def test_examples_cut_to_no_completion_token_are_dropped_and_counted(
    dates, shared_tokenizer, max_length, pipeline_warnings
):
    """They were dropped by an in-graph filter that counted nothing: a dataset could
    come out empty, and `model.fit` then failed on it or trained on nothing."""
    examples = dates.prompt_completions("valid")
    rows = [
        language_model_example(shared_tokenizer, e.prompt, e.completion, max_length)
        for e in examples
    ]
    expected = Counter((tuple(ids), tuple(labels)) for ids, labels in rows if any(labels))
    got = Counter()
    for inputs, labels, _ in _batches(
        language_model_dataset(examples, shared_tokenizer, 16, max_length=max_length)
    ):
        for ids, lab in zip(inputs["token_ids"], labels, strict=True):
            got[_unpad(ids), tuple(int(i) for i in lab[: len(_unpad(ids))])] += 1
    assert got == expected
    dropped = len(examples) - expected.total()
    lines = pipeline_warnings()
    if dropped:
        assert len(lines) == 1 and lines[0].startswith(
            f"{dropped} of {len(examples)} examples have a prompt of max_length={max_length} "
        )
    else:
        assert lines == []


def test_a_max_length_that_leaves_no_completion_at_all_is_refused(dates, shared_tokenizer):
    examples = dates.prompt_completions("valid")
    shortest = min(len(shared_tokenizer.encode(e.prompt)) for e in examples)

    def completions_left(max_length):  # by `text.formats`, the reference
        return sum(
            any(language_model_example(shared_tokenizer, e.prompt, e.completion, max_length)[1])
            for e in examples
        )

    assert completions_left(shortest) == 0 and completions_left(shortest + 1) > 0
    with pytest.raises(InputError, match="no completion to train on: raise max_length"):
        language_model_dataset(examples, shared_tokenizer, max_length=shortest)
    assert _batches(language_model_dataset(examples, shared_tokenizer, max_length=shortest + 1))


def _refused(pipeline, model) -> bool:
    try:
        pipeline(model=model)
    except InputError:
        return True
    return False


def _keras_fails(model, data, loss) -> bool:
    """Whether Keras' evaluation of `model` on `data` fails: on a CPU, TensorFlow's gather
    of an id or position past the model's tables, or a label past its classes."""
    model.compile(loss=loss)
    try:
        with warnings.catch_warnings():  # the pipelines' length is unknown to Keras
            warnings.filterwarnings("ignore", message="Your input ran out of data")
            model.evaluate(data, verbose=0)
    except tf.errors.InvalidArgumentError:
        return True
    return False


def test_random_windows_start_anywhere_the_stream_holds_a_whole_window():
    """`windows="random"` draws starts uniformly from every start a window of L tokens
    fits at, 0 to len - L (nanoGPT's `get_batch`), the last one included: over many passes
    on a stream of 8 and L = 4, each of the 5 starts is drawn."""
    ids = np.arange(1, 9, dtype=np.int32)  # the token at position s is s + 1
    data = stream_dataset(ids, 2, 4, windows="random", seed=0)
    starts = set()
    for _ in range(40):  # a pass holds 8 // 4 = 2 windows, new ones every pass
        for _, labels, _ in data.as_numpy_iterator():
            for row in labels:
                np.testing.assert_array_equal(row, ids[row[0] - 1 : row[0] + 3])
                starts.add(int(row[0]) - 1)
    assert starts == set(range(len(ids) - 4 + 1))


def _largest_id(data) -> int:
    """The largest id of the inputs and labels of `data`'s batches."""
    return max(max(int(x["token_ids"].max()), int(y.max())) for x, y, _ in _batches(data))


@pytest.mark.parametrize("smaller", [None, "vocabulary_size", "max_length"])
@pytest.mark.parametrize("source", ["lines", "stream"])
def test_a_decoder_smaller_than_the_data_is_refused_where_keras_fails_on_it(
    dates, shared_tokenizer, source, smaller
):
    """A model smaller than the data failed mid-`fit` in a TensorFlow gather that names
    no size; on a GPU the ids or positions past its tables embed as zeros, silently."""
    examples = dates.prompt_completions("valid")[:64]
    if source == "lines":
        pipeline = partial(language_model_dataset, examples, shared_tokenizer, 64, 12)
    else:
        ids = np.concatenate([shared_tokenizer.encode(e.text) for e in examples]).astype(np.int32)
        pipeline = partial(stream_dataset, ids, 64, 12, windows="epoch")
    data = pipeline()
    assert max(inputs["token_ids"].shape[1] for inputs, *_ in _batches(data)) == 12
    sizes = {"vocabulary_size": shared_tokenizer.vocabulary_size, "max_length": 12}
    if smaller:  # the largest id, or the last position, is one past the model's table
        sizes[smaller] = {"vocabulary_size": _largest_id(data), "max_length": 11}[smaller]
    model = DecoderOnly(num_layers=1, num_heads=2, hidden_dim=8, intermediate_dim=16, **sizes)
    loss = MaskedSparseCategoricalCrossentropy(pad_id=None if source == "stream" else 0)
    fails = _keras_fails(model, data, loss)
    assert fails == (smaller is not None)
    assert _refused(pipeline, model) == fails


@pytest.mark.parametrize("smaller", [None, "target_vocabulary_size"])
def test_a_translation_model_smaller_than_the_targets_is_refused_where_keras_fails_on_it(
    dates, source_tokenizer, target_tokenizer, smaller
):
    pairs = dates.pairs("valid")[:64]
    pipeline = partial(translation_dataset, pairs, source_tokenizer, target_tokenizer, 64)
    data = pipeline()
    target = target_tokenizer.vocabulary_size
    if smaller:
        target = max(int(labels.max()) for _, labels, _ in _batches(data))
    model = EncoderDecoder(
        source_tokenizer.vocabulary_size, 1, 2, 8, 16, 128, target_vocabulary_size=target
    )
    fails = _keras_fails(model, data, MaskedSparseCategoricalCrossentropy())
    assert fails == (smaller is not None)
    assert _refused(pipeline, model) == fails


@pytest.mark.parametrize("num_classes", [len(LABELS), len(LABELS) - 1])
def test_a_classifier_with_fewer_classes_than_labels_is_refused_where_keras_fails_on_it(
    dates, shared_tokenizer, num_classes
):
    examples = dates.classification("valid")[:64]
    pipeline = partial(classification_dataset, examples, shared_tokenizer, LABELS, 64)
    backbone = EncoderOnly(shared_tokenizer.vocabulary_size, 1, 2, 8, 16, 128)
    model = EncoderOnlyClassifier(backbone, num_classes)
    loss = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    fails = _keras_fails(model, pipeline(), loss)
    assert fails == (num_classes < len(LABELS))
    assert _refused(pipeline, model) == fails


@pytest.mark.parametrize("max_length", [12, 11])
def test_a_masked_lm_shorter_than_its_rows_is_refused_where_keras_fails_on_it(
    dates, shared_tokenizer, max_length
):
    texts = [(p.source, p.target) for p in dates.pairs("valid")[:64]]
    pipeline = partial(masked_lm_dataset, texts, shared_tokenizer, 64, 12)
    backbone = EncoderOnly(shared_tokenizer.vocabulary_size, 1, 2, 8, 16, max_length)
    model = EncoderOnlyMaskedLM(backbone)
    fails = _keras_fails(model, pipeline(), MaskedSparseCategoricalCrossentropy())
    assert fails == (max_length < 12)
    assert _refused(pipeline, model) == fails


def _with_text(example, field: str, text: str):
    return dataclasses.replace(example, **{field: text}) if field else text


@pytest.mark.parametrize(
    "pipeline, field",
    [
        ("translation", "target"),
        ("language model", "completion"),
        ("classification", "text2"),
        ("classification, WordPiece", "text"),
        ("masked LM", None),
    ],
)
def test_a_text_that_is_not_utf8_is_named_by_its_example_index(
    dates, shared_tokenizer, pipeline, field
):
    """A lone surrogate (an undecodable byte, as Python's `surrogateescape` keeps it)
    failed in TensorFlow's or the tokenizer's conversion, which named no example."""
    index, bad = 37, "2021\udcff"
    if pipeline == "translation":
        examples = dates.pairs("valid")
        make = partial(
            translation_dataset,
            source_tokenizer=shared_tokenizer,
            target_tokenizer=shared_tokenizer,
        )
    elif pipeline == "language model":
        examples = dates.prompt_completions("valid")
        make = partial(language_model_dataset, tokenizer=shared_tokenizer, max_length=9)
        # One the cut keeps after one it drops: the index is still the one in `examples`.
        kept = [
            any(language_model_example(shared_tokenizer, e.prompt, e.completion, 9)[1])
            for e in examples
        ]
        index = next(i for i in range(len(kept)) if kept[i] and not all(kept[:i]))
    elif pipeline == "masked LM":
        examples = [p.source for p in dates.pairs("valid")]
        make = partial(masked_lm_dataset, tokenizer=shared_tokenizer)
    else:
        examples = dates.classification("valid")
        tokenizer = shared_tokenizer
        if "WordPiece" in pipeline:
            pieces = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "2021"]
            tokenizer = WordPieceTokenizer(pieces, max_length=128)
        make = partial(classification_dataset, tokenizer=tokenizer, label_names=LABELS)
    examples = list(examples)
    examples[index] = _with_text(examples[index], field, bad)
    with pytest.raises(InputError, match=f"example {index} is not valid UTF-8") as error:
        make(examples)
    assert error.value.index == index


def test_the_in_graph_tokenizer_writes_nothing_to_the_processs_stderr(capfd):
    """tensorflow_text's SentencePiece wrote `normalizer.cc(51) LOG(INFO)
    precompiled_charsmap is empty` straight to file descriptor 2 for a target tokenizer
    (identity normalization): the first line of every `train --family encoder-decoder`."""
    from transformer_zoo.data.bucketing import in_graph_tokenizer
    from transformer_zoo.text import train_tokenizer

    tokenizer = train_tokenizer(["March 5, 2021 abc def"] * 50, 30, normalization="identity")
    capfd.readouterr()
    in_graph_tokenizer(tokenizer)
    assert capfd.readouterr().err == ""
