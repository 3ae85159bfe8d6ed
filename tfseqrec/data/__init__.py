"""Data layer: readers, vocabulary, splits, TFRecord schema, tf.data pipelines, masking."""

from tfseqrec.data.masking import ClozeMasking
from tfseqrec.data.pipeline import causal_dataset, cloze_dataset, eval_dataset, pad_left, sliding_windows
from tfseqrec.data.readers import (
    FORMATS,
    DataError,
    Interactions,
    read_id_map,
    read_interactions,
    read_item_text,
)
from tfseqrec.data.splits import (
    Cases,
    ColdStartSplit,
    Sequences,
    Split,
    build_sequences,
    cold_start_split,
    k_core,
    leave_one_out,
    prepare,
    sort_by_time,
)
from tfseqrec.data.tfrecord import FEATURE_SPEC, make_example, parse_examples, read_examples, write_examples
from tfseqrec.data.vocab import MASK_ID, NUM_RESERVED, OOV_ID, PAD_ID, ItemVocabulary
