"""Training runs: resume after a kill, distribution, precision and XLA flags."""

import csv
import dataclasses
import json
import os
import random
import subprocess
import sys
import textwrap

import keras
import numpy as np
import pytest

import tfseqrec
from tfseqrec import kinds, losses, presets, training
from tfseqrec.data import splits

SASREC = kinds.get("sasrec")
TINY = {
    "max_sequence_length": 20,
    "hidden_dim": 8,
    "batch_size": 64,
    "validation_batch_size": 512,
    "epochs": 3,
}


class _Kill(keras.callbacks.Callback):
    """Raises at the end of an epoch, as a killed process would stop."""

    def __init__(self, at_epoch):
        super().__init__()
        self.at_epoch = at_epoch

    def on_epoch_end(self, epoch, logs=None):
        if epoch == self.at_epoch:
            raise KeyboardInterrupt("killed")


class _FirstEpoch(keras.callbacks.Callback):
    def on_epoch_begin(self, epoch, logs=None):
        if not hasattr(self, "first"):
            self.first = epoch


# BERT4Rec with the batch size, the widths and its masking options left to the data: a resumed
# run matches the options as the killed one settled them.
SETTLED_BY_DATA = {k: v for k, v in TINY.items() if k != "batch_size"} | {"model": "bert4rec"}


@pytest.mark.parametrize("config", [TINY, SETTLED_BY_DATA], ids=["sasrec", "bert4rec-settled-by-data"])
def test_killed_run_resumes_where_it_stopped(data_root, tmp_path, config):
    out = tmp_path / "run"
    kind = kinds.get(config.get("model", "sasrec"))
    with pytest.raises(KeyboardInterrupt):
        training.train(kind, data_root / "ml-100k", out, config, callbacks=[_Kill(at_epoch=1)], verbose=0)
    first = _FirstEpoch()
    model, history, _, _ = training.train(
        kind, data_root / "ml-100k", out, config, callbacks=[first], verbose=0
    )
    assert first.first == 2  # epochs 0 and 1 were done before the kill
    epochs = [int(row["epoch"]) for row in csv.DictReader(open(out / "history.csv"))]
    assert epochs == [0, 1, 2]
    loaded, vocabulary, info = tfseqrec.load(out)
    assert info["config"]["model_options"]["hidden_dim"] == 8 and vocabulary.num_items == 1682
    assert info["config"]["batch_size"] is not None and info["config"]["bucket_boundaries"] is not None
    assert not os.path.exists(out / "backup")  # removed after a finished run


def test_bert4rec_run_with_mixed_precision_and_xla(data_root, tmp_path):
    config = dict(TINY, model="bert4rec", epochs=1, mixed_precision=True, jit_compile=True)
    try:
        model, history, split, _ = training.train(
            kinds.get("bert4rec"), data_root / "ml-100k", tmp_path, config, verbose=0
        )
        assert model.dtype_policy.name == "mixed_bfloat16"
        assert np.isfinite(history.history["loss"][0])
        assert np.isfinite(history.history["val_ndcg_10"][0])
    finally:
        keras.mixed_precision.set_global_policy("float32")


def test_config_rejects_unknown_options():
    # A key that is not a training option is a model option, which building the model checks.
    config = training.TrainConfig.from_dict({"hiden_dim": 8, "epochs": 3})
    assert config.model_options == {"hiden_dim": 8} and config.epochs == 3
    with pytest.raises(
        ValueError, match=r"unknown training options \['hiden_dim'\]: .* SASRec's constructor"
    ):
        SASREC.check(config)
    with pytest.raises(ValueError, match="unknown Recformer options"):
        training.RecformerConfig.from_dict({"hiden_dim": 8})
    with pytest.raises(
        ValueError, match=r"model must be one of \['bert4rec', 'hstu', 'sasrec', 'unisrec'\], got 'gru4rec'"
    ):
        training.TrainConfig(model="gru4rec")
    with pytest.raises(ValueError, match="got 'recformer'"):  # a kind with its own options and driver
        training.TrainConfig(model="recformer")
    with pytest.raises(ValueError, match="unknown model 'gru4rec'; expected one of"):
        kinds.get("gru4rec")


