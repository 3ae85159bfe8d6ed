"""Clients of a served tfseqrec model: gRPC and REST requests and replies.

The same helpers talk to a real ``tensorflow_model_server`` and, through
``SavedModelPredictor``, to an export loaded in this process the way the server loads
it (a TF1 session over the ``serve`` tag, signatures run by tensor name), which is how
the tests and ``benchmarks/serving.py`` use them.

gRPC (port 8500)::

    import grpc
    from tensorflow_serving.apis import prediction_service_pb2_grpc
    stub = prediction_service_pb2_grpc.PredictionServiceStub(grpc.insecure_channel("localhost:8500"))
    reply = stub.Predict(predict_request([["1193", "661"]], "ml1m"), 10.0)
    predict_reply(reply).item_ids   # [["2355", ...]]

REST (port 8501)::

    import requests
    body = rest_request([["1193", "661"]])
    reply = requests.post(rest_url("localhost", "ml1m"), json=body).json()
    rest_reply(reply).item_ids

Histories are lists of raw item ids, oldest first, of any lengths: the helpers pad
them (``""``, or ``-1`` for the int64 ``recommend_ids`` signature). The export of a model
that reads event times (HSTU with a time bias) also takes each item's time in seconds:
give ``timestamps=`` (one list per history, one time per item) and the helpers lay them
out as the histories (``pad_timestamps``)::

    predict_request([["1193", "661"]], "ml1m", timestamps=[[978300760, 978302109]])
"""

import dataclasses

import numpy as np

INT_SIGNATURES = ("recommend_ids",)
STRING_PAD = ""
INT_PAD = -1


@dataclasses.dataclass
class Recommendations:
    """A reply: ``item_ids[u]`` and ``scores[u]`` best first for user ``u``.

    Only items: the export's padding slots (id ``""`` or -1 at score ``-inf``, when fewer
    items than ``k`` could be recommended) are dropped, so a row may be shorter than ``k``.
    """

    item_ids: list
    scores: list
    user_ids: list = None


# --- building requests ----------------------------------------------------------------


def pad_histories(histories, signature_name="serving_default", width=None):
    """A ``[batch, width]`` NumPy array of ``histories`` (string, or int64 for ``recommend_ids``).

    ``width``: ``None`` for the longest history; a number keeps each history's newest
    ``width`` items. Under TF Serving's server-side batching every request must have the
    same width (the server would otherwise pad with a real item id: the first of the
    tensor), so send ``width=max_sequence_length``.

    >>> pad_histories([["a", "b", "c"], ["d"]], width=2).tolist()
    [['b', 'c'], ['d', '']]
    """
    integer = signature_name in INT_SIGNATURES
    histories, width = _newest([list(h) for h in histories], width)
    if integer:
        for history in histories:
            for h in history:
                if not 0 <= int(h) < 2**63:
                    raise ValueError(
                        f"{signature_name} takes item ids in [0, 2**63); got {h} (a negative id is padding)"
                    )
        out = np.full((len(histories), width), INT_PAD, dtype=np.int64)
    else:
        out = np.full((len(histories), width), STRING_PAD, dtype=object)
    for row, history in enumerate(histories):
        if history:
            out[row, : len(history)] = [int(h) for h in history] if integer else [_text(h) for h in history]
    return out


def _newest(rows, width):
    """``(rows, width)``: each row's newest ``width`` entries (``None``: the longest row's width)."""
    if width is None:
        return rows, max((len(row) for row in rows), default=0)
    width = int(width)
    if width < 1:
        raise ValueError(f"width must be a positive number of items, got {width}")
    return [row[-width:] for row in rows], width


def pad_timestamps(timestamps, width=None):
    """An int64 ``[batch, width]`` array of per-item times, laid out as ``pad_histories`` lays out histories.

    ``timestamps``: one list of times (seconds) per history, one per item, oldest
    first; right-padded with 0, and a ``width`` keeps each list's newest ``width``
    times, so the array lines up with ``pad_histories(histories, width=width)``.

    >>> pad_timestamps([[100, 200, 300], [400]], width=2).tolist()
    [[200, 300], [400, 0]]
    """
    rows, width = _newest([[check_seconds("timestamps", t) for t in row] for row in timestamps], width)
    out = np.zeros((len(rows), width), dtype=np.int64)
    for i, row in enumerate(rows):
        out[i, : len(row)] = row
    return out


