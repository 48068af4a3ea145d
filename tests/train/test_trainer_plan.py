"""How long a run trains: `plan_steps`, and the warning for examples the pipelines cut."""

import keras
import pytest
from keras import ops

from transformer_zoo.data.tasks import limit_task
from transformer_zoo.train.config import TrainConfig
from transformer_zoo.train.recipe.optimizers import make_optimizer
from transformer_zoo.train.step_plan import plan_steps


def test_an_epoch_is_whole_executions_so_the_progress_bar_and_the_steps_agree():
    """23 batches with 10 steps per execution showed `30/23` and ran 30 steps."""
    config = TrainConfig("encoder-decoder", data="pairs.tsv", epochs=3, warmup_steps=5)
    plan = plan_steps(config, batches=23, steps_per_execution=10)
    assert (plan.epochs, plan.steps_per_epoch, plan.warmup_steps) == (3, 30, 5)
    assert plan.chosen == ()


def test_without_epochs_or_warmup_a_user_file_trains_about_a_thousand_steps():
    config = TrainConfig("encoder-decoder", data="pairs.tsv")  # the user gave neither
    plan = plan_steps(config, batches=22, steps_per_execution=10)
    assert plan.steps_per_epoch == 30 and plan.epochs == 34  # 1,020 steps
    assert plan.warmup_steps == 102  # 10% of them, where the old default was a fixed 400
    assert config.optimizer == "adamw-cosine" and config.learning_rate == 2e-3
    line = plan.describe(config, config.dropout)
    assert "34 epochs of 30 steps (1020 steps" in line and "Chosen for the data" in line


@pytest.mark.parametrize(
    "family, preset, lines",
    [
        ("encoder-decoder", "tiny", "the tokenizers on the 54 training examples"),
        ("encoder-only", "tiny", "the tokenizer on the 54 training examples"),
        ("decoder-only", "tiny", "the tokenizer on the training text ("),
    ],
)
def test_preparing_a_file_says_what_it_does_before_it_does_it(
    tmp_path, capsys, family, preset, lines
):
    """A 1M-line TSV was 138 s of silence before the first line (reading it, training the
    tokenizers, counting the batches); now each stage has a line first."""
    from transformer_zoo.train.prepared import prepare

    rows = [f"{i} cats\t{i} chats" for i in range(60)]
    if family == "encoder-only":
        rows = [f"{i % 2}\t{i} cats and dogs" for i in range(60)]
    if family == "decoder-only":
        rows = [f"{i} cats and {i} dogs" for i in range(600)]
    data = tmp_path / "data.txt"
    data.write_text("\n".join(rows) + "\n", encoding="utf-8")
    overrides = {"max_length": 16} if family == "decoder-only" else {}
    config = TrainConfig(family, preset, data=str(data), out=str(tmp_path / "run"),
                         overrides=overrides)  # fmt: skip
    prepare(config)
    said = capsys.readouterr().out.splitlines()
    assert said[0] == f"Reading {data} …"
    assert said[1].startswith(f"Training {lines}") and said[1].endswith(" …")


def test_steps_cut_the_run_into_validation_periods_and_end_on_the_count():
    config = TrainConfig("decoder-only", data="input.txt", steps=2000, eval_every=250)
    plan = plan_steps(config, batches=1307, steps_per_execution=10)
    assert (plan.epochs, plan.steps_per_epoch, plan.total_steps) == (8, 250, 2000)
    assert plan.warmup_steps == 200 and "2000 steps, validating every 250" in plan.describe(
        config, 0.0
    )
    uneven = plan_steps(TrainConfig("decoder-only", data="a.txt", steps=25, eval_every=10), 3, 5)
    assert (uneven.epochs, uneven.steps_per_epoch, uneven.total_steps) == (3, 10, 25)
    # without --eval-every: once per pass over the data, at most ten times a run
    assert plan_steps(TrainConfig("decoder-only", data="a.txt", steps=2000), 1307, 10).epochs == 2
    assert plan_steps(TrainConfig("decoder-only", data="a.txt", steps=2000), 7, 10).epochs == 10


