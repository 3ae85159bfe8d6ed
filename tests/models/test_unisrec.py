"""UniSRec: text vectors through the adaptor, cosine scores, the text table, the sentence encoder."""

import os

import keras
import numpy as np
import pytest
import tensorflow as tf

from tests.layers.test_moe_adaptor import _numpy_adaptor
from tfseqrec.data import pipeline, splits, vocab
from tfseqrec.models import SASRec, SentenceEncoder, UniSRec

NUM_ITEMS, TEXT_DIM = 10, 6


def _text(seed=0):
    return np.random.default_rng(seed).normal(size=(NUM_ITEMS, TEXT_DIM)).astype("float32")


def _tiny(**kwargs):
    keras.utils.set_random_seed(0)
    return UniSRec(
        num_items=NUM_ITEMS,
        text_dim=TEXT_DIM,
        max_sequence_length=5,
        hidden_dim=8,
        text_embeddings=_text(),
        dropout=0.0,
        **kwargs,
    )


def _normalize(x):
    return x / np.linalg.norm(x, axis=-1, keepdims=True)


@pytest.mark.parametrize("use_ids", [False, True])
def test_item_vectors_are_the_adapted_text_plus_ids(use_ids):
    model = _tiny(use_id_embeddings=use_ids)
    expected = _numpy_adaptor(_text().astype(np.float64), model.backbone.adaptor)
    if use_ids:
        expected += np.asarray(model.backbone.item_embedding.embeddings)[vocab.NUM_RESERVED :]
    table, bias = model.output_table()
    assert bias is None
    np.testing.assert_allclose(table, _normalize(expected), atol=1e-5)


def test_items_never_trained_are_their_text_alone():
    model = _tiny(use_id_embeddings=True)
    counts = np.zeros(vocab.NUM_RESERVED + NUM_ITEMS, int)
    counts[vocab.NUM_RESERVED + np.array([0, 1, 2, 5, 9])] = [3, 1, 7, 2, 1]  # items 3, 4, 6, 7, 8 never seen
    model.backbone.set_trained_items(counts)
    ids = np.asarray(model.backbone.item_embedding.embeddings)[vocab.NUM_RESERVED :].copy()
    ids[[3, 4, 6, 7, 8]] = 0
    expected = _numpy_adaptor(_text().astype(np.float64), model.backbone.adaptor) + ids
    np.testing.assert_allclose(model.output_table()[0], _normalize(expected), atol=1e-5)
    with pytest.raises(ValueError, match=r"counts of shape \(4,\)"):
        model.backbone.set_trained_items(np.ones(4, int))


def test_id_dropout_reads_a_share_of_the_items_by_their_text():
    model = _tiny(use_id_embeddings=True, id_dropout=0.25)
    counts = np.ones(vocab.NUM_RESERVED + NUM_ITEMS, int)
    counts[vocab.NUM_RESERVED + 3] = 0  # item 3: never seen, so never its id
    model.backbone.set_trained_items(counts)
    table = np.asarray(model.backbone.item_embedding.embeddings)
    ids = np.tile(np.arange(vocab.NUM_RESERVED, vocab.NUM_RESERVED + NUM_ITEMS), (400, 1))
    out = np.asarray(model.backbone.id_vectors(ids, training=True))
    used = np.all(out == table[ids], axis=-1)
    dropped = np.all(out == 0, axis=-1)
    assert np.all(used ^ dropped)  # each occurrence: its whole id embedding or none of it
    assert np.all(dropped[:, 3])
    warm = np.delete(dropped, 3, axis=1)
    assert 0.22 < warm.mean() < 0.28  # 3,600 draws at 0.25: the standard error is 0.007
    np.testing.assert_array_equal(
        model.backbone.id_vectors(ids[:1]), np.where(counts[ids[:1], None] > 0, table[ids[:1]], 0)
    )
    with pytest.raises(ValueError, match="id_dropout must be in"):
        _tiny(use_id_embeddings=True, id_dropout=1.0)


def test_scores_are_cosines_over_the_temperature():
    model = _tiny(temperature=0.1)
    history = np.array([[0, 3, 4, 5]])
    encoder_out = np.asarray(SASRec.call(model, history))[0, -1]  # the SASRec encoder, tested on its own
    table = np.asarray(model.output_table()[0])
    expected = table @ _normalize(encoder_out) / 0.1
    scores = np.asarray(model.score(history))[0]
    np.testing.assert_allclose(scores, expected, atol=1e-4)
    assert np.abs(scores).max() <= 10.0 + 1e-4
    plain = _tiny(temperature=None)  # the dot product, as SASRec
    out = np.asarray(plain(history))[0, -1]
    np.testing.assert_allclose(plain.score(history)[0], np.asarray(plain.output_table()[0]) @ out, atol=1e-4)


def test_text_only_an_item_is_its_text():
    text = _text()
    text[7] = text[4]  # items 4 and 7 (ids +NUM_RESERVED) have the same text
    model = _tiny()
    model.backbone.set_text_embeddings(text)
    scores = np.asarray(model.score(np.array([[3, 5, 6]])))[0]
    assert scores[4] == pytest.approx(scores[7], abs=1e-6)
    swapped = text.copy()
    swapped[[8, 9]] = text[[9, 8]]  # two items outside the history
    model.backbone.set_text_embeddings(swapped)  # new text, no retraining: the scores follow the text
    again = np.asarray(model.score(np.array([[3, 5, 6]])))[0]
    np.testing.assert_allclose(again[[8, 9]], scores[[9, 8]], atol=1e-5)