def pad_events(histories, values, column="the event column"):
    """A string ``[batch, width]`` array of per-item event values (``""`` pads), laid out as
    ``pad_histories(histories)`` lays out histories; each list must have one value per item.

    >>> pad_events([["a", "b"], ["c"]], [["view", "buy"], ["view"]]).tolist()
    [['view', 'buy'], ['view', '']]
    """
    histories, values = [list(h) for h in histories], [list(v) for v in values]
    if len(values) != len(histories):
        raise ValueError(f"{column}: {len(values)} lists of values for {len(histories)} histories")
    for row, (history, row_values) in enumerate(zip(histories, values)):
        if len(row_values) != len(history):
            raise ValueError(
                f"{column}: history {row} has {len(history)} items but {len(row_values)} values (one per item)"
            )
    rows, width = _newest([[_text(v) for v in row] for row in values], None)
    out = np.full((len(rows), width), STRING_PAD, dtype=object)
    for i, row in enumerate(rows):
        out[i, : len(row)] = row
    return out


def check_seconds(name, value):
    """``value`` as an int, once it is a whole number of seconds int64 holds (else ``ValueError``, naming ``name``)."""
    try:
        seconds = int(value)
    except (TypeError, ValueError, OverflowError):
        seconds = None
    if seconds is None or seconds != value or not -(2**63) <= seconds < 2**63:
        raise ValueError(
            f"{name}: {value!r} is not a time in whole seconds within int64 (|t| < 2**63, about "
            "2.9e11 years); a time in nanoseconds or a typo?"
        )
    return seconds


def _checked_timestamps(histories, timestamps):
    """``pad_timestamps`` of ``timestamps``, once each list has one time per item of its history."""
    histories, timestamps = [list(h) for h in histories], [list(t) for t in timestamps]
    if len(timestamps) != len(histories):
        raise ValueError(
            f"{len(timestamps)} timestamp lists for {len(histories)} histories (one list per history)"
        )
    for row, (history, times) in enumerate(zip(histories, timestamps)):
        if len(times) != len(history):
            raise ValueError(
                f"history {row} has {len(history)} items but {len(times)} timestamps (one per item)"
            )
    return pad_timestamps(timestamps)


def predict_request(
    histories,
    model_name,
    signature_name="serving_default",
    version=None,
    k=None,
    targets=None,
    timestamps=None,
    events=None,
):
    """A ``PredictRequest`` for one of the history signatures.

    Args:
        histories: lists of raw item ids, oldest first.
        model_name: the served model's name (``--model_name`` of the server).
        signature_name: ``serving_default``, ``recommend_ids``, ``recommend_top_k`` or
            ``rank_targets``.
        version: a model version to pin (default: the newest the server has).
        k: for ``recommend_top_k``, an int or one int per history.
        targets: for ``rank_targets``, one raw item id per history (the reply's
            ``rank`` is its 0-based rank among all items, see ``tfseqrec.export``).
        timestamps: for the export of a model that reads event times: per history,
            its items' times in seconds (``pad_timestamps``); the ``timestamps`` input.
        events: for the export of a model that reads event context: ``{column: per
            history, its items' raw values}``; the ``event_<column>`` inputs.
    """
    import tensorflow as tf  # heavy: the REST helpers run without TensorFlow
    from tensorflow_serving.apis import predict_pb2

    request = predict_pb2.PredictRequest()
    _model_spec(request.model_spec, model_name, signature_name, version)
    array = pad_histories(histories, signature_name)
    dtype = tf.int64 if signature_name in INT_SIGNATURES else tf.string
    request.inputs["history"].CopyFrom(tf.make_tensor_proto(array, dtype=dtype, shape=array.shape))
    if timestamps is not None:
        times = _checked_timestamps(histories, timestamps)
        request.inputs["timestamps"].CopyFrom(tf.make_tensor_proto(times, dtype=tf.int64, shape=array.shape))
    for column, values in (events or {}).items():
        context = pad_events(histories, values, column)
        request.inputs[f"event_{column}"].CopyFrom(
            tf.make_tensor_proto(context, dtype=tf.string, shape=array.shape)
        )
    if k is not None:
        ks = np.broadcast_to(np.asarray(k, dtype=np.int32), (len(array),))
        request.inputs["k"].CopyFrom(tf.make_tensor_proto(ks, dtype=tf.int32))
    if targets is not None:
        values = np.array([_text(t) for t in targets], dtype=object)
        request.inputs["target"].CopyFrom(tf.make_tensor_proto(values, dtype=tf.string, shape=[len(values)]))
    return request