def test_the_plan_line_says_what_a_short_run_and_an_init_run_do():
    """`--steps 4` on 25 batches a pass said "a validation every pass over the data" and
    not that it trains 10 steps; with `--init` it said `dropout None`."""
    short = TrainConfig("decoder-only", data="a.txt", steps=4)
    plan = plan_steps(short, batches=25, steps_per_execution=10)
    assert plan.total_steps == plan.epochs * plan.steps_per_epoch == 10
    line = plan.describe(short, 0.0)
    assert "Training 10 steps (--steps 4 in whole executions), validating every 10" in line
    assert "one validation, at the end (the run is shorter than a pass)" in line
    assert "every pass over the data" not in line
    every = TrainConfig("decoder-only", data="a.txt", steps=20, eval_every=5)
    line = plan_steps(every, batches=25, steps_per_execution=10).describe(every, 0.0)
    # It said "validating every 10" without the 5 asked, which whole executions round up.
    assert "Training 20 steps, validating every 10 (--eval-every 5 in whole executions)" in line
    longer = plan_steps(short, batches=7, steps_per_execution=10)  # 10 steps ≥ a pass of 7
    assert "a validation every pass over the data" in longer.describe(short, 0.0)
    fine_tune = TrainConfig("encoder-only", data="pairs.tsv", init="runs/minilm", steps=10)
    assert fine_tune.dropout is None
    line = plan_steps(fine_tune, batches=25, steps_per_execution=10).describe(fine_tune, 0.1)
    assert "dropout 0.1 (the initial model's)" in line and "None" not in line
    assert "10 steps, validating" in line  # not rounded: no note
    # A fresh head after an `init` classifier takes its head rate; the line said only 0.1.
    plan = plan_steps(fine_tune, batches=25, steps_per_execution=10)
    assert "dropout 0.1 (the initial model's), the head's 0.3," in plan.describe(
        fine_tune, 0.1, 0.3
    )
    assert "head" not in plan.describe(fine_tune, 0.1, 0.1)


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"steps": 10, "epochs": 2}, "Give `steps` or `epochs`, not both"),
        ({"eval_every": 10}, "`eval_every` applies with `steps`"),
        ({"family": "encoder-only", "windows": "random"}, "`windows` applies to a decoder-only"),
        ({"columns": ["a", "b"]}, "a decoder-only model reads plain text"),
        ({"family": "encoder-only", "columns": ["a"]}, "`columns` names text[,text2],label"),
        ({"family": "encoder-decoder", "init": "runs/x"}, "`init` starts an encoder-only"),
        (
            {"family": "encoder-only", "init": "r", "tokenizer": "char"},
            "keeps that run's tokenizer",
        ),
        ({"family": "encoder-only", "init": "r", "overrides": {"num_layers": 2}}, "only dropout"),
        ({"overrides": {"vocabulary_size": 9}}, "--vocabulary-size"),
        ({"overrides": {"dropout": 0.1}, "dropout": 0.2}, "`dropout` is given twice"),
        ({"weight_decay": -1.0}, "`weight_decay` must be a number ≥ 0"),
        ({"label_smoothing": 1.0}, "`label_smoothing` must be in [0, 1)"),
        (
            {"family": "encoder-only", "label_smoothing": 0.1},
            "`label_smoothing` applies to the generative families",
        ),
        (
            {"family": "encoder-only", "pretrain_data": "corpus.txt"},
            "`pretrain_data` is read by masked-LM pretraining: give `pretrain_steps` too",
        ),
    ],
)
def test_the_new_settings_are_checked_in_one_line(settings, message):
    settings = {"family": "decoder-only", "data": "corpus.txt", **settings}
    with pytest.raises(ValueError) as error:
        TrainConfig(**settings)
    assert message in str(error.value) and "\n" not in str(error.value)


def test_the_built_in_data_keeps_its_measured_recipe():
    plan = plan_steps(TrainConfig("encoder-decoder"), batches=235, steps_per_execution=10)
    assert (plan.epochs, plan.steps_per_epoch, plan.warmup_steps) == (4, 240, 100)


def test_training_examples_longer_than_the_model_are_counted(tmp_path):
    from transformer_zoo.data import load_task
    from transformer_zoo.train.family_setup import FamilySetup

    rows = [f"word {i}\t{i}" for i in range(40)] + [" ".join(["long"] * 60) + "\t1"]
    (tmp_path / "pairs.tsv").write_text("\n".join(rows) + "\n", encoding="utf-8")
    task = load_task(str(tmp_path / "pairs.tsv"), "encoder-decoder")
    setup = FamilySetup.create(task, "tiny")
    long_in_train = sum(e.source.startswith("long") for e in task.train)
    assert setup.longer_than(16) == long_in_train
    assert setup.longer_than(1000) == 0


