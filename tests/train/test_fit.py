"""`train()` end to end on small subsets of builtin:dates-zh: the run directory that
export and serving read, reruns, a NaN loss, and `evaluate_directory`."""

import json
import os

import keras
import numpy as np
import pytest

from tests.artifacts import TRAINED_RUN as SMALL
from tests.artifacts import TRAINED_TASKS as TASKS
from tests.artifacts import trained_run_flags
from transformer_zoo.evaluation.evaluate import evaluate_directory
from transformer_zoo.run_directory import MODEL_FILE, RunError, check_run_files, load_run_config
from transformer_zoo.train.callbacks.nan_guard import NaNLossError
from transformer_zoo.train.config import TrainConfig
from transformer_zoo.train.trainer import train
from transformer_zoo.visualize.curves import read_history


@pytest.fixture(scope="module")
def runs(trained_runs):
    return trained_runs


@pytest.mark.parametrize("family", list(TASKS))
def test_run_directory_holds_what_export_and_serving_read(runs, family):
    run_dir = runs[family].run_dir
    config = load_run_config(run_dir)
    check_run_files(run_dir, config, MODEL_FILE)
    assert (config.family, config.task, config.data, config.seed) == (
        family,
        TASKS[family],
        "builtin:dates-zh",
        0,
    )
    assert config.preset == "tiny_" + family.replace("-", "_")
    assert config.special_ids == {"pad": 0, "unk": 1, "bos": 2, "eos": 3, "mask": 4}
    assert config.extra["status"] == "finished"
    assert (config.target_tokenizer is not None) == (family == "encoder-decoder")
    if family == "encoder-only":
        assert config.label_names == ["incorrect", "correct"]
    model = keras.saving.load_model(os.path.join(run_dir, MODEL_FILE))
    assert model.dtype_policy.name == "float32"  # trained in mixed_bfloat16, served in float32
    assert len(read_history(os.path.join(run_dir, "history.csv"))) == 2
    with open(os.path.join(run_dir, "curves.png"), "rb") as file:
        assert file.read(8) == b"\x89PNG\r\n\x1a\n"
    for name in ("best.keras", "last.keras"):
        assert os.path.isfile(os.path.join(run_dir, "checkpoints", name))
    leftovers = [
        name for _, _, files in os.walk(run_dir) for name in files if name.startswith(".partial.")
    ]
    assert not leftovers and not os.path.exists(os.path.join(run_dir, "backup"))


@pytest.mark.parametrize(
    "family, keys",
    [
        ("encoder-decoder", {"exact_match", "bleu", "token_accuracy", "perplexity"}),
        ("encoder-only", {"accuracy"}),
    ],
)
def test_metrics_report_the_familys_scores_per_category(runs, family, keys):
    metrics = runs[family].metrics
    test = metrics["test"]
    assert keys <= set(test) and test["examples"] == 9  # a tenth of max_examples=96
    per_category = test["accuracy" if family == "encoder-only" else "exact_match"]
    assert "all" in per_category and set(per_category) <= {"all", "dates", "numbers", "times"}
    assert all(0.0 <= score <= 1.0 for score in per_category.values())
    history = read_history(os.path.join(runs[family].run_dir, "history.csv"))
    assert metrics["training"]["epochs"] == len(history) == 2
    assert metrics["training"]["stopped_by"] == "epochs"
    training = metrics["training"]
    # Whole executions per epoch: the optimizer ran exactly what the progress bar showed.
    assert training["steps"] == training["epochs"] * training["steps_per_epoch"]
    assert training["steps_per_epoch"] % SMALL["steps_per_execution"] == 0
    pretraining = metrics["training"]["pretraining"]
    if family == "encoder-only":
        assert pretraining["steps"] == 3 and 0.0 <= pretraining["masked_accuracy"] <= 1.0
    else:
        assert pretraining is None


def test_evaluate_directory_recomputes_the_saved_metrics(runs):
    saved = runs["encoder-decoder"].metrics["test"]
    again = evaluate_directory(runs["encoder-decoder"].run_dir)
    assert again["exact_match"] == saved["exact_match"] and again["bleu"] == saved["bleu"]
    assert again["perplexity"] == pytest.approx(saved["perplexity"], rel=1e-5)


def test_keras_serving_engine_translates_with_the_run_directory(runs):
    from transformer_zoo.serving import load_served_model

    served = load_served_model(runs["encoder-decoder"].run_dir, engine="keras")
    (translation,) = served.translate(["March 5, 2021"], max_new_tokens=4)
    assert isinstance(translation, str)