def test_mirrored_strategy_matches_single_device(tmp_path):
    """Two logical CPUs under MirroredStrategy train the same model as one device.

    Each replica's loss is rescaled to a share of the global mean over target
    positions, so the summed gradients equal single-device ones. (Keras's progress
    log shows replica-local loss values, so the comparison uses the trained models.)

    Logical devices must be set before TensorFlow starts, hence a fresh process.
    """
    script = textwrap.dedent(
        """
        import json, sys
        import numpy as np
        import tensorflow as tf
        cpu = tf.config.list_physical_devices("CPU")[0]
        tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
        import keras
        from tfseqrec.data import pipeline, splits
        from tfseqrec.models import SASRec

        rng = np.random.default_rng(0)
        seqs = splits.Sequences.from_list(
            [str(i) for i in range(64)], [rng.integers(3, 23, size=rng.integers(3, 12)) for _ in range(64)]
        )

        ds = pipeline.causal_dataset(seqs, 8, 32, shuffle=False)
        probe = tf.constant(pipeline.pad_left(seqs, 8)[:16])

        def run(strategy, loss_normalizer=None):
            keras.utils.set_random_seed(7)
            with strategy.scope():
                model = SASRec(
                    num_items=20, max_sequence_length=8, hidden_dim=8, dropout=0.0, loss_normalizer=loss_normalizer
                )
                model.compile(optimizer=keras.optimizers.SGD(0.1))
            model.fit(ds, epochs=3, verbose=0)
            # The trained model's loss over all data, computed outside any strategy.
            losses = []
            for x, y, w in ds:
                losses.append(float(model.compute_loss(x, y, model(x), w)))
            return {"loss": losses, "scores": model.score(probe).numpy().tolist()}

        mirrored = tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
        print(json.dumps({
            "replicas": mirrored.num_replicas_in_sync,
            "single": run(tf.distribute.get_strategy()),
            "mirrored": run(mirrored),
            "single_fixed": run(tf.distribute.get_strategy(), 40.0),
            "mirrored_fixed": run(mirrored, 40.0),
        }))
        """
    )
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
    result = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=600, env=env
    )
    assert result.returncode == 0, result.stderr[-3000:]
    out = json.loads(result.stdout.strip().splitlines()[-1])
    assert out["replicas"] == 2
    np.testing.assert_allclose(out["mirrored"]["loss"], out["single"]["loss"], rtol=1e-5)
    np.testing.assert_allclose(out["mirrored"]["scores"], out["single"]["scores"], atol=1e-5)
    # A fixed loss normaliser: each replica's sum over the constant, the same model.
    np.testing.assert_allclose(out["mirrored_fixed"]["loss"], out["single_fixed"]["loss"], rtol=1e-5)
    np.testing.assert_allclose(out["mirrored_fixed"]["scores"], out["single_fixed"]["scores"], atol=1e-5)


def test_loss_normalizer_is_the_mean_target_count_of_a_batch():
    # Users of 3 and 5 items, windows of 3 inputs: 2 and 3 targets; batches of 2.
    seqs = splits.Sequences.from_list(["a", "b"], [[3, 4, 5], [3, 4, 5, 6, 7]])
    config = training.TrainConfig(max_sequence_length=3, batch_size=128)
    assert training.loss_normalizer(SASREC, config, seqs) == 2.5 * 2
    # BERT4Rec: 3 items in each window, 0.2 * 3 < 1, and at least one is masked.
    config = training.TrainConfig(model="bert4rec", max_sequence_length=3, batch_size=128, mask_prob=0.2)
    assert training.loss_normalizer(kinds.get("bert4rec"), config, seqs) == 1.0 * 2
    # Unset, the mask share is the data's, as in a run: short histories mask 0.4, 1.2 items a window.
    config = training.TrainConfig(model="bert4rec", max_sequence_length=3, batch_size=128)
    assert training.loss_normalizer(kinds.get("bert4rec"), config, seqs) == pytest.approx(1.2 * 2)
    assert training.loss_normalizer(SASREC, training.TrainConfig(loss_normalization="batch"), seqs) is None
    with pytest.raises(ValueError, match="loss_normalization"):
        training.loss_normalizer(SASREC, training.TrainConfig(loss_normalization="sum"), seqs)


def test_cosine_learning_rate_warms_up_then_decays_to_zero():
    config = training.TrainConfig(
        learning_rate=1e-3, learning_rate_schedule="cosine", epochs=10, warmup_epochs=1
    )
    schedule = training.learning_rate(config, total_steps=100)  # 10 steps an epoch
    at = lambda step: float(schedule(step))  # noqa: E731
    np.testing.assert_allclose([at(0), at(5), at(10)], [0.0, 5e-4, 1e-3], atol=1e-9)
    np.testing.assert_allclose(at(55), 1e-3 * 0.5 * (1 + np.cos(np.pi * 45 / 90)), rtol=1e-5)
    np.testing.assert_allclose(at(100), 0.0, atol=1e-9)
    # Constant: the kind's default unless given.
    assert training.learning_rate(training.TrainConfig(), 100) == 2e-3
    for model in ("bert4rec", "hstu"):
        with pytest.raises(ValueError, match=f"{model}'s learning_rate is unset: the data settle it"):
            training.learning_rate(training.TrainConfig(model=model), 100)
    assert (
        training.TrainConfig(model="bert4rec").warmup_epochs is None  # the data settle it
        and training.TrainConfig().warmup_epochs == 0
    )
    assert training.learning_rate(training.TrainConfig(learning_rate=5e-4), 100) == 5e-4
    # Constant after a warm-up of one epoch (10 steps).
    warm = training.learning_rate(training.TrainConfig(learning_rate=4e-3, epochs=10, warmup_epochs=1), 100)
    np.testing.assert_allclose(
        [float(warm(s)) for s in (0, 5, 10, 99, 500)], [0, 2e-3, 4e-3, 4e-3, 4e-3], atol=1e-9
    )
    with pytest.raises(ValueError, match="learning_rate_schedule"):
        training.learning_rate(training.TrainConfig(learning_rate_schedule="step"), 100)