def test_a_validation_batch_holds_no_more_logits_than_a_budget_or_a_training_batch():
    """256 windows of a 256-token context over 8,000 pieces (2 GB of float32 logits, and
    the loss's copies) took a tiny decoder-only run on a user's file to 9.4 GB."""
    from types import SimpleNamespace

    from transformer_zoo.train.family_setup import EVAL_BATCH_SIZE, LOGITS_BUDGET, FamilySetup

    def setup(family, max_length, vocabulary):
        tokenizer = SimpleNamespace(vocabulary_size=vocabulary)
        task = SimpleNamespace(family=family)
        return SimpleNamespace(
            family=family, max_length=max_length, target_tokenizer=tokenizer, task=task
        )

    rows = FamilySetup.validation_batch_size
    assert LOGITS_BUDGET // (256 * 8000) == 32
    assert rows(setup("decoder-only", 256, 8000), 8) == 32
    assert rows(setup("decoder-only", 256, 8000), 128) == 128  # the training batch's rows
    assert rows(setup("encoder-decoder", 64, 500), 128) == EVAL_BATCH_SIZE
    assert rows(setup("encoder-only", 512, 30522), 32) == EVAL_BATCH_SIZE  # labels out


def test_held_out_examples_longer_than_the_model_are_reported_too(tmp_path, caplog):
    """Only the training examples were counted: validation and test ones were cut
    silently."""
    from transformer_zoo.data import load_task
    from transformer_zoo.train.data_warnings import warn_cut
    from transformer_zoo.train.family_setup import FamilySetup

    long = " ".join(["long"] * 60)
    files = {
        "pairs.tsv": [f"word {i}\t{i}" for i in range(40)],
        "valid.tsv": ["word 1\t1", f"{long}\t2"],
        "test.tsv": [f"{long}\t3", f"{long} more\t4", "word 2\t2"],
    }
    for name, rows in files.items():
        (tmp_path / name).write_text("\n".join(rows) + "\n", encoding="utf-8")
    task = load_task(
        str(tmp_path / "pairs.tsv"),
        "encoder-decoder",
        valid=str(tmp_path / "valid.tsv"),
        test=str(tmp_path / "test.tsv"),
    )
    setup = FamilySetup.create(task, "tiny")
    with caplog.at_level("WARNING", logger="transformer_zoo.train.data_warnings"):
        warn_cut(setup, 16)
        warn_cut(setup, 1000)  # nothing cut: no line
    assert caplog.messages == [
        "0 of 40 training, 1 of 2 validation and 2 of 3 test examples are longer than the "
        "model's 16 tokens and are cut to it (a preset with a larger max_length keeps them "
        "whole)"
    ]