def test_rerunning_a_finished_run_does_nothing(runs):
    run_dir = runs["encoder-decoder"].run_dir
    stamp = os.path.getmtime(os.path.join(run_dir, MODEL_FILE))
    result = train(TrainConfig("encoder-decoder", out=run_dir, **SMALL), verbose=0)
    assert result.already_finished and result.metrics == runs["encoder-decoder"].metrics
    assert os.path.getmtime(os.path.join(run_dir, MODEL_FILE)) == stamp


def test_an_out_directory_holding_a_different_run_is_refused(runs):
    run_dir = runs["encoder-decoder"].run_dir
    with pytest.raises(RunError, match=r"holds a different run \(epochs=2 there, 3 now\)"):
        train(TrainConfig("encoder-decoder", out=run_dir, **{**SMALL, "epochs": 3}))


def test_a_rerun_with_another_seed_is_a_different_run(runs):
    """A run is its settings, its seed included: another --seed draws other weights and
    batches, so it is refused, not resumed (nor reported finished) as the seed-0 run."""
    run_dir = runs["encoder-decoder"].run_dir
    with pytest.raises(RunError, match=r"holds a different run \(seed=0 there, 2 now\)"):
        train(TrainConfig("encoder-decoder", out=run_dir, **{**SMALL, "seed": 2}))


class _PoisonInSecondEpoch(keras.callbacks.Callback):
    def on_epoch_begin(self, epoch, logs=None):
        self.epoch = epoch

    def on_train_batch_begin(self, batch, logs=None):
        if self.epoch == 1:
            variable = self.model.trainable_variables[0]
            variable.assign(np.full(variable.shape, np.nan, variable.dtype))


@pytest.mark.slow  # the mechanism is tested fast in test_fit_callbacks.py
def test_nan_loss_stops_the_run_and_keeps_the_last_good_checkpoint(tmp_path):
    out = tmp_path / "nan"
    config = TrainConfig("encoder-decoder", out=str(out), evaluate=False, **{**SMALL, "epochs": 3})
    with pytest.raises(NaNLossError, match="became nan in epoch 2") as error:
        train(config, callbacks=[_PoisonInSecondEpoch()], verbose=0)
    assert "checkpoints/last.keras (epoch 1)" in str(error.value)
    kept = keras.saving.load_model(out / "checkpoints" / "last.keras")
    assert all(np.isfinite(w).all() for w in kept.get_weights())
    assert not (out / MODEL_FILE).exists()
    assert load_run_config(out).extra["status"] == "training"


def test_cli_train_with_the_same_settings_finds_the_run_finished(runs, capsys):
    from transformer_zoo.cli import main

    run_dir = runs["encoder-decoder"].run_dir
    argv = ["train", "--family", "encoder-decoder", "--out", run_dir, *trained_run_flags()]
    assert main(argv) == 0  # the flags make the same settings: nothing to do
    out = capsys.readouterr().out
    assert "already holds this run" in out and f"{run_dir}: 2 epochs" in out
    # --max-examples 96 cut the test split to a tenth as many, at least 8 (its --help).
    assert f"; {max(8, 96 // 10)} test examples scored; " in out


def test_cli_evaluate_prints_and_saves_the_recomputed_metrics(runs, capsys):
    from transformer_zoo.cli import main

    run_dir = runs["encoder-only"].run_dir
    assert main(["evaluate", run_dir, "--split", "valid"]) == 0
    printed = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert printed["split"] == "valid" and "accuracy" in printed
    with open(os.path.join(run_dir, "metrics.json"), encoding="utf-8") as file:
        saved = json.load(file)
    assert saved["test"] == runs["encoder-only"].metrics["test"]
    assert printed["accuracy"] == saved["valid"]["accuracy"]["all"]
    assert printed["examples"] == saved["valid"]["examples"] and printed["engine"] == "keras"


def test_classify_without_pairs_on_a_pair_model_is_refused(runs, capsys):
    """A pair-trained model read `a<TAB>b` as one text, silently (then with a warning);
    the run records that it reads pairs, and a line without `--pairs` is refused."""
    from transformer_zoo.cli import main

    run_dir = runs["encoder-only"].run_dir  # built-in pairs: English and Chinese
    assert json.load(open(os.path.join(run_dir, "config.json")))["extra"]["text_pairs"] is True
    assert main(["classify", "--model", run_dir, "--engine", "keras", "May 1, 1999\t1999年5月1日"]) == 2  # fmt: skip
    assert "trained on text pairs" in capsys.readouterr().err
    assert main(["classify", "--model", run_dir, "--engine", "keras", "--pairs", "a\tb"]) == 0
    assert "trained on text pairs" not in capsys.readouterr().err