def pad_texts(histories, num_attributes):
    """A ``[batch, longest, num_attributes]`` string array of item-text histories.

    Args:
        histories: per user, the items (oldest first), each a list of attribute
            strings in the export's attribute order (missing trailing ones read ``""``).
        num_attributes: the export's number of attributes.
    """
    histories = [list(h) for h in histories]
    width = max((len(h) for h in histories), default=0)
    array = np.full((len(histories), width, num_attributes), STRING_PAD, dtype=object)
    for row, history in enumerate(histories):
        for col, item in enumerate(history):
            values = [item] if isinstance(item, str) else list(item)
            array[row, col, : len(values)] = values[:num_attributes]
    return array


def text_request(histories, model_name, num_attributes, signature_name="recommend_texts", version=None):
    """A ``PredictRequest`` for a Recformer export's text signatures.

    ``recommend_texts`` takes ``histories`` (see ``pad_texts``); ``encode_items`` takes
    a list of items, each a list of attribute strings.
    """
    import tensorflow as tf  # heavy: the REST helpers run without TensorFlow
    from tensorflow_serving.apis import predict_pb2

    request = predict_pb2.PredictRequest()
    _model_spec(request.model_spec, model_name, signature_name, version)
    if signature_name == "encode_items":
        array, key = pad_texts([histories], num_attributes)[0], "item_text"
    else:
        array, key = pad_texts(histories, num_attributes), "history_text"
    request.inputs[key].CopyFrom(tf.make_tensor_proto(array, dtype=tf.string, shape=array.shape))
    return request


def examples_request(examples, model_name, signature_name="predict_examples", version=None):
    """A ``PredictRequest`` of serialized ``tf.Example`` records (``tfrecord`` schema)."""
    import tensorflow as tf  # heavy: the REST helpers run without TensorFlow
    from tensorflow_serving.apis import predict_pb2

    request = predict_pb2.PredictRequest()
    _model_spec(request.model_spec, model_name, signature_name, version)
    records = [e if isinstance(e, bytes) else e.SerializeToString() for e in examples]
    request.inputs["examples"].CopyFrom(tf.make_tensor_proto(records, dtype=tf.string, shape=[len(records)]))
    return request


def rest_request(histories, signature_name="serving_default", k=None, form="instances", timestamps=None):
    """The JSON body of a REST ``:predict`` call.

    Args:
        histories: lists of raw item ids, oldest first.
        signature_name: as in ``predict_request``.
        k: for ``recommend_top_k``.
        form: ``"instances"`` (row format: one object per user) or ``"inputs"``
            (columnar format).
        timestamps: as in ``predict_request`` (the ``timestamps`` input).
    """
    columns = {"history": pad_histories(histories, signature_name).tolist()}
    if timestamps is not None:
        columns["timestamps"] = _checked_timestamps(histories, timestamps).tolist()
    if k is not None:
        columns["k"] = np.broadcast_to(np.asarray(k, dtype=np.int64), (len(columns["history"]),)).tolist()
    body = {"signature_name": signature_name}
    if form == "instances":
        body["instances"] = [dict(zip(columns, row)) for row in zip(*columns.values())]
    elif form == "inputs":
        body["inputs"] = columns
    else:
        raise ValueError(f"form must be 'instances' or 'inputs', got {form!r}")
    return body


