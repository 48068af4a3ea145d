"""`load_task("builtin:dates-zh", family)`: the shape per family and its tokenizers."""

import pytest

from transformer_zoo.data import ClassificationExample, PromptCompletion, TranslationPair, load_task


@pytest.fixture(scope="module")
def tasks():
    return {
        f: load_task("builtin:dates-zh", f)
        for f in ("encoder-decoder", "decoder-only", "encoder-only")
    }


def test_each_family_gets_its_shape_of_the_same_sources(tasks):
    pair = tasks["encoder-decoder"].test[0]
    assert isinstance(pair, TranslationPair)
    prompt = tasks["decoder-only"].test[0]
    assert isinstance(prompt, PromptCompletion)
    assert (prompt.prompt, prompt.completion) == (f"{pair.source} =>", pair.target)
    classified = tasks["encoder-only"].test[:2]
    assert all(isinstance(e, ClassificationExample) and e.text == pair.source for e in classified)
    assert tasks["encoder-only"].label_names == ("incorrect", "correct")
    assert tasks["encoder-decoder"].shared_targets["all"] > 0


def test_encoder_decoder_gets_separate_vocabularies_and_the_others_a_shared_one(tasks):
    source, target = tasks["encoder-decoder"].fit_tokenizers()
    assert source is not target
    # 500 is a soft limit: the English side has fewer distinct words than that.
    assert source.vocabulary_size <= 500
    unknown = [e.source for e in tasks["encoder-decoder"].test if 1 in source.encode(e.source)]
    assert not unknown  # every character of the test sources occurs in training
    # The Chinese target is character-level: every piece is one character (or "▁").
    assert all(len(target.id_to_piece(i)) == 1 for i in range(5, target.vocabulary_size))
    shared, same = tasks["decoder-only"].fit_tokenizers(vocabulary_size=300)
    assert shared is same and shared.encode("2021年3月5日").count(1) == 0


def test_evaluate_reads_a_test_file_of_yours_for_builtin_and_imported_runs(tmp_path):
    """`evaluate RUN --test FILE` scores a translation run on the built-in data, or an
    imported Marian, on pairs of yours; a built-in decoder-only run (prompt => completion
    pairs) and an imported encoder without labels have nothing to read such a file as."""
    from transformer_zoo.data.run_task import run_task
    from transformer_zoo.run_directory import RunConfig, RunError

    pairs = tmp_path / "pairs.tsv"
    pairs.write_text("March 5, 2021\t2021年3月5日\nMay 1, 1999\t1999年5月1日\n", encoding="utf-8")
    for data in ("builtin:dates-zh", None):
        config = RunConfig(family="encoder-decoder", preset="p", task="translation", data=data)
        task = run_task(config, test=str(pairs))
        assert [(e.source, e.target) for e in task.test] == [
            ("March 5, 2021", "2021年3月5日"),
            ("May 1, 1999", "1999年5月1日"),
        ]
    builtin = RunConfig(
        family="decoder-only", preset="p", task="language-model", data="builtin:dates-zh"
    )
    with pytest.raises(ValueError, match="prompt => completion pairs"):
        run_task(builtin, test=str(pairs))
    encoder = RunConfig(family="encoder-only", preset="p", task="embedding", data=None)
    with pytest.raises(RunError, match="no test split to score it on"):
        run_task(encoder, test=str(pairs))


def test_a_word_tokenizer_is_refused_for_a_token_stream_and_reads_lines(tmp_path):
    """On a token stream (newlines kept) the word model lost every newline into <unk>
    (`sat\\non` one unknown word), silently; read by lines, the words are whole."""
    path = tmp_path / "stream.txt"
    lines = [f"the cat sat\ton mat {i}" for i in range(30)]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    stream = load_task(str(path), "decoder-only", stream=True)
    with pytest.raises(ValueError, match=r"cannot read a token stream.*\(--windows lines\)"):
        stream.fit_tokenizers(vocabulary_size=100, kind="word")
    task = load_task(str(path), "decoder-only")
    tokenizer, _ = task.fit_tokenizers(vocabulary_size=100, kind="word")
    for line in (e.text for e in task.train):
        ids = tokenizer.encode(line)
        assert tokenizer.unk_id not in ids and len(ids) == len(line.split())
        assert tokenizer.decode(ids) == " ".join(line.split())


def test_limit_task_refuses_a_count_that_is_no_positive_integer(tasks):
    """`limit_task(task, -5)` had kept all but 5 training examples (a slice from the
    end) and `limit_task(task, 0)` none; a numpy integer is a count like an int."""
    import numpy as np

    from transformer_zoo.data import limit_task

    task = tasks["decoder-only"]
    assert len(task.train[:-5]) == len(task.train) - 5  # what -5 had kept
    for wrong in (-5, 0, 10.5, "10", True):
        with pytest.raises(
            ValueError,
            match=rf"`max_examples` must be an integer ≥ 1 or None\. Received: max_examples={wrong!r}$",
        ):
            limit_task(task, wrong)
    assert len(limit_task(task, np.int64(10)).train) == 10
    assert limit_task(task, None) is task


def test_load_task_refuses_a_seed_that_is_no_integer_at_least_zero(tasks):
    """random.Random seeds the str "1" otherwise than 1 (another shuffle of a file's
    splits), and -1 as 1; a numpy integer seeds as its int."""
    import random

    import numpy as np

    assert random.Random("1").random() != random.Random(1).random()
    assert random.Random(-1).random() == random.Random(1).random()
    for wrong in ("1", -1, 1.5, True, None):
        with pytest.raises(
            ValueError, match=rf"^`seed` must be an integer ≥ 0\. Received: seed={wrong!r}$"
        ):
            load_task("builtin:dates-zh", "decoder-only", wrong)
    same = load_task("builtin:dates-zh", "decoder-only", np.int64(0))
    assert same.train[:5] == tasks["decoder-only"].train[:5]