def test_bad_text_vectors_are_refused():
    model = _tiny()
    with pytest.raises(ValueError, match=r"shape \(9, 6\).*\(10, 6\)"):
        model.backbone.set_text_embeddings(_text()[:9])
    bad = _text()
    bad[3, 1] = np.nan
    with pytest.raises(ValueError, match=r"1 text vectors are not finite \(rows \[3\]"):
        model.backbone.set_text_embeddings(bad)


def test_training_leaves_the_text_table_frozen_and_save_load_keeps_it(tmp_path):
    model = _tiny(use_id_embeddings=True)
    assert not model.backbone.text_embedding.trainable
    before = np.asarray(model.backbone.text_embedding.embeddings).copy()
    seqs = splits.Sequences.from_list(
        [str(i) for i in range(16)],
        [[vocab.NUM_RESERVED + (i + j) % NUM_ITEMS for j in range(5)] for i in range(16)],
    )
    model.compile(optimizer=keras.optimizers.Adam(1e-2))
    history = model.fit(pipeline.causal_dataset(seqs, 5, 8, seed=0), epochs=2, verbose=0)
    assert np.all(np.isfinite(history.history["loss"]))
    np.testing.assert_array_equal(model.backbone.text_embedding.embeddings, before)
    np.testing.assert_array_equal(before[: vocab.NUM_RESERVED], 0)
    path = os.path.join(tmp_path, "u.keras")
    model.save(path)
    loaded = keras.saving.load_model(path)
    np.testing.assert_array_equal(loaded.backbone.text_embedding.embeddings, before)
    np.testing.assert_allclose(loaded.score(np.array([[3, 4]])), model.score(np.array([[3, 4]])), atol=1e-6)


def test_sentence_encoder_is_the_mean_pooled_numpy_bert():
    from safetensors.numpy import load_file

    from tests.models.test_recformer import _bert_forward
    from tfseqrec.models.recformer import minilm_path

    encoder = SentenceEncoder.from_pretrained(["title", "brand"], max_attribute_tokens=4)
    vectors = encoder.encode([["Red pipette tips, sterile", "ACME"], ["", ""]], progress=False)
    assert vectors.shape == (2, 384)
    tok = encoder.tokenizer
    title = tok.wordpieces(tf.constant(["Red pipette tips, sterile"]))[0].numpy()[:4].tolist()
    brand = tok.wordpieces(tf.constant(["ACME"]))[0].numpy().tolist()
    ids = [tok.cls_id] + tok.key_tokens[0].tolist() + title + tok.key_tokens[1].tolist() + brand
    weights = load_file(os.path.join(minilm_path(), "model.safetensors"))
    expected = _normalize(_bert_forward(weights, np.array(ids), 6, 12).mean(0))
    np.testing.assert_allclose(vectors[0], expected, atol=1e-4)
    expected_empty = _normalize(_bert_forward(weights, np.array([tok.cls_id]), 6, 12).mean(0))
    np.testing.assert_allclose(vectors[1], expected_empty, atol=1e-4)
    with pytest.raises(ValueError, match="item texts have 3 attributes; the encoder reads 2"):
        encoder.encode([["a", "b", "c"]])


def test_for_catalogue_keeps_everything_but_the_items():
    model = _tiny(use_id_embeddings=True)
    other_text = np.random.default_rng(5).normal(size=(4, TEXT_DIM)).astype("float32")
    other = model.for_catalogue(other_text)
    assert other.num_items == 4 and other.backbone.item_embedding is None
    np.testing.assert_array_equal(other.backbone.adaptor.expert_kernel, model.backbone.adaptor.expert_kernel)
    np.testing.assert_array_equal(
        other.backbone.blocks[1].ffn_in.kernel, model.backbone.blocks[1].ffn_in.kernel
    )
    # Its item vectors are the adapted new text; the old model's text path agrees.
    expected = _normalize(_numpy_adaptor(other_text.astype(np.float64), model.backbone.adaptor))
    np.testing.assert_allclose(other.output_table()[0], expected, atol=1e-5)
    np.testing.assert_allclose(model.backbone.text_item_vectors(other_text), expected, atol=1e-5)
    # A history of the new items scores as the old model's text path scores it.
    ids = vocab.NUM_RESERVED + np.array([[3, 0, 2]])
    vectors = other_text[ids - vocab.NUM_RESERVED]
    hidden = np.asarray(other(ids))[0, -1]
    np.testing.assert_allclose(np.asarray(other.score(ids))[0], expected @ hidden, atol=1e-4)
    np.testing.assert_allclose(
        hidden,
        np.asarray(model.backbone.encode(model.backbone.adaptor(vectors), np.ones((1, 3), bool)))[0, -1],
        atol=1e-5,
    )
    by_text = np.asarray(
        model.backbone.score_text_vectors(vectors, np.ones((1, 3), bool))
    )  # over the old catalogue
    np.testing.assert_allclose(by_text[0], np.asarray(model.output_table()[0]) @ hidden, atol=1e-4)