def rest_url(host, model_name, version=None, port=8501):
    """``http://host:port/v1/models/NAME[/versions/N]:predict``."""
    version_part = "" if version is None else f"/versions/{int(version)}"
    return f"http://{host}:{port}/v1/models/{model_name}{version_part}:predict"


# --- reading replies ------------------------------------------------------------------


def predict_reply(response):
    """``Recommendations`` of a gRPC ``PredictResponse``."""
    import tensorflow as tf  # heavy: the REST helpers run without TensorFlow

    outputs = {name: tf.make_ndarray(proto) for name, proto in response.outputs.items()}
    return _recommendations(outputs)


def rest_reply(body):
    """``Recommendations`` of a REST reply (row or columnar format)."""
    if "error" in body:
        raise ValueError(f"the server answered an error: {body['error']}")
    if "predictions" in body:
        rows = body["predictions"]
        names = rows[0].keys() if rows else ("item_ids", "scores")
        outputs = {name: [row[name] for row in rows] for name in names}
    elif "outputs" in body:
        outputs = body["outputs"]
    else:
        raise ValueError(f"not a TF Serving predict reply: keys {sorted(body)}")
    return _recommendations(outputs)


def _recommendations(outputs):
    def values(name):
        return [[_decode(v) for v in row] for row in np.asarray(outputs[name], dtype=object).tolist()]

    # predict_examples answers user_id as a column [batch, 1] (REST rows: one value each).
    user_ids = None
    if "user_id" in outputs:
        user_ids = [_decode(u) for u in np.asarray(outputs["user_id"], dtype=object).reshape(-1).tolist()]
    scores = [[float(s) for s in row] for row in np.asarray(outputs["scores"], dtype=np.float64).tolist()]
    rows = [
        [(i, s) for i, s in zip(ids, row) if not (s == -np.inf and i in ("", INT_PAD))]
        for ids, row in zip(values("item_ids"), scores)
    ]
    return Recommendations(
        item_ids=[[i for i, _ in row] for row in rows],
        scores=[[s for _, s in row] for row in rows],
        user_ids=user_ids,
    )


# --- an export loaded the way TF Serving loads it -------------------------------------


