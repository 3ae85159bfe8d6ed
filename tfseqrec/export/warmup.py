"""Warm-up requests: ``assets.extra/tf_serving_warmup_requests`` of an export.

TensorFlow Serving replays these ``PredictionLog`` records when it loads a version,
before it answers a client, so the first real request does not pay for tracing.
Each signature's request comes from the serving module (``warmup_request``).
"""

import os

import tensorflow as tf

WARMUP_FILE = "tf_serving_warmup_requests"


def write_warmup_requests(export_dir, module, model_name="tfseqrec"):
    """Writes the warm-up records of ``module``'s signatures into ``export_dir``; returns their count.

    One request of batch 1 and one of batch 4 (histories empty, of one item, of half
    the window and longer than the window) per signature, built from the most
    popular items; the export of a model that reads event times gets increasing
    times with them (a day apart; ``TimedRecommender``).
    """
    # tensorflow-serving-api: only warm-up files need it.
    from tensorflow_serving.apis import prediction_log_pb2

    items, window = module.vocabulary.items, module.max_sequence_length
    popular = [items[i % len(items)] for i in range(window + 5)]
    batches = [[popular[:10]], [[], popular[:1], popular[: max(1, window // 2)], popular]]
    path = os.path.join(export_dir, "assets.extra", WARMUP_FILE)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    count = 0
    with tf.io.TFRecordWriter(path) as writer:
        for histories in batches:
            for name in module.signature_names():
                request = module.warmup_request(name, histories, model_name)
                log = prediction_log_pb2.PredictionLog(
                    predict_log=prediction_log_pb2.PredictLog(request=request)
                )
                writer.write(log.SerializeToString())
                count += 1
    return count


def read_warmup_requests(export_dir):
    """The ``PredictionLog`` records of an export (what the server replays)."""
    from tensorflow_serving.apis import prediction_log_pb2  # tensorflow-serving-api, as above

    path = os.path.join(export_dir, "assets.extra", WARMUP_FILE)
    logs = []
    for record in tf.data.TFRecordDataset(path).as_numpy_iterator():
        logs.append(prediction_log_pb2.PredictionLog.FromString(record))
    return logs