def test_divergence_watch_stops_at_the_first_non_finite_batch():
    model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
    model.compile(optimizer="sgd", loss="mse")
    x = np.ones((8, 2), "float32")
    y = np.ones((8, 1), "float32")
    y[4:] = np.nan  # batches 0 and 1 are finite, batch 2 is not
    watch = training.callbacks.DivergenceWatch()
    history = model.fit(x, y, batch_size=2, epochs=3, callbacks=[watch], verbose=0, shuffle=False)
    assert watch.diverged["epoch"] == 0 and watch.diverged["batch"] == 2
    assert not np.isfinite(watch.diverged["loss"]) and len(history.history["loss"]) == 1
    # Recformer's validation callback is one too: a diverged stage is never validated.
    assert issubclass(training.RankingValidation, training.callbacks.DivergenceWatch)


def test_time_limit_stops_at_an_epoch_end_or_within_the_epoch():
    x, y = np.ones((8, 2), "float32"), np.ones((8, 1), "float32")
    for within_epoch, steps in ((False, 4), (True, 1)):  # 4 batches of 2 an epoch
        model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
        model.compile(optimizer="sgd", loss="mse")
        limit = training.TimeLimit(0.0, within_epoch=within_epoch)
        history = model.fit(x, y, batch_size=2, epochs=3, callbacks=[limit], verbose=0)
        assert int(model.optimizer.iterations) == steps and len(history.history["loss"]) == 1


def test_validation_on_a_seeded_sample_of_users_scores_as_evaluate_on_it(data_root, tmp_path):
    config = dict(TINY, epochs=1, validation_users=100, seed=3)
    model, history, split, _ = training.train(SASREC, data_root / "ml-100k", tmp_path, config, verbose=0)
    sample = split.valid.sample(100, seed=3)
    assert len(sample) == 100 and len(split.valid) == 943
    from tfseqrec import evaluation

    # One epoch: the model holds that epoch's weights, which the sampled validation scored.
    result = evaluation.evaluate(model, sample, progress=False)
    assert history.history["val_ndcg_10"][0] == pytest.approx(result["ndcg@10"], abs=1e-6)
    assert json.load(open(tmp_path / "train_config.json"))["config"]["validation_users"] == 100


def test_strategy_by_name_trains_and_a_bad_tf_config_is_named(tmp_path, monkeypatch):
    from tfseqrec import distribute
    from tfseqrec.data import synthetic

    data = synthetic.write_csv(synthetic.generate(600, 40, 20, seed=1), tmp_path / "log.csv")
    config = {"epochs": 1, "hidden_dim": 8, "num_layers": 1, "max_sequence_length": 8, "dropout": 0.0}
    model, _, epochs = kinds.get("sasrec").train(
        data, tmp_path / "mirrored", config, verbose=0, strategy="mirrored"
    )
    assert epochs == 1 and os.path.exists(tmp_path / "mirrored" / "model.keras")
    assert type(model.distribute_strategy).__name__ == "MirroredStrategy"
    assert not distribute.is_multi_worker(model.distribute_strategy) and distribute.is_chief(
        model.distribute_strategy
    )
    assert distribute.worker_output_dir("runs/m", model.distribute_strategy) == "runs/m"
    # Two workers training for real: tests/test_multi_worker.py.
    monkeypatch.setenv(
        "TF_CONFIG", '{"cluster": {"worker": ["localhost:1"]}, "task": {"type": "worker", "index": 3}}'
    )
    with pytest.raises(ValueError, match="TF_CONFIG's task worker 3 is not in its cluster"):
        distribute.make_strategy("multi_worker")
    monkeypatch.setenv("TF_CONFIG", "{not json")
    with pytest.raises(ValueError, match="TF_CONFIG is not a cluster description"):
        distribute.make_strategy("multi_worker")
    with pytest.raises(ValueError, match="unknown strategy 'ps'"):
        distribute.make_strategy("ps")
    assert distribute.resolve(None) is None


