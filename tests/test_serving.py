"""Client helpers: request protos, REST bodies, reply parsing."""

import numpy as np
import pytest
import tensorflow as tf
from tensorflow_serving.apis import predict_pb2

from tfseqrec import serving


def test_pad_histories_strings_and_ints():
    strings = serving.pad_histories([["a", b"b"], [], ["c"]])
    assert strings.tolist() == [["a", "b"], ["", ""], ["c", ""]]
    ints = serving.pad_histories([[1, 2], []], "recommend_ids")
    assert ints.dtype == np.int64 and ints.tolist() == [[1, 2], [-1, -1]]
    assert serving.pad_histories([]).shape == (0, 0)


def test_pad_histories_to_a_fixed_width_keeps_the_newest_items():
    # One width for every request: what server-side batching needs.
    fixed = serving.pad_histories([["1", "2", "3", "4"], ["5"], []], width=3)
    assert fixed.tolist() == [["2", "3", "4"], ["5", "", ""], ["", "", ""]]
    assert serving.pad_histories([[7, 8]], "recommend_ids", width=4).tolist() == [[7, 8, -1, -1]]
    with pytest.raises(ValueError, match="width must be a positive number of items, got 0"):
        serving.pad_histories([["1"]], width=0)


def test_predict_request_proto():
    request = serving.predict_request(
        [["1", "2"], ["3"]], "ml1m", signature_name="recommend_top_k", version=4, k=20
    )
    assert (request.model_spec.name, request.model_spec.signature_name) == ("ml1m", "recommend_top_k")
    assert request.model_spec.version.value == 4
    assert tf.make_ndarray(request.inputs["history"]).tolist() == [[b"1", b"2"], [b"3", b""]]
    assert tf.make_ndarray(request.inputs["k"]).tolist() == [20, 20]
    ids = serving.predict_request([[7]], "ml1m", signature_name="recommend_ids")
    assert ids.inputs["history"].dtype == tf.int64.as_datatype_enum and not ids.model_spec.HasField("version")


def test_examples_request_proto():
    example = tf.train.Example()
    request = serving.examples_request([example, b"raw"], "m")
    assert request.model_spec.signature_name == "predict_examples"
    assert tf.make_ndarray(request.inputs["examples"]).tolist() == [example.SerializeToString(), b"raw"]


def test_rest_bodies_and_url():
    assert serving.rest_request([["1"], ["2", "3"]]) == {
        "signature_name": "serving_default",
        "instances": [{"history": ["1", ""]}, {"history": ["2", "3"]}],
    }
    assert serving.rest_request([["1"]], "recommend_top_k", k=5, form="inputs") == {
        "signature_name": "recommend_top_k",
        "inputs": {"history": [["1"]], "k": [5]},
    }
    with pytest.raises(ValueError, match="form must be"):
        serving.rest_request([["1"]], form="rows")
    assert serving.rest_url("h", "ml1m") == "http://h:8501/v1/models/ml1m:predict"
    assert serving.rest_url("h", "ml1m", version=2, port=9) == "http://h:9/v1/models/ml1m/versions/2:predict"


def test_replies_parse_both_rest_formats_and_grpc():
    rows = {"predictions": [{"item_ids": ["a", "b"], "scores": [2.0, 1.0]}]}
    columns = {"outputs": {"item_ids": [["a", "b"]], "scores": [[2.0, 1.0]]}}
    expected = serving.Recommendations(item_ids=[["a", "b"]], scores=[[2.0, 1.0]])
    assert serving.rest_reply(rows) == serving.rest_reply(columns) == expected
    with pytest.raises(ValueError, match="the server answered an error: boom"):
        serving.rest_reply({"error": "boom"})
    response = predict_pb2.PredictResponse()
    response.outputs["item_ids"].CopyFrom(tf.make_tensor_proto([[b"a", b"b"]]))
    response.outputs["scores"].CopyFrom(tf.make_tensor_proto(np.array([[2.0, 1.0]], np.float32)))
    response.outputs["user_id"].CopyFrom(tf.make_tensor_proto([[b"u"]]))  # predict_examples: [batch, 1]
    reply = serving.predict_reply(response)
    assert (reply.item_ids, reply.scores, reply.user_ids) == ([["a", "b"]], [[2.0, 1.0]], ["u"])