def test_decoder_only_evaluation_completes_prompts_and_reports_perplexity():
    from transformer_zoo.data.tasks import limit_task, load_task
    from transformer_zoo.evaluation.evaluate import evaluate
    from transformer_zoo.generation.keras_runner import KerasRunner
    from transformer_zoo.run_directory import RunConfig
    from transformer_zoo.serving import ServedModel
    from transformer_zoo.train.family_setup import FamilySetup

    setup = FamilySetup.create(
        limit_task(load_task("builtin:dates-zh", "decoder-only"), 80), "tiny"
    )
    runner = KerasRunner(setup.build_model())
    config = RunConfig("decoder-only", "tiny", "language-model")
    served = ServedModel(config, runner.dims, runner, setup.tokenizer)
    scores = evaluate(served, setup.task, samples=2)
    assert scores["examples"] == 8 and len(scores["samples"]) == 2
    assert {"exact_match", "bleu", "token_accuracy", "perplexity"} <= set(scores)
    # An untrained model is close to uniform over the vocabulary.
    assert scores["perplexity"] > setup.tokenizer.vocabulary_size / 10
    assert scores["samples"][0]["input"].endswith(" =>")


# The pipeline's cardinality is unknown, so Keras warns when it ends (the trainer silences it).
@pytest.mark.filterwarnings("ignore:Your input ran out of data")
def test_the_evaluation_token_scores_equal_keras_evaluate_on_the_pipeline(runs):
    """The evaluation scores through the engine (formats.translation_example); Keras
    scores through the tf.data pipeline with the recipe's metrics: an independent path."""
    from transformer_zoo.data.run_task import run_task
    from transformer_zoo.text import load_tokenizers
    from transformer_zoo.train.family_setup import FamilySetup

    run_dir = runs["encoder-decoder"].run_dir
    config = load_run_config(run_dir)
    setup = FamilySetup.create(run_task(config), config.preset, load_tokenizers(run_dir, config))
    model = keras.saving.load_model(os.path.join(run_dir, MODEL_FILE))
    loss, metrics = setup.loss_and_metrics()
    model.compile(loss=loss, metrics=metrics)
    scores = model.evaluate(setup.dataset("test", model, 64), verbose=0, return_dict=True)
    saved = runs["encoder-decoder"].metrics["test"]
    assert saved["token_accuracy"] == pytest.approx(scores["masked_accuracy"], abs=1e-6)
    assert saved["perplexity"] == pytest.approx(scores["perplexity"], rel=1e-4)


def test_evaluate_decodes_with_the_search_it_is_given(runs, capsys):
    from transformer_zoo.cli import main
    from transformer_zoo.data.run_task import run_task
    from transformer_zoo.evaluation.evaluate import evaluate
    from transformer_zoo.generation import BeamSearch
    from transformer_zoo.serving import load_served_model

    run_dir = runs["encoder-decoder"].run_dir
    served = load_served_model(run_dir, "keras")
    searches, translate = [], served.translate_ids

    def spy(rows, max_new_tokens=None, search=None):
        searches.append(search)
        return translate(rows, max_new_tokens, search)

    served.translate_ids = spy
    beam = BeamSearch(num_beams=3)
    evaluate(served, run_task(load_run_config(run_dir)), search=beam)
    assert searches and all(search == beam for search in searches)

    metrics_file = os.path.join(run_dir, "metrics.json")
    with open(metrics_file, encoding="utf-8") as file:
        before = file.read()
    assert main(["evaluate", run_dir, "--strategy", "beam", "--num-beams", "3"]) == 0
    printed = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert printed["search"] == {
        "strategy": "beam",
        "num_beams": 3,
        "length_penalty": 1.0,
        "early_stopping": True,
        "forced_eos": False,
    }
    with open(metrics_file, encoding="utf-8") as file:
        assert file.read() == before  # metrics.json keeps the greedy scores
    assert main(["evaluate", run_dir, "--num-beams", "3"]) == 2  # a flag of another strategy
    assert "num_beams" in capsys.readouterr().err