# The effective defaults of ``tfseqrec train --model X`` with no options (they build the stored runs'
# models): the constructors' model options and each model's training defaults (tfseqrec.registry).
DEFAULTS = {
    "sasrec": dict(hidden_dim=64, num_layers=2, num_heads=1, dropout=0.1),
    "bert4rec": dict(hidden_dim=64, num_layers=2, num_heads=2, dropout=0.1),  # layers: 1 on short histories
    "hstu": dict(hidden_dim=50, num_layers=8, num_heads=2, dropout=0.2, temperature=0.05),
    "unisrec": dict(
        hidden_dim=64, num_layers=2, temperature=0.07, use_id_embeddings=False, id_dropout=0.0, num_experts=8
    ),
}
TRAINING_DEFAULTS = {
    "sasrec": dict(loss="softmax", learning_rate=2e-3, warmup_epochs=0.0),
    "bert4rec": dict(loss="softmax", learning_rate=None, mask_prob=None, warmup_epochs=None),  # by the data
    "hstu": dict(loss="softmax", learning_rate=None, warmup_epochs=0.0, num_negatives=None),  # by the data
    "unisrec": dict(loss="softmax", learning_rate=2e-3, warmup_epochs=0.0),
}


@pytest.mark.parametrize("name", sorted(DEFAULTS))
def test_defaults_come_from_the_constructor_and_the_registry(name):
    kind = kinds.get(name)
    config = kind.options({})
    assert config.model_options == {} and config.preset is None
    assert {key: getattr(config, key) for key in TRAINING_DEFAULTS[name]} == TRAINING_DEFAULTS[name]
    model = kind.build(config, 5)
    assert {key: getattr(model.backbone, key) for key in DEFAULTS[name]} == DEFAULTS[name]
    assert model.max_sequence_length == 200 and config.max_sequence_length is None  # the constructor's


def test_presets_split_into_training_and_model_options_and_are_recorded(tmp_path, data_root):
    assert tfseqrec.SASRec.preset_names() == ["sasrec_ml1m", "sasrec_ml1m_cosine"]
    assert tfseqrec.UniSRec.preset_names() == ["unisrec_scientific"]
    unisrec = kinds.get("unisrec").options(
        {"epochs": 2, "model_options": {"dropout": 0.3}}, preset="scientific"
    )
    assert unisrec.model_options == {
        "hidden_dim": 384,
        "num_layers": 2,
        "num_heads": 2,
        "dropout": 0.3,
        "use_id_embeddings": True,
    }
    assert (unisrec.epochs, unisrec.patience, unisrec.max_sequence_length, unisrec.preset) == (
        2,
        10,
        50,
        "scientific",
    )
    # The ML-1M presets are today's defaults, pinned: the same models and training options
    # (BERT4Rec's and HSTU's batch size is the data's; ML-1M's 6,040 windows settle it to 128),
    # but for the batch widths they were measured with, [50, 100], and BERT4Rec's learning rate and
    # mask share and HSTU's rate, which the data settle when unset (ML-1M's histories: 4e-3 and 0.2;
    # HSTU's 4e-3).
    assert presets.default_batch_size(6040) == 128
    for name in ("sasrec", "bert4rec", "hstu"):
        kind = kinds.get(name)
        preset, default = kind.options({}, preset="ml1m"), kind.options({})
        assert default.batch_size == (128 if name == "sasrec" else None)
        assert dataclasses.replace(
            preset,
            preset=None,
            model_options={},
            batch_size=default.batch_size,
            bucket_boundaries=default.bucket_boundaries,
            max_sequence_length=None,  # the constructor's 200 unless given
            **(
                {"learning_rate": None, "mask_prob": None, "warmup_epochs": None}
                if name == "bert4rec"
                else {}
            ),
            **({"learning_rate": None} if name == "hstu" else {}),
        ) == default and preset.bucket_boundaries == [50, 100]
        keras.utils.set_random_seed(0)
        built = kind.build(preset, 5).get_config()
        keras.utils.set_random_seed(0)
        again = kind.build(default, 5).get_config()
        for config in (built, again):  # layer names count up from model to model
            config["name"] = config["backbone"]["config"]["name"] = config["backbone"]["name"] = None
        assert built == again
    with pytest.raises(ValueError, match="hstu has no preset 'x'; its presets: ml1m"):
        kinds.get("hstu").options({}, preset="x")
    out = tmp_path / "run"
    SASREC.train(
        data_root / "ml-100k",
        str(out),
        {**TINY, "epochs": 1, "num_layers": 1, "preset": "ml1m", "max_sequence_length": 10},
        verbose=0,
    )
    recorded = json.loads((out / "train_config.json").read_text())["config"]
    assert recorded["preset"] == "ml1m" and recorded["max_sequence_length"] == 10
    assert recorded["model_options"] == {"hidden_dim": 8, "num_layers": 1, "num_heads": 1, "dropout": 0.1}
    assert (
        "hidden_dim" not in recorded
        and training.TrainConfig.from_dict(recorded).model_options["hidden_dim"] == 8
    )