class SavedModelPredictor:
    """Answers ``PredictRequest`` protos and REST bodies from a SavedModel in process.

    Loads the ``serve`` meta graph into a TF1 session with
    ``tf.compat.v1.saved_model.loader.load``, as the C++ server does, and runs the
    requested signature by the tensor names in its ``SignatureDef``. REST bodies
    follow TF Serving's JSON mapping (row and columnar formats).

    Args:
        export_dir: a version directory, e.g. ``saved_models/ml1m/1``.
        threads: intra- and inter-op threads (0: TensorFlow's default).
    """

    def __init__(self, export_dir, threads=0):
        import tensorflow as tf  # heavy: the REST helpers run without TensorFlow

        try:  # registers the tensorflow-text ops of Recformer exports, as the model server links them
            import tensorflow_text  # noqa: F401
        except ImportError:
            pass
        self.export_dir = str(export_dir)
        self.graph = tf.Graph()
        config = tf.compat.v1.ConfigProto(
            intra_op_parallelism_threads=threads, inter_op_parallelism_threads=threads
        )
        self.session = tf.compat.v1.Session(graph=self.graph, config=config)
        with self.graph.as_default():
            meta_graph = tf.compat.v1.saved_model.loader.load(self.session, ["serve"], self.export_dir)
        self.signatures = dict(meta_graph.signature_def)
        self._callables = {}

    def run(self, signature_name, inputs):
        """Runs a signature on NumPy ``inputs`` (by input name); returns NumPy outputs by name."""
        self._signature(signature_name)
        signature = self.signatures[signature_name]
        missing = sorted(set(signature.inputs) - set(inputs))
        extra = sorted(set(inputs) - set(signature.inputs))
        if missing or extra:
            raise ValueError(
                f"signature {signature_name!r} takes inputs {sorted(signature.inputs)}; got {sorted(inputs)}"
            )
        names = sorted(signature.inputs)
        fn = self.callable(signature_name)
        values = fn(*[inputs[name] for name in names])
        return dict(zip(sorted(signature.outputs), values))

    def _signature(self, name):
        if name not in self.signatures:
            raise ValueError(f"no signature {name!r}; the export has {sorted(self.signatures)}")
        return self.signatures[name]

    def callable(self, signature_name):
        """A fast ``fn(*inputs sorted by name) -> outputs sorted by name`` (``Session.make_callable``)."""
        if signature_name not in self._callables:
            signature = self.signatures[signature_name]
            feeds = [
                self.graph.get_tensor_by_name(signature.inputs[n].name) for n in sorted(signature.inputs)
            ]
            fetches = [
                self.graph.get_tensor_by_name(signature.outputs[n].name) for n in sorted(signature.outputs)
            ]
            self._callables[signature_name] = self.session.make_callable(fetches, feed_list=feeds)
        return self._callables[signature_name]

    def predict(self, request):
        """A ``PredictResponse`` for a ``PredictRequest``."""
        import tensorflow as tf  # heavy: the REST helpers run without TensorFlow
        from tensorflow_serving.apis import predict_pb2

        name = request.model_spec.signature_name or "serving_default"
        inputs = {key: tf.make_ndarray(proto) for key, proto in request.inputs.items()}
        outputs = self.run(name, inputs)
        wanted = list(request.output_filter) or list(outputs)
        response = predict_pb2.PredictResponse()
        response.model_spec.CopyFrom(request.model_spec)
        response.model_spec.signature_name = name
        for key in wanted:
            response.outputs[key].CopyFrom(tf.make_tensor_proto(outputs[key]))
        return response

    def predict_json(self, body):
        """A REST reply (dict) for a REST ``:predict`` body (dict)."""
        name = body.get("signature_name", "serving_default")
        signature = self._signature(name)
        dtypes = {key: _numpy_dtype(spec.dtype) for key, spec in signature.inputs.items()}
        if "instances" in body:
            rows = body["instances"]
            if rows and not isinstance(rows[0], dict):
                (only,) = signature.inputs  # a bare list is allowed for one-input signatures
                rows = [{only: row} for row in rows]
            inputs = {
                key: np.array([row[key] for row in rows], dtype=dtypes[key]) for key in signature.inputs
            }
            outputs = self.run(name, inputs)
            batch = len(rows)
            return {
                "predictions": [
                    {key: _jsonable(value[i]) for key, value in outputs.items()} for i in range(batch)
                ]
            }
        if "inputs" in body:
            given = (
                body["inputs"]
                if isinstance(body["inputs"], dict)
                else {next(iter(signature.inputs)): body["inputs"]}
            )
            inputs = {key: np.array(value, dtype=dtypes[key]) for key, value in given.items()}
            outputs = self.run(name, inputs)
            return {"outputs": {key: _jsonable(value) for key, value in outputs.items()}}
        raise ValueError("a REST predict body needs 'instances' or 'inputs'")


def _model_spec(spec, model_name, signature_name, version):
    spec.name = model_name
    spec.signature_name = signature_name
    if version is not None:
        spec.version.value = int(version)


def _numpy_dtype(enum):
    import tensorflow as tf  # heavy: the REST helpers run without TensorFlow

    dtype = tf.dtypes.as_dtype(enum)
    return object if dtype == tf.string else dtype.as_numpy_dtype


def _jsonable(value):
    def walk(v):
        return [walk(x) for x in v] if isinstance(v, list) else _decode(v)

    return walk(np.asarray(value).tolist())


def _text(value):
    return value.decode("utf-8") if isinstance(value, bytes) else str(value)


def _decode(value):
    if isinstance(value, bytes):
        return value.decode("utf-8")
    if isinstance(value, np.generic):
        return value.item()
    return value
