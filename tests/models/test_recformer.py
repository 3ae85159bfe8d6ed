"""Recformer: the pretrained start reproduces BERT, every task trains the shared backbone, save/load."""

import math
import os

import keras
import numpy as np
import tensorflow as tf

from tests.test_case import TestCase
from tfseqrec.data import text
from tfseqrec.models.recformer import (
    Recformer,
    RecformerAligner,
    RecformerBackbone,
    RecformerPretrainer,
    arrays,
    convert,
    load_bert_weights,
    minilm_path,
)


def _layer_norm(x, gamma, beta, eps=1e-12):
    mean = x.mean(-1, keepdims=True)
    var = ((x - mean) ** 2).mean(-1, keepdims=True)
    return (x - mean) / np.sqrt(var + eps) * gamma + beta


def _bert_forward(w, ids, num_layers, num_heads):
    """A plain NumPy BERT encoder (Hugging Face weight names), the reference."""
    erf = np.vectorize(math.erf)
    x = w["embeddings.word_embeddings.weight"][ids] + w["embeddings.position_embeddings.weight"][: len(ids)]
    x = _layer_norm(
        x + w["embeddings.token_type_embeddings.weight"][0],
        w["embeddings.LayerNorm.weight"],
        w["embeddings.LayerNorm.bias"],
    )
    d = x.shape[-1]
    dh = d // num_heads
    for i in range(num_layers):
        p = f"encoder.layer.{i}."

        def dense(t, name, p=p):
            return t @ w[p + name + ".weight"].T + w[p + name + ".bias"]

        q, k, v = (
            dense(x, f"attention.self.{n}").reshape(-1, num_heads, dh) for n in ("query", "key", "value")
        )
        scores = np.einsum("qhd,khd->hqk", q, k) / math.sqrt(dh)
        weights = np.exp(scores - scores.max(-1, keepdims=True))
        weights /= weights.sum(-1, keepdims=True)
        context = np.einsum("hqk,khd->qhd", weights, v).reshape(-1, d)
        x = _layer_norm(
            x + dense(context, "attention.output.dense"),
            w[p + "attention.output.LayerNorm.weight"],
            w[p + "attention.output.LayerNorm.bias"],
        )
        hidden = dense(x, "intermediate.dense")
        hidden = 0.5 * hidden * (1.0 + erf(hidden / math.sqrt(2.0)))
        x = _layer_norm(
            x + dense(hidden, "output.dense"),
            w[p + "output.LayerNorm.weight"],
            w[p + "output.LayerNorm.bias"],
        )
    return x


def _backbone():
    return RecformerBackbone(
        vocabulary_size=40,
        hidden_dim=8,
        num_layers=2,
        num_heads=2,
        intermediate_dim=16,
        max_tokens=24,
        max_sequence_length=4,
        attention_window=4,
        dropout=0.0,
    )


def _tiny():
    return Recformer(_backbone(), num_items=6)