def test_the_ml1m_cosine_preset_is_ml1m_with_the_stored_recipe_only():
    # benchmarks/results/ml1m-sasrec-window-stride-cosine-80-*.json ran the ml1m settings with
    # these options: the preset must stay exactly that, whatever the defaults become.
    kind = kinds.get("sasrec")
    ml1m, cosine = kind.options({}, preset="ml1m"), kind.options({}, preset="ml1m-cosine")
    recipe = {
        "learning_rate": 0.004,
        "learning_rate_schedule": "cosine",
        "warmup_epochs": 1.0,
        "epochs": 80,
        "window_stride": 200,
    }
    assert {key: getattr(cosine, key) for key in recipe} == recipe
    as_ml1m = {key: getattr(ml1m, key) for key in recipe}
    assert dataclasses.replace(cosine, preset="ml1m", **as_ml1m) == ml1m
    # A flag still overrides it (a longer decay on a larger log, say).
    assert kind.options({"epochs": 120}, preset="ml1m-cosine").epochs == 120


def test_a_flat_train_config_of_before_model_options_loads_evaluates_and_exports(tmp_path, data_root):
    out = tmp_path / "run"
    SASREC.train(data_root / "ml-100k", str(out), {**TINY, "epochs": 1, "num_layers": 1}, verbose=0)
    recorded = json.loads((out / "train_config.json").read_text())["config"]
    # As written before presets: model options flat beside the training options, None meaning the
    # constructor's default, UniSRec's num_experts and adaptor_dropout recorded for every model.
    flat = {k: v for k, v in recorded.items() if k not in ("model_options", "validation", "sampler")}
    old = {
        "config": {
            **flat,
            "hidden_dim": 8,
            "num_layers": 1,
            "num_heads": None,
            "dropout": None,
            "position_origin": None,
            "num_experts": 8,
            "adaptor_dropout": 0.2,
            "temperature": None,
        },
        "data": str(data_root / "ml-100k" / "u.data"),
    }
    (out / "train_config.json").write_text(json.dumps(old))
    config = SASREC.options(old["config"])
    assert config.model_options == {
        "hidden_dim": 8,
        "num_layers": 1,
        "num_experts": 8,
        "adaptor_dropout": 0.2,
    }
    assert SASREC.constructor_options(config) == {"hidden_dim": 8, "num_layers": 1}
    # The values the model never took are left out; the model starts from the same weights.
    rebuilt = training.build_model(SASREC, config, 1682)
    assert (rebuilt.backbone.hidden_dim, rebuilt.backbone.num_layers, rebuilt.backbone.num_heads) == (8, 1, 1)
    new_form = dataclasses.replace(config, model_options={"hidden_dim": 8, "num_layers": 1})
    for a, b in zip(
        rebuilt.get_weights(), training.build_model(SASREC, new_form, 1682).get_weights(), strict=True
    ):
        np.testing.assert_array_equal(a, b)
    model, vocabulary, info = tfseqrec.load(str(out))
    assert info["config"]["num_experts"] == 8 and model.backbone.hidden_dim == 8
    split, _, _ = splits.prepare(
        tfseqrec.data.read_interactions(data_root / "ml-100k"), vocabulary=vocabulary
    )
    assert 0 < tfseqrec.evaluate(model, split.test, progress=False)["ndcg@10"] < 1
    path, version = tfseqrec.export_model(model, vocabulary, tmp_path / "serving", k=3, warmup=False)
    assert version == 1 and os.path.isdir(path)


def test_model_options_are_checked_by_building_the_model():
    config = SASREC.options({"hidden_dim": 0})  # the training config checks training options only
    with pytest.raises(ValueError, match="hidden_dim must be an integer >= 1, got 0"):
        SASREC.build(config, 5)
    hstu = kinds.get("hstu")
    with pytest.raises(ValueError, match="temperature must be a finite number > 0, got 0"):
        hstu.build(hstu.options({"temperature": 0, "num_layers": 1}), 5)
    with pytest.raises(ValueError, match="learning_rate must be"):
        SASREC.options({"learning_rate": 0})


