"""Recformer on the JAX backend: ``jax_recformer.py`` fine-tunes (both stages) and pre-trains a
tiny Recformer on item text tokenized without TensorFlow (``tfseqrec.data.wordpiece``) and
saves it; this process tokenizes the same text with tensorflow-text, builds its
``RecformerRecommender`` and export, and gets the JAX model's top 5 (``test_jax.py``'s helpers)."""

import json

import keras
import pytest

from tests.backends.test_jax import REPO, _answers_as_on_jax, pytestmark, run_on_jax  # noqa: F401 (pytestmark: JAX only)


def test_recformer_trained_on_jax_served_on_tensorflow(tmp_path):
    """A Recformer fine-tuned (both stages) and pre-trained on JAX from item text tokenized
    without TensorFlow; on TensorFlow its ``.keras`` file, the tensorflow-text tokenizer in
    the graph and the SavedModel give the JAX model's top 5."""
    if keras.backend.backend() != "tensorflow":
        pytest.skip("the serving half runs on the TensorFlow backend")
    done = run_on_jax([str(REPO / "tests" / "backends" / "jax_recformer.py"), str(tmp_path)], timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    trained = json.loads(done.stdout.strip().splitlines()[-1])
    assert trained["backend"] == "jax" and not trained["tensorflow_imported"]
    # From ln(20) = 3.0, the uniform guess over the catalogue, down (the JAX run is not seeded:
    # the first runs ended at 0.61 and 0.77 of their first epoch's loss).
    losses = [row["loss"] for row in trained["finetune"]]
    assert [row["stage"] for row in trained["finetune"]] == [1] * 6 + [2] * 2
    assert losses[-1] < 0.9 * losses[0], trained["finetune"]
    assert trained["pretrain"][-1] < trained["pretrain"][0], trained["pretrain"]
    from tests.backends import jax_recformer  # the TensorFlow side: the graph's tokenizer, the recommender
    from tfseqrec.data import text
    from tfseqrec.models.recformer import RecformerRecommender

    model = keras.saving.load_model(tmp_path / "recformer.keras")
    texts = jax_recformer.texts()
    tokenizer = text.ItemTextTokenizer(jax_recformer.WORDPIECES, ["title"], max_attribute_tokens=4)
    tokens, types = tokenizer.tokenize(texts)
    recommender = RecformerRecommender(model, tokens, types, tokenizer.cls_id, tokenizer, texts)
    _answers_as_on_jax(recommender, jax_recformer.HISTORIES, jax_recformer.NUM_ITEMS, trained, tmp_path, 1e-4)