def _batch(rng, batch=4, length=24):
    ids = rng.integers(5, 40, size=(batch, length))
    mask = np.ones((batch, length), bool)
    mask[:, length - 5 :] = False
    types = np.where(np.arange(length) % 2, text.VALUE_TYPE, text.KEY_TYPE)[None].repeat(batch, 0)
    types[:, 0] = text.CLS_TYPE
    return {
        "token_ids": np.where(mask, ids, 0),
        "token_type_ids": np.where(mask, types, 0).astype("int32"),
        "item_position_ids": np.where(mask, (np.arange(length) // 5).clip(0, 4), 0).astype("int32"),
        "padding_mask": mask,
    }


class RecformerTest(TestCase):
    def test_minilm_weights_reproduce_the_numpy_bert(self):
        from safetensors.numpy import load_file

        path = minilm_path()
        tokenizer = text.ItemTextTokenizer(os.path.join(path, "vocab.txt"), attributes=["title"])
        tokens = tokenizer.wordpieces(tf.constant(["Hello world, Recformer reads item text."]))
        ids = np.array([101] + tokens[0].numpy().tolist() + [102])
        self.assertEqual(ids[:3].tolist(), [101, 7592, 2088])  # BERT uncased ids of "hello world"
        backbone = load_bert_weights(RecformerBackbone(max_tokens=64, attention_window=64, dropout=0.0), path)
        inputs = {
            "token_ids": ids[None],
            "token_type_ids": np.zeros((1, len(ids)), "int32"),
            "item_position_ids": np.zeros((1, len(ids)), "int32"),
            "padding_mask": np.ones((1, len(ids)), bool),
        }
        got = backbone(inputs)[0]
        expected = _bert_forward(load_file(os.path.join(path, "model.safetensors")), ids, 6, 12)
        self.assertAllClose(got, expected, atol=1e-4)

    def test_finetune_fit_scores_and_save_load(self):
        rng = np.random.default_rng(0)
        model = _tiny()
        model.build()
        model.set_item_embeddings(rng.normal(size=(6, 8)))
        x, y = _batch(rng), np.array([0, 1, 2, 3])
        model.compile(optimizer=keras.optimizers.Adam(1e-2))
        history = model.fit(x, y, epochs=5, batch_size=4, verbose=0)
        self.assertLess(history.history["loss"][-1], history.history["loss"][0])
        scores = model.scores(model(x))
        self.assertEqual(tuple(scores.shape), (4, 6))
        self.assertAllInRange(np.asarray(scores) * model.temperature, -1.0 - 1e-5, 1.0 + 1e-5)
        path = os.path.join(self.get_temp_dir(), "recformer.keras")
        model.save(path)
        loaded = keras.saving.load_model(path)
        self.assertAllClose(loaded.scores(loaded(x)), scores, atol=1e-5)
        bigger = model.resized(9)
        self.assertEqual(tuple(bigger.item_embeddings.shape), (9, 8))
        self.assertAllClose(bigger(x), model(x), atol=1e-6)

    def test_pretrainer_fits_and_round_trips(self):
        rng = np.random.default_rng(1)
        model = RecformerPretrainer(_backbone(), mask_token_id=3, first_word_piece_id=5, seed=1)
        x, y = _batch(rng), _batch(rng)
        model.compile(optimizer=keras.optimizers.Adam(1e-2))
        history = model.fit(x, y, epochs=3, batch_size=4, verbose=0)
        self.assertTrue(np.all(np.isfinite(history.history["loss"])))
        self.run_serialization_test(model)

    def test_tasks_on_one_backbone_train_the_same_weights(self):
        rng = np.random.default_rng(2)
        model = _tiny()
        model.build()
        x = _batch(rng)
        before = np.asarray(model(x))
        aligner = RecformerAligner(model.backbone, temperature=model.temperature)
        aligner.compile(optimizer=keras.optimizers.Adam(1e-2))
        history = aligner.fit(x, epochs=3, batch_size=4, verbose=0)
        self.assertLess(history.history["loss"][-1], history.history["loss"][0])
        # Alignment trained the recommender's own encoder: its [CLS] vectors moved.
        self.assertGreater(float(np.abs(np.asarray(model(x)) - before).max()), 1e-3)
        self.assertAllClose(aligner(x)[:, 0], model(x), atol=1e-6)

    def test_mean_pooling_is_the_mean_of_the_real_tokens(self):
        rng = np.random.default_rng(3)
        backbone = _backbone()
        model = Recformer(backbone, num_items=6, pooling="mean")
        model.build()
        x = _batch(rng)
        states = np.asarray(backbone(x))
        mask = x["padding_mask"][..., None]
        self.assertAllClose(model(x), (states * mask).sum(1) / mask.sum(1), atol=1e-5)
        self.assertAllClose(
            Recformer(backbone, num_items=6)(x), states[:, 0], atol=1e-6
        )  # [CLS], the default
        self.assertEqual(
            keras.saving.deserialize_keras_object(keras.saving.serialize_keras_object(model)).pooling, "mean"
        )
        self.assertEqual(model.resized(8).pooling, "mean")
        with self.assertRaisesRegex(ValueError, "pooling must be 'cls' or 'mean'"):
            Recformer(backbone, pooling="max")

    def test_narrow_batches_score_as_full_width_ones(self):
        from tfseqrec.models.recformer import RecformerRecommender

        rng = np.random.default_rng(4)
        model = _tiny()
        model.build()
        model.set_item_embeddings(rng.normal(size=(6, 8)))
        lengths = [0, 0, 0, 3, 2, 4, 1, 2, 3, 1]  # reserved ids have no tokens
        tokens = tf.ragged.constant(
            [list(rng.integers(5, 40, size=n)) for n in lengths], dtype=tf.int64, ragged_rank=1
        )
        types = tf.ragged.map_flat_values(lambda t: tf.ones_like(t, tf.int32) * text.VALUE_TYPE, tokens)
        window = np.array([[0, 0, 3, 4], [5, 6, 7, 8]])
        full = RecformerRecommender(model, tokens, types, cls_id=2)
        narrow = RecformerRecommender(model, tokens, types, cls_id=2, pad_multiple=2)
        self.assertEqual(
            int(narrow.pack(tf.ragged.constant([[3, 4]], dtype=tf.int64))["token_ids"].shape[1]), 6
        )
        self.assertAllClose(narrow.score(window), full.score(window), atol=1e-5)

    def test_cached_layers_read_each_item_alone_and_score_as_computed_per_batch(self):
        from tfseqrec.models.recformer import RecformerRecommender

        rng = np.random.default_rng(5)
        backbone = RecformerBackbone(
            vocabulary_size=40,
            hidden_dim=8,
            num_layers=2,
            num_heads=2,
            intermediate_dim=16,
            max_tokens=24,
            max_sequence_length=4,
            attention_window=4,
            dropout=0.0,
            cached_layers=1,
        )
        model = Recformer(backbone, num_items=7)
        model.build()
        model.set_item_embeddings(rng.normal(size=(7, 8)))
        table = backbone.state_position_embedding.embeddings
        table.assign(rng.normal(size=table.shape))  # order matters to the upper block
        lengths = [0, 0, 0, 3, 2, 4, 1, 2, 3, 1]  # reserved ids have no tokens
        tokens = tf.ragged.constant(
            [list(rng.integers(5, 40, size=n)) for n in lengths], dtype=tf.int64, ragged_rank=1
        )
        types = tf.ragged.constant(
            [[text.KEY_TYPE] + [text.VALUE_TYPE] * (n - 1) if n else [] for n in lengths],
            dtype=tf.int32,
            ragged_rank=1,
        )
        per_batch = RecformerRecommender(model, tokens, types, cls_id=2, pad_multiple=2)
        cached = RecformerRecommender(model, tokens, types, cls_id=2, pad_multiple=2).cache_item_states(
            batch_size=3
        )
        window = np.array([[0, 0, 3, 4], [5, 6, 7, 8], [9, 3, 3, 5]])
        self.assertAllClose(cached.score(window), per_batch.score(window), atol=1e-5)

        # The oracle, layer by layer: each item alone through the embedding and block 0,
        # a lone [CLS], then block 1 over [CLS] + the newest item's states + the older one's.
        def lower(ids, token_types, item_position):
            inputs = {
                "token_ids": np.array([ids]),
                "token_type_ids": np.array([token_types], "int32"),
                "item_position_ids": np.array([[0] + [item_position] * (len(ids) - 1)], "int32"),
                "padding_mask": np.ones((1, len(ids)), bool),
            }
            x = backbone.embedding(inputs)
            return np.asarray(backbone.blocks[0](x, padding_mask=inputs["padding_mask"]))[0]

        parts, positions = [lower([2], [text.CLS_TYPE], 0)], [0]
        for age, item in enumerate([4, 3], start=1):  # newest first
            ids, item_types = tokens[item].numpy().tolist(), types[item].numpy().tolist()
            parts.append(lower([2] + ids, [text.CLS_TYPE] + item_types, 1)[1:])
            positions += [age] * len(ids)
        x = np.concatenate(parts)[None] + np.asarray(table)[positions][None]
        expected = np.asarray(backbone.blocks[1](x, padding_mask=np.ones(x.shape[:2], bool)))[0, 0]
        self.assertAllClose(cached.encode_histories(window[:1])[0], expected, atol=1e-5)
        self.assertAllClose(per_batch.encode_histories(window[:1])[0], expected, atol=1e-5)

        # Only the upper block and the second position table train; the cache stays valid.
        trainable = {w.path for w in model.trainable_weights}
        self.assertTrue(trainable and all("block_1" in p or "state_position" in p for p in trainable))
        frozen = [np.asarray(w).copy() for w in backbone.embedding.weights + backbone.blocks[0].weights]
        upper = [np.asarray(w).copy() for w in backbone.blocks[1].weights]
        x_train = cached.pack(tf.ragged.constant([[3, 4], [5, 6, 7], [8, 9]], dtype=tf.int64))
        model.compile(optimizer=keras.optimizers.Adam(1e-2))
        model.fit(x_train, np.array([0, 1, 2]), epochs=2, verbose=0)
        for before, w in zip(frozen, backbone.embedding.weights + backbone.blocks[0].weights):
            self.assertAllEqual(before, w)
        self.assertGreater(
            max(float(np.abs(b - np.asarray(w)).max()) for b, w in zip(upper, backbone.blocks[1].weights)),
            1e-4,
        )
        self.assertAllClose(cached.score(window), per_batch.score(window), atol=1e-5)

        path = os.path.join(self.get_temp_dir(), "cached.keras")
        model.save(path)
        loaded = keras.saving.load_model(path)
        self.assertEqual(loaded.backbone.cached_layers, 1)
        again = RecformerRecommender(loaded, tokens, types, cls_id=2).cache_item_states()
        self.assertAllClose(again.score(window), cached.score(window), atol=1e-5)

    def test_cached_layers_refuse_inputs_without_states_and_a_backbone_without_upper_layers(self):
        backbone = RecformerBackbone(
            vocabulary_size=40,
            hidden_dim=8,
            num_layers=2,
            num_heads=2,
            intermediate_dim=16,
            max_tokens=24,
            max_sequence_length=4,
            attention_window=4,
            cached_layers=1,
        )
        with self.assertRaisesRegex(ValueError, "token_states"):
            backbone(_batch(np.random.default_rng(6)))
        with self.assertRaisesRegex(ValueError, "at least one block must read the history"):
            RecformerBackbone(vocabulary_size=40, hidden_dim=8, num_layers=2, num_heads=2, cached_layers=2)


def _catalogue_model():
    """A catalogue of 4 titled items and a tiny model over it (``arrays``' NumPy inputs)."""
    vocabulary = ["[PAD]", "[UNK]", "[CLS]", "title", "red", "blue", "pen", "ink"]
    texts = np.array([[""]] * 3 + [["red pen"], ["blue pen"], ["red ink"], ["blue ink"]], dtype=object)
    catalogue = arrays.Catalogue.of_texts(texts, vocabulary, ["title"], [4])
    backbone = RecformerBackbone(
        vocabulary_size=8, hidden_dim=8, num_layers=1, num_heads=2, intermediate_dim=16,
        max_tokens=16, max_sequence_length=3, attention_window=4, dropout=0.0,
    )  # fmt: skip
    return catalogue, Recformer(backbone, num_items=4)


def test_array_ranks_are_numpys_over_the_table():
    catalogue, model = _catalogue_model()
    model.set_item_embeddings(np.random.default_rng(0).normal(size=(4, 8)))
    # Vocabulary ids 3..6; the last case's target (3) is in its own history and stays a candidate.
    histories, targets = [[3], [4, 5], [5, 3, 4]], [4, 6, 3]
    got = arrays.ranks(model, catalogue, histories, targets, batch_size=2)
    vectors = np.asarray(model(catalogue.pack(histories, model.backbone)))
    table = np.asarray(model.item_embeddings)
    cosine = vectors @ table.T / np.outer(np.linalg.norm(vectors, axis=1), np.linalg.norm(table, axis=1))
    expected = []
    for row, (history, target) in enumerate(zip(histories, targets)):
        scores = cosine[row].copy()
        scores[[h - 3 for h in history if h != target]] = -np.inf
        expected.append(int(np.sum(scores >= scores[target - 3])) - 1)  # the others at least as high
    assert got.tolist() == expected


def test_finetune_keeps_the_best_validated_epoch():
    catalogue, model = _catalogue_model()
    histories, targets = [[3], [4], [5], [3, 4], [4, 5]], [4, 5, 6, 5, 6]
    pairs = arrays.Pairs(catalogue, model.backbone, histories, targets, batch_size=2, seed=0)
    keras.utils.set_random_seed(0)
    rows = arrays.finetune(
        model, catalogue, pairs, epochs=3, stage2_epochs=2, learning_rate=3e-2,
        validation=(histories, targets), patience=5,
    )  # fmt: skip
    assert [(r["stage"], r["epoch"]) for r in rows] == [(1, 1), (1, 2), (1, 3), (2, 1), (2, 2)]
    ranks = arrays.ranks(model, catalogue, histories, targets)
    ndcg = float(np.mean(np.where(ranks < 10, 1 / np.log2(ranks + 2), 0.0)))
    # The model left behind is the best epoch's, its table included.
    np.testing.assert_allclose(ndcg, max(r["val_ndcg@10"] for r in rows), atol=1e-6)


def test_a_half_precision_checkpoint_reads_as_float32(tmp_path):
    from safetensors.numpy import save_file

    save_file(
        {"bert.embeddings.word_embeddings.weight": np.ones((2, 3), np.float16)},
        str(tmp_path / "model.safetensors"),
    )
    _, weights = convert.read_bert_checkpoint(str(tmp_path))
    assert weights["embeddings.word_embeddings.weight"].dtype == np.float32