def test_each_kind_has_its_own_sizes_and_a_named_loss_is_that_loss():
    sasrec, hstu = training.TrainConfig(), training.TrainConfig(model="hstu")
    assert (sasrec.loss, sasrec.num_negatives, hstu.loss, hstu.num_negatives) == (
        "softmax",
        None,
        "softmax",
        None,
    )
    tiny = {"num_layers": 1, "hidden_dim": 8}
    full = training.build_model(kinds.get("hstu"), training.TrainConfig(model="hstu", model_options=tiny), 10)
    assert full.loss_fn.get_config() == losses.FullSoftmaxCrossEntropy(exclude_history=True).get_config()
    # The paper's sampled softmax, with the kind's 128 negatives.
    config = training.TrainConfig(model="hstu", loss="sampled_softmax", model_options=tiny)
    sampled = training.build_model(kinds.get("hstu"), config, 10)
    assert (
        isinstance(sampled.loss_fn, losses.SampledSoftmaxCrossEntropy)
        and sampled.loss_fn.num_negatives == 128
    )
    assert (
        sampled.loss_fn.per_position and config.negatives_per_position
    )  # the reference draws them per position
    assert sampled.loss_fn.sampler == "log_uniform" and config.sampler is None  # logQ-corrected by default
    uniform = dataclasses.replace(config, sampler="uniform")
    assert training.build_model(kinds.get("hstu"), uniform, 10).loss_fn.sampler == "uniform"
    with pytest.raises(ValueError, match="sampler applies to the sampled_softmax loss, not 'bce'"):
        training.TrainConfig(loss="bce", sampler="uniform")
    with pytest.raises(ValueError, match="sampler must be one of"):
        training.TrainConfig(loss="sampled_softmax", sampler="zipf")
    shared = training.build_model(
        SASREC, training.TrainConfig(loss="sampled_softmax", num_negatives=8, model_options=tiny), 10
    )
    assert not shared.loss_fn.per_position
    with pytest.raises(
        ValueError, match="negatives_per_position applies to the sampled_softmax loss, not 'bce'"
    ):
        training.build_model(
            SASREC, training.TrainConfig(loss="bce", negatives_per_position=True, model_options=tiny), 10
        )
    assert training.build_model(
        SASREC, training.TrainConfig(model_options=tiny), 10
    ).loss_fn.get_config() == (losses.FullSoftmaxCrossEntropy(exclude_history=True).get_config())


def test_hstu_reads_event_times_when_the_data_has_them_and_says_so(tmp_path, capsys):
    from tfseqrec import evaluation
    from tfseqrec.data import synthetic

    data = synthetic.write_csv(synthetic.generate(600, 40, 20, seed=1), tmp_path / "log.csv")
    config = {"model": "hstu", "epochs": 1, "hidden_dim": 8, "num_layers": 1, "max_sequence_length": 8}
    model, split, _ = kinds.get("hstu").train(data, tmp_path / "timed", config, verbose=2)
    assert "hstu: num_time_buckets 128 (" in capsys.readouterr().err
    assert model.uses_timestamps and model.backbone.num_time_buckets == 128
    recorded = json.load(open(tmp_path / "timed" / "train_config.json"))["config"]
    assert recorded["model_options"]["num_time_buckets"] == 128
    assert np.abs(model.backbone.blocks[0].time_bias.numpy()).max() > 0  # trained: the inputs carried times
    assert evaluation.evaluate(model, split.test, progress=False)["num_users"] == len(split.test)
    untimed = {**config, "num_time_buckets": 0}
    model, _, _ = kinds.get("hstu").train(data, tmp_path / "untimed", untimed, verbose=2)
    assert (
        "num_time_buckets" not in capsys.readouterr().err and not model.uses_timestamps
    )  # given, not chosen