@pytest.mark.parametrize(
    "batch_size, replicas",
    # 247 training (27 validation) windows, the last batch 3 (3), 2 (2), 2 (2), 2 (6), 1 (3)
    [(4, 1), (5, 1), (5, 2), (7, 3), (6, 3)],
)
@pytest.mark.parametrize("split", ["train", "valid"])  # random windows, and an epoch of them
def test_a_stream_pipeline_knows_its_batches_per_pass(tmp_path, split, batch_size, replicas):
    """The trainer counted a pass by iterating it: minutes on a 100 MB text. A stream's
    count is arithmetic (`stream_batches`), held by the pipeline as its cardinality."""
    from types import SimpleNamespace

    from transformer_zoo.data import load_task
    from transformer_zoo.train.family_setup import FamilySetup

    (tmp_path / "text.txt").write_text("some words " * 200, encoding="utf-8")  # 2,200 chars
    task = load_task(str(tmp_path / "text.txt"), "decoder-only", stream=True)
    tokenizers = task.fit_tokenizers(kind="char")
    setup = FamilySetup.create(task, "tiny", tokenizers, overrides={"max_length": 8})
    model = SimpleNamespace(max_length=8)  # all the pipelines read of the model
    data = setup.dataset(split, model, batch_size, shuffle=True, replicas=replicas)
    windows = {"train": 1980 // 8, "valid": 220 // 8}[split]
    iterated = [len(labels) for _, labels, *_ in data]
    assert int(data.cardinality()) == len(iterated) > 0
    full, last = divmod(windows, batch_size)
    kept = full * (batch_size - batch_size % replicas) + last - last % replicas
    assert sum(iterated) == kept  # every batch cut to a multiple of the replicas


def test_set_dropout_is_the_runs_dropout_and_is_checked():
    """`--set dropout=0.3` was replaced by the recipe's 0.0, and 1.5 was accepted."""
    config = TrainConfig("encoder-decoder", data="pairs.tsv", overrides={"dropout": 0.3})
    assert config.dropout == 0.3 and config.overrides is None
    both = TrainConfig("decoder-only", data="a.txt", overrides={"dropout": 0.2, "num_layers": 1})
    assert both.dropout == 0.2 and both.overrides == {"num_layers": 1}
    assert TrainConfig("encoder-decoder", data="pairs.tsv").dropout == 0.0  # the recipe's
    for value in (1.5, 1.0, -0.1):
        with pytest.raises(ValueError, match=r"`dropout` must be in \[0, 1\)"):
            TrainConfig("encoder-decoder", data="pairs.tsv", overrides={"dropout": value})


def test_set_dropout_reaches_the_model():
    from transformer_zoo.data import load_task
    from transformer_zoo.train.family_setup import FamilySetup

    config = TrainConfig("encoder-decoder", overrides={"dropout": 0.3, "num_layers": 1})
    task = limit_task(load_task(config.data, config.family), 64)
    setup = FamilySetup.create(task, config.preset, overrides=config.overrides)
    assert setup.build_model(config.dropout).get_config()["dropout"] == 0.3


def test_the_warmup_reported_is_the_warmup_the_optimizer_runs():
    """`--steps 1` printed and stored `warmup 100 steps`; the optimizer ran 2."""
    import keras
    from keras import ops

    config = TrainConfig("encoder-decoder", steps=1)  # builtin data: warmup 100
    plan = plan_steps(config, batches=235, steps_per_execution=10)
    assert plan.total_steps == 10 and plan.warmup_steps == 2
    assert "warmup 2 steps" in plan.describe(config, 0.0)
    optimizer, _ = make_optimizer(
        config.optimizer, 32, plan.total_steps, plan.warmup_steps, config.learning_rate
    )
    schedule = keras.saving.deserialize_keras_object(optimizer.get_config()["learning_rate"])
    rates = [float(schedule(ops.convert_to_tensor(step))) for step in range(4)]
    assert rates[2] == pytest.approx(config.learning_rate)  # the peak, at the end of warmup
    assert rates[1] < rates[2] > rates[3]
    paper = TrainConfig("encoder-decoder", steps=1, optimizer="paper-adam")
    assert plan_steps(paper, batches=235, steps_per_execution=10).warmup_steps == 100


@pytest.mark.parametrize("data", ["a.txt", "builtin:dates-zh"])  # --warmup-steps; 100
def test_a_warmup_cut_to_a_fifth_of_the_steps_is_said_to_be_cut_not_chosen(data):
    """`--steps 10 --warmup-steps 50` printed "Chosen for the data (44 batches per pass):
    ... warmup cut to a fifth of the 10 steps, for the decay; ... --warmup-steps set them",
    of a warmup the user had set."""
    family = "decoder-only" if data == "a.txt" else "encoder-decoder"
    given = 50 if data == "a.txt" else None
    config = TrainConfig(family, data=data, steps=10, warmup_steps=given)
    plan = plan_steps(config, batches=44, steps_per_execution=10)
    assert plan.total_steps == 10 and plan.warmup_steps == 10 // 5
    line = plan.describe(config, 0.0)
    chosen = line.partition("Chosen for the data")[2].partition(";")[0]
    assert "one validation, at the end" in chosen and "warmup" not in chosen
    warmup = given or config.warmup_steps
    assert f"The warmup of {warmup} steps is cut to a fifth of the 10 steps," in line


def test_masked_lm_pretrains_on_every_example_of_a_users_file():
    """Only the built-in data's near-miss pairs ("incorrect") are left out of pretraining;
    a user's file labelled correct/incorrect (CoLA-like) pretrains on all its texts."""
    from types import SimpleNamespace

    from transformer_zoo.data.examples import ClassificationExample
    from transformer_zoo.data.task import Task
    from transformer_zoo.train.pretraining import pretraining_texts

    rows = [ClassificationExample(label, f"text {i}") for i, label in enumerate(["correct", "incorrect"] * 3)]  # fmt: skip
    users = SimpleNamespace(task=Task("labels.tsv", "encoder-only", rows, [], []))
    builtin = SimpleNamespace(task=Task("builtin:dates-zh", "encoder-only", rows, [], []))
    assert len(pretraining_texts(users)) == 6
    assert [text for text, _ in pretraining_texts(builtin)] == ["text 0", "text 2", "text 4"]


@pytest.mark.parametrize(("steps_per_execution", "shown"), [(1, [3, 6, 9, 12, 15, 18, 21, 24, 25]), (5, [5, 10, 15, 20, 25])])  # fmt: skip
def test_pretraining_without_a_terminal_prints_a_line_every_tenth(
    capsys, steps_per_execution, shown
):
    """Keras's per-epoch line came once, after all of the (one epoch of) pretraining."""
    from transformer_zoo.train.pretraining import ProgressLines

    lines = ProgressLines(25, started=0.0)
    for end in range(steps_per_execution - 1, 25, steps_per_execution):
        lines.on_train_batch_end(end, {"loss": 2.5, "masked_accuracy": 0.25})
    printed = capsys.readouterr().out.splitlines()
    assert [int(line.split()[2].split("/")[0]) for line in printed] == shown
    assert printed[-1].startswith("  pretraining step 25/25: loss 2.5000, masked accuracy 0.2500,")


def test_a_test_file_with_the_training_files_contents_is_warned_about(tmp_path, caplog):
    from transformer_zoo.train.data_warnings import warn_training_file_reused

    rows = "".join(f"{('neg', 'pos')[i % 2]}\ttext {i}\n" for i in range(30))
    for name in ("train.tsv", "copy.tsv"):
        (tmp_path / name).write_text(rows, encoding="utf-8")
    (tmp_path / "other.tsv").write_text(rows.replace("text", "words"), encoding="utf-8")
    data = str(tmp_path / "train.tsv")
    with caplog.at_level("WARNING", logger="transformer_zoo.train.data_warnings"):
        warn_training_file_reused(TrainConfig("encoder-only", data=data, test=str(tmp_path / "copy.tsv")))  # fmt: skip
        assert "--test" in caplog.text and "holds the same contents as --data" in caplog.text
        caplog.clear()
        warn_training_file_reused(TrainConfig("encoder-only", data=data, valid=str(tmp_path / "other.tsv")))  # fmt: skip
        assert caplog.text == ""


def test_the_plan_line_counts_in_the_singular_where_it_is_one():
    """It said "warmup 1 steps" and "(1 batches per pass)"."""
    config = TrainConfig("encoder-only", data="pairs.tsv", steps=10)
    line = plan_steps(config, batches=1, steps_per_execution=10).describe(config, 0.0)
    assert "warmup 1 step," in line and "(1 batch per pass)" in line


@pytest.mark.parametrize("data", ["builtin:dates-zh", "pairs.tsv"])
def test_paper_adam_runs_the_papers_schedule_unscaled_unless_a_factor_is_given(data):
    """The AdamW default peak (0.002) was taken for paper-adam's factor, 500× under the
    paper's rates: a run learned nothing. Its peak is D^-0.5 · warmup^-0.5 (§5.3)."""
    paper = TrainConfig("encoder-decoder", data=data, steps=1000, optimizer="paper-adam")
    assert paper.learning_rate == 1.0
    optimizer, _ = make_optimizer(paper.optimizer, 64, 1000, 400, paper.learning_rate)
    schedule = keras.saving.deserialize_keras_object(optimizer.get_config()["learning_rate"])
    peak = float(schedule(ops.convert_to_tensor(399)))  # step 400, counted from 1
    assert peak == pytest.approx(64**-0.5 * 400**-0.5, rel=1e-5)
    scaled = TrainConfig("encoder-decoder", data=data, optimizer="paper-adam", learning_rate=2.0)
    assert scaled.learning_rate == 2.0
    for setting in ({"weight_decay": 0.1}, {"min_learning_rate": 1e-4}):  # AdamW's alone
        with pytest.raises(ValueError, match="paper-adam .* has none"):
            TrainConfig("encoder-decoder", data=data, optimizer="paper-adam", **setting)


def test_a_vocabulary_size_for_a_char_tokenizer_is_refused_not_ignored():
    with pytest.raises(ValueError, match="does not apply to a char tokenizer"):
        TrainConfig("encoder-decoder", data="pairs.tsv", tokenizer="char", vocabulary_size=50)
    with pytest.raises(ValueError, match="target_vocabulary_size"):
        TrainConfig(
            "encoder-decoder", data="p.tsv", target_tokenizer="char", target_vocabulary_size=9
        )
    TrainConfig("encoder-decoder", data="pairs.tsv", tokenizer="char", target_vocabulary_size=90)


def test_a_backup_written_after_training_ended_trains_no_further_epoch_and_says_why():
    """Killed while it saved its model, the rerun trained one more epoch past early
    stopping (and a budgeted run a whole new budget); then it said `"early_stopping"`
    of a run its time budget had stopped."""
    from transformer_zoo.train.callbacks.early_stopping import EarlyStoppingState
    from transformer_zoo.train.trainer import _ended_by

    config = TrainConfig("encoder-decoder", data="pairs.tsv", epochs=30, early_stopping_patience=2)
    plan = plan_steps(config, batches=10, steps_per_execution=1)
    waiting = EarlyStoppingState(1.0, 1, 3, None)
    stopped = EarlyStoppingState(1.0, 2, 3, None)
    assert _ended_by(config, plan, 5, waiting, 0.0, 50) is None
    assert _ended_by(config, plan, 5, stopped, 0.0, 50) == "early_stopping"
    assert _ended_by(config, plan, 30, None, 0.0, 300) == "epochs"  # every epoch done
    timed = TrainConfig("encoder-decoder", data="pairs.tsv", epochs=30, time_budget=60.0)
    assert _ended_by(timed, plan, 5, None, 61.0, 50) == "time_budget"
    assert _ended_by(timed, plan, 5, None, 59.0, 50) is None
    stepped = TrainConfig("encoder-decoder", data="pairs.tsv", steps=40, eval_every=10)
    steps_plan = plan_steps(stepped, batches=10, steps_per_execution=1)
    assert _ended_by(stepped, steps_plan, 3, None, 0.0, 40) == "steps"
    assert _ended_by(stepped, steps_plan, 3, None, 0.0, 30) is None


@pytest.mark.parametrize(
    "config, message",
    [
        (
            {"family": "decoder-only"},
            "`config` must be a TrainConfig: pass `TrainConfig(**config)`. "
            "Received a dict with keys ['family']",
        ),
        ("decoder-only", "`config` must be a TrainConfig. Received: config='decoder-only'"),
    ],
)
def test_train_of_settings_not_in_a_train_config_says_how_to_make_one(config, message):
    """`train({"family": ...})` (and `prepare`) raised "AttributeError: 'dict' object
    has no attribute 'strategy'" from inside `prepare`."""
    from transformer_zoo.train.prepared import prepare
    from transformer_zoo.train.trainer import train

    for function in (train, prepare):
        with pytest.raises(ValueError) as error:
            function(config)
        assert str(error.value) == message


def test_tying_all_weights_by_a_setting_trains_one_vocabulary_for_both_sides(tmp_path):
    """`--set tie_weights=all` trained a source and a target tokenizer, then failed in the
    model ("Three-way tying needs one vocabulary"), or at equal sizes tied source id i to
    target id i, two different pieces, as a preset that ties all (transformer_base) does not."""
    from transformer_zoo.data import load_task
    from transformer_zoo.train.family_setup import FamilySetup

    rows = [f"word {i % 5} here\tMOT {i % 5} ICI" for i in range(40)]
    (tmp_path / "pairs.tsv").write_text("\n".join(rows) + "\n", encoding="utf-8")
    task = load_task(str(tmp_path / "pairs.tsv"), "encoder-decoder")
    setup = FamilySetup.create(task, "tiny", sizes=(40, None), overrides={"tie_weights": "all"})
    assert setup.target_tokenizer is setup.tokenizer and not setup.separate_target
    source = {setup.tokenizer.id_to_piece(i) for i in range(setup.tokenizer.vocabulary_size)}
    assert {"w", "M"} <= source  # both sides' text in the one vocabulary
    model = setup.build_model()
    assert model.output_vocabulary_size == setup.tokenizer.vocabulary_size


def test_text_pairs_for_a_model_of_two_tokens_are_refused_before_training(tmp_path):
    """A pair needs `[CLS] a [SEP] b [SEP]`: max_length=2 failed in the pipeline, after
    --out was written, with "`max_length` must be an integer ≥ 3", a name the user did
    not pass in that sense."""
    from transformer_zoo.data import load_task
    from transformer_zoo.errors import InputError
    from transformer_zoo.train.family_setup import FamilySetup

    rows = [f"{'ab'[i % 2]}\tword {i}\tother {i}" for i in range(40)]
    (tmp_path / "pairs.tsv").write_text("\n".join(rows) + "\n", encoding="utf-8")
    task = load_task(str(tmp_path / "pairs.tsv"), "encoder-only")
    assert task.pairs
    with pytest.raises(InputError, match="A text pair needs max_length ≥ 3 .* at most 2 tokens"):
        FamilySetup.create(task, "tiny", sizes=(40, None), overrides={"max_length": 2})
