"""Data layer: readers, vocabulary, splits, TFRecord schema, tf.data pipelines, masking.

Names are re-exported lazily, so reading files and computing splits does not import
TensorFlow (``tfseqrec data stats`` starts in a second, not four).
"""

import importlib

_EXPORTS = {
    "tfseqrec.data.events": ["EventVocabulary"],
    "tfseqrec.data.features": ["EncodedFeatures", "ItemFeatures", "read_item_features"],
    "tfseqrec.data.masking": ["ClozeMasking", "ClozePreprocessor"],
    "tfseqrec.data.pipeline": [
        "causal_dataset",
        "cloze_dataset",
        "eval_dataset",
        "pad_left",
        "sliding_windows",
    ],
    "tfseqrec.data.readers": [
        "FORMATS",
        "DataError",
        "Interactions",
        "read_id_map",
        "read_interactions",
        "read_item_text",
    ],
    "tfseqrec.data.splits": [
        "Cases",
        "ColdStartSplit",
        "Sequences",
        "Split",
        "build_sequences",
        "cold_start_split",
        "k_core",
        "leave_one_out",
        "prepare",
        "sort_by_time",
        "training_vocabulary",
    ],
    "tfseqrec.data.tfrecord": [
        "FEATURE_SPEC",
        "make_example",
        "parse_examples",
        "read_examples",
        "write_examples",
    ],
    "tfseqrec.data.vocab": ["MASK_ID", "NUM_RESERVED", "OOV_ID", "PAD_ID", "ItemVocabulary"],
}
_WHERE = {name: module for module, names in _EXPORTS.items() for name in names}
__all__ = sorted(_WHERE)


def __getattr__(name):
    if name not in _WHERE:
        raise AttributeError(f"module 'tfseqrec.data' has no attribute {name!r}")
    value = getattr(importlib.import_module(_WHERE[name]), name)
    globals()[name] = value
    return value


def __dir__():
    return __all__