def test_the_default_batch_size_gives_24_batches_an_epoch_and_scales_a_settled_rate(tmp_path, capsys):
    # Hand-computed: the largest of 128, 64, 32, 16 with windows >= 24 * size, else 16.
    windows = [0, 383, 384, 767, 768, 1535, 1536, 3071, 3072, 10**6]
    assert [presets.default_batch_size(n) for n in windows] == [16, 16, 16, 16, 32, 32, 64, 64, 128, 128]
    # Hand-computed: the square root of the batches' ratio.
    assert presets.batch_learning_rate(4e-3, 128) == 4e-3
    assert presets.batch_learning_rate(4e-3, 32) == pytest.approx(2e-3)
    assert presets.batch_learning_rate(1e-3, 16) == pytest.approx(1e-3 / 8**0.5)
    from tfseqrec.data import synthetic

    # 800 users: one window each, 800 >= 24 * 32 but < 24 * 64.
    data = synthetic.write_csv(synthetic.generate(6000, 40, 800, seed=1), tmp_path / "log.csv")
    bert4rec = kinds.get("bert4rec")
    config = {"model": "bert4rec", "epochs": 1, "hidden_dim": 8, "num_heads": 1, "max_sequence_length": 8}
    _, split, _ = bert4rec.train(data, tmp_path / "auto", config, verbose=2)
    captured = capsys.readouterr()
    assert "batch_size 32 (800 training windows" in captured.err and "batch_size" not in captured.out
    # Every training item is a Cloze target; a window holds a user's newest 8 (NumPy oracle).
    total = int(split.train.lengths.sum())
    outside = total - int(np.minimum(split.train.lengths, 8).sum())
    assert 0 < outside < total and f"{outside:,} of {total:,} training targets" in captured.err
    run = json.load(open(tmp_path / "auto" / "train_config.json"))
    recorded = run["config"]
    # Windows of 8 are short histories: 4e-3 at batches of 128, times sqrt(32/128) = 1/2.
    assert (recorded["batch_size"], recorded["learning_rate"]) == (32, pytest.approx(2e-3))
    # The run records each choice, as for_data makes it on the same sequences.
    chosen = presets.for_data("bert4rec", split.train, bert4rec.options(config))
    assert {k: v["value"] for k, v in run["choices"].items()} == dict(chosen)
    # Short histories train one layer; the model the run keeps has one.
    assert recorded["model_options"]["num_layers"] == 1
    model, _, _ = tfseqrec.load(str(tmp_path / "auto"))
    assert (model.backbone.num_layers, model.backbone.initializer_range) == (1, 0.1)
    bert4rec.train(data, tmp_path / "given", {**config, "batch_size": 128, "window_stride": 8}, verbose=2)
    err = capsys.readouterr().err
    assert "batch_size" not in err and "training targets" not in err  # windows 8 apart hold them all
    recorded = json.load(open(tmp_path / "given" / "train_config.json"))["config"]
    assert (recorded["batch_size"], recorded["learning_rate"]) == (128, 4e-3)
    # A learning rate given is kept at the batch the data settle.
    bert4rec.train(data, tmp_path / "rate", {**config, "learning_rate": 3e-3}, verbose=2)
    assert "learning_rate" not in capsys.readouterr().err
    recorded = json.load(open(tmp_path / "rate" / "train_config.json"))["config"]
    assert (recorded["batch_size"], recorded["learning_rate"]) == (32, 3e-3)
    # SASRec's training defaults keep 128 whatever the data.
    assert training.TrainConfig().batch_size == 128 and training.TrainConfig(model="hstu").batch_size is None


def test_hstus_rate_is_4e_3_at_batches_of_128_and_scales_with_a_smaller_settled_batch():
    # 800 users of 9 items: one window each settle batches of 32 (as ML-100K's 943 do).
    seqs = splits.Sequences.from_list([str(u) for u in range(800)], [list(range(3, 12))] * 800)
    given = {"max_sequence_length": 8}
    chosen = presets.for_data("hstu", seqs, given)
    assert (chosen["batch_size"], chosen["learning_rate"]) == (32, pytest.approx(2e-3))
    chosen = presets.for_data("hstu", seqs, {**given, "batch_size": 128})
    assert "batch_size" not in chosen and chosen["learning_rate"] == 4e-3


def test_batch_widths_and_bert4rec_training_follow_the_history_length():
    # Mean window of 19 items (under 20: short) and of 20 (long); each history cut to the window.
    short = splits.Sequences.from_list(["a", "b"], [list(range(3, 21)), list(range(3, 23))])
    long = splits.Sequences.from_list(["a", "b"], [list(range(3, 21)), list(range(3, 25))])
    at_128 = {"batch_size": 128}  # the rates as set for batches of 128
    chosen = presets.for_data("bert4rec", short, at_128)
    assert (chosen["learning_rate"], chosen["mask_prob"], chosen["bucket_boundaries"]) == (
        4e-3,
        0.4,
        [10, 20, 50, 100],
    )
    assert chosen.model_options == {
        "num_layers": 1,
        "mask_prob": 0.4,
        "initializer_range": 0.1,
        "max_sequence_length": 200,
    }
    assert chosen.reasons["initializer_range"] == chosen.reasons["mask_prob"]
    assert chosen.reasons["num_layers"] == chosen.reasons["mask_prob"]  # one rule, one reason
    chosen = presets.for_data("bert4rec", long, at_128)
    assert (chosen["learning_rate"], chosen["mask_prob"], chosen["bucket_boundaries"]) == (
        4e-3,
        0.2,
        [50, 100],
    )
    assert (chosen["num_layers"], chosen["initializer_range"]) == (2, 0.02)
    # A model option given stays (not chosen); the others are.
    chosen = presets.for_data("bert4rec", short, {**at_128, "model_options": {"num_layers": 3}})
    assert "num_layers" not in chosen and chosen["mask_prob"] == 0.4
    assert presets.for_data("bert4rec", long, {**at_128, "max_sequence_length": 10})["mask_prob"] == 0.4
    # What is given stays; every model's widths follow the histories.
    chosen = presets.for_data("bert4rec", short, {**at_128, "learning_rate": 2e-3, "bucket_boundaries": []})
    assert "learning_rate" not in chosen and "bucket_boundaries" not in chosen and chosen["mask_prob"] == 0.4
    assert presets.for_data("sasrec", short)["bucket_boundaries"] == [10, 20, 50, 100]
    assert "bucket_boundaries" not in presets.for_data("sasrec", short, {"bucket_boundaries": [50, 100]})
    # HSTU's rate is the data's, the same on either length (for batches of 128).
    assert [presets.for_data("hstu", s, at_128)["learning_rate"] for s in (short, long)] == [4e-3, 4e-3]
    # A TrainConfig is read as the options given; a preset's options are given too.
    config = training.TrainConfig(model="bert4rec", batch_size=128)
    assert dict(presets.for_data("bert4rec", short, config)) == dict(
        presets.for_data("bert4rec", short, at_128)
    )
    assert set(presets.for_data("sasrec", short, {"preset": "ml1m"})) == set()


def test_time_buckets_follow_the_data_and_are_refused_where_they_cannot_apply():
    timed = splits.Sequences.from_list(["u"], [[3, 4]], [[10, 20]])
    plain = splits.Sequences.from_list(["u"], [[3, 4]])
    assert presets.for_data("hstu", timed)["num_time_buckets"] == 128
    assert presets.for_data("hstu", plain)["num_time_buckets"] == 0
    given = {"model_options": {"num_time_buckets": 16}}
    assert "num_time_buckets" not in presets.for_data("hstu", timed, given)
    with pytest.raises(ValueError, match="num_time_buckets=16 needs event times, and the data has none"):
        presets.for_data("hstu", plain, given)
    with pytest.raises(
        ValueError, match="num_time_buckets applies to models with a time bias \\(hstu\\), not sasrec"
    ):
        presets.for_data("sasrec", timed, given)
    assert "num_time_buckets" not in presets.for_data("sasrec", timed)


def test_initial_weights_are_a_function_of_the_seed_alone():
    config = SASREC.options({"model_options": {"hidden_dim": 8, "num_layers": 1}, "seed": 5})
    first = training.build_model(SASREC, config, 20).get_weights()
    # Other code drawing from the global streams before the build (a data reader, a check build).
    random.random(), np.random.rand(3), keras.random.uniform((2,)), SASREC.check(config)
    second = training.build_model(SASREC, config, 20).get_weights()
    assert len(first) == len(second) and all(np.array_equal(a, b) for a, b in zip(first, second))
    other = training.build_model(SASREC, dataclasses.replace(config, seed=6), 20).get_weights()
    assert not np.array_equal(first[0], other[0])


def test_a_rerun_with_the_same_seed_trains_the_same_weights(tmp_path):
    from tfseqrec.data import synthetic

    data = synthetic.write_csv(synthetic.generate(600, 40, 20, seed=1), tmp_path / "log.csv")
    config = {"epochs": 1, "hidden_dim": 8, "num_layers": 1, "max_sequence_length": 8, "seed": 3}
    first, _, _ = SASREC.train(data, tmp_path / "a", config, verbose=0)
    random.random(), np.random.rand(3), keras.random.uniform((2,))
    second, _, _ = SASREC.train(data, tmp_path / "b", config, verbose=0)
    for a, b in zip(first.get_weights(), second.get_weights(), strict=True):
        np.testing.assert_array_equal(a, b)


def test_without_validation_the_second_to_last_item_trains_for_a_fixed_number_of_epochs(tmp_path):
    from tfseqrec.data import synthetic

    data = synthetic.write_csv(synthetic.generate(600, 40, 20, seed=1), tmp_path / "log.csv")
    config = {"epochs": 2, "hidden_dim": 8, "num_layers": 1, "max_sequence_length": 8, "patience": 0}
    model, history, split, _ = training.train(
        SASREC, data, tmp_path / "none", {**config, "validation": "none"}, verbose=0
    )
    assert len(history.history["loss"]) == 2 and not any(k.startswith("val_") for k in history.history)
    _, _, with_valid, vocabulary = training.train(SASREC, data, tmp_path / "last", config, verbose=0)
    assert len(split.valid) == 0 and len(with_valid.valid) == len(split.test) == len(with_valid.test)
    # Each evaluable user trains on one item more: its validation item.
    assert split.train.num_events == with_valid.train.num_events + len(with_valid.valid)
    recorded = json.load(open(tmp_path / "none" / "train_config.json"))["config"]
    assert recorded["validation"] == "none" and os.path.exists(tmp_path / "none" / "model.keras")
    with pytest.raises(ValueError, match="validation='none' trains on each user's second-to-last item"):
        training.fit(SASREC, with_valid, vocabulary, tmp_path / "x", {**config, "validation": "none"})
