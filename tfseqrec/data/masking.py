"""Cloze masking for BERT4Rec, as a Keras layer of dense tensor ops."""

import keras
from keras import ops

from tfseqrec.checks import check_number
from tfseqrec.data import vocab


@keras.saving.register_keras_serializable(package="tfseqrec")
class ClozeMasking(keras.layers.Layer):
    """Masks items for the Cloze (masked item prediction) task of BERT4Rec.

    Each real item is chosen with probability ``mask_prob``; padding and reserved ids
    never are. A chosen item becomes ``mask_token_id`` with probability
    ``mask_token_rate`` (0.8), a uniformly random real item with ``random_token_rate``
    (0.1), and stays as it was otherwise (0.1). Every non-empty sequence gets at
    least one chosen item: when the draw picks none, its item with the smallest draw
    is chosen. With probability ``last_item_only_prob`` a sequence instead has only its
    last item chosen and replaced by the mask token, the sample the original BERT4Rec
    and RecBole add so that training sees the inference layout (a mask at the end).

    Everything is elementwise or a row reduction over the dense ``[batch, length]``
    batch: one uniform float draw decides which items are chosen, one uniform integer
    draw in ``[0, 1000 * num_items)`` decides both the 80/10/10 outcome and the random
    item, and no Python runs per item and no ragged tensor is built. The layer thus
    runs inside a compiled training step on whatever device runs it (the GPU when
    there is one), as well as in a ``tf.data`` map. A hand-written layer rather than
    keras-hub's ``MaskedLMMaskGenerator`` because that one builds ragged tensors
    through tensorflow-text, which does not run inside a compiled step on a GPU;
    ``benchmarks/masking.py`` measures the speed.

    Draws come from a ``keras.random.SeedGenerator``, whose state advances on every
    call: each epoch sees fresh masks, and a given ``seed`` replays the same masks.

    Args:
        num_items: number of real items; they hold ids
            ``[first_item_id, first_item_id + num_items)``.
        mask_prob: probability that a real item is chosen.
        mask_token_id: id that replaces chosen items. Defaults to ``vocab.MASK_ID``.
        first_item_id: smallest real item id. Defaults to ``vocab.NUM_RESERVED``;
            smaller ids (padding, mask, OOV) are never chosen.
        mask_token_rate: share of chosen items replaced by the mask token.
        random_token_rate: share of chosen items replaced by a random item.
        last_item_only_prob: share of sequences where only the last item is masked.
        seed: int seed for reproducible masks.

    Call arguments:
        item_ids: int tensor ``[batch, length]``, ``vocab.PAD_ID`` (0) for padding, on
            either side.

    Returns:
        ``(masked_ids, labels, sample_weight)``: ``masked_ids`` same dtype and shape
        as the input; ``labels`` the original id where chosen, else 0;
        ``sample_weight`` float32, 1.0 where chosen, else 0.0.

    Example:

    >>> masking = ClozeMasking(num_items=100, mask_prob=0.2, seed=1)
    >>> ids = keras.ops.convert_to_tensor([[0, 0, 5, 6, 7, 8]])
    >>> masked, labels, weights = masking(ids)
    >>> int(keras.ops.sum(weights)) >= 1
    True

    Reference:
        Sun et al., "BERT4Rec: Sequential Recommendation with Bidirectional Encoder
        Representations from Transformer", CIKM 2019.
    """

    def __init__(
        self,
        num_items,
        mask_prob=0.2,
        mask_token_id=vocab.MASK_ID,
        first_item_id=vocab.NUM_RESERVED,
        mask_token_rate=0.8,
        random_token_rate=0.1,
        last_item_only_prob=0.0,
        seed=None,
        **kwargs,
    ):
        super().__init__(**kwargs)
        if num_items < 1:
            raise ValueError(f"num_items must be positive, got {num_items}")
        if 10 * num_items >= 2**31:
            raise ValueError(f"num_items={num_items} is too large for int32 draws (max 214,748,364)")
        for name, value in (
            ("mask_prob", mask_prob),
            ("last_item_only_prob", last_item_only_prob),
            ("mask_token_rate", mask_token_rate),
            ("random_token_rate", random_token_rate),
        ):
            check_number(name, value, minimum=0, maximum=1)
        if mask_token_rate + random_token_rate > 1:
            raise ValueError(
                "mask_token_rate and random_token_rate must have a sum <= 1, "
                f"got {mask_token_rate} and {random_token_rate}"
            )
        if first_item_id <= mask_token_id < first_item_id + num_items:
            raise ValueError(f"mask_token_id={mask_token_id} lies inside the item id range")
        # Outcomes are decided in 1/buckets steps of one integer draw; 1000 buckets
        # (rates to 0.001) while 1000 * num_items fits in int32, else 10.
        self._buckets = 1000 if 1000 * num_items < 2**31 else 10
        for name, rate in (("mask_token_rate", mask_token_rate), ("random_token_rate", random_token_rate)):
            if abs(rate * self._buckets - round(rate * self._buckets)) > 1e-6:
                raise ValueError(f"{name} must be a multiple of {1 / self._buckets}, got {rate}")

        # === Config ===
        self.num_items = num_items
        self.mask_prob = mask_prob
        self.mask_token_id = mask_token_id
        self.first_item_id = first_item_id
        self.mask_token_rate = mask_token_rate
        self.random_token_rate = random_token_rate
        self.last_item_only_prob = last_item_only_prob
        self.seed = seed

        # === State ===
        self.seed_generator = keras.random.SeedGenerator(seed)
        self.built = True

    def call(self, item_ids):
        ids = ops.convert_to_tensor(item_ids)
        if len(ids.shape) != 2:
            raise ValueError(f"ClozeMasking expects item ids of shape [batch, length], got {ids.shape}")
        shape = ops.shape(ids)
        real = ids >= self.first_item_id

        # Which items are chosen: u <= max(mask_prob, the row's smallest u). A row
        # where no u fell below mask_prob thus chooses its smallest-u item, and only
        # that one; padding draws 2.0 and is never below the threshold (capped at 1).
        u = keras.random.uniform(shape, seed=self.seed_generator)
        u = ops.where(real, u, 2.0)
        row_min = ops.min(u, axis=1, keepdims=True)
        chosen = u <= ops.minimum(ops.maximum(row_min, self.mask_prob), 1.0)

        # Outcome and random item from one integer draw r in [0, buckets * num_items):
        # r below mask_cut means [MASK], below random_cut a random item, else the item
        # stays. The random band spans whole multiples of num_items, so within it
        # r % num_items is an exactly uniform item index.
        mask_cut = round(self.mask_token_rate * self._buckets) * self.num_items
        random_cut = mask_cut + round(self.random_token_rate * self._buckets) * self.num_items
        r = keras.random.randint(
            shape, 0, self._buckets * self.num_items, dtype="int32", seed=self.seed_generator
        )
        to_mask = r < mask_cut
        to_random = r < random_cut  # only read where to_mask is false
        random_ids = ops.cast(r % self.num_items + self.first_item_id, ids.dtype)

        if self.last_item_only_prob > 0:
            # Last real item of each row: the real position with the largest index.
            positions = ops.arange(shape[1], dtype="int32")[None, :]
            last_pos = ops.max(ops.where(real, positions, -1), axis=1, keepdims=True)
            is_last = ops.logical_and(ops.equal(positions, last_pos), real)
            row_u = keras.random.uniform((shape[0], 1), seed=self.seed_generator)
            last_only = row_u < self.last_item_only_prob
            chosen = ops.where(last_only, is_last, chosen)
            to_mask = ops.logical_or(to_mask, last_only)

        replaced = ops.where(to_mask, self.mask_token_id, ops.where(to_random, random_ids, ids))
        masked_ids = ops.where(chosen, replaced, ids)
        labels = ops.where(chosen, ids, 0)
        sample_weight = ops.cast(chosen, "float32")
        return masked_ids, labels, sample_weight

    def compute_output_spec(self, item_ids):
        weights = keras.KerasTensor(item_ids.shape, dtype="float32")
        return (
            keras.KerasTensor(item_ids.shape, dtype=item_ids.dtype),
            keras.KerasTensor(item_ids.shape, dtype=item_ids.dtype),
            weights,
        )

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "num_items": self.num_items,
                "mask_prob": self.mask_prob,
                "mask_token_id": self.mask_token_id,
                "first_item_id": self.first_item_id,
                "mask_token_rate": self.mask_token_rate,
                "random_token_rate": self.random_token_rate,
                "last_item_only_prob": self.last_item_only_prob,
                "seed": self.seed,
            }
        )
        return config


@keras.saving.register_keras_serializable(package="tfseqrec")
class ClozePreprocessor(ClozeMasking):
    """Cloze masking of a training batch, packed for ``fit`` as keras-hub's
    ``MaskedLMPreprocessor`` packs it: ``ClozeMasking`` of the batch's item ids.

    The one Cloze path of the library: ``tfseqrec.models.tasks.ClozeTask`` (BERT4Rec)
    calls it inside its compiled training step on the unmasked windows that
    ``pipeline.cloze_dataset`` serves, so the masks are drawn fresh each step, on the
    accelerator when there is one. Mapped over a ``tf.data`` dataset it does the same
    in the input pipeline. Arguments are ``ClozeMasking``'s.

    Call arguments:
        x: dict with ``item_ids`` int ``[batch, length]`` and optional
            ``padding_mask`` (default: the non-padding ids); or the id tensor alone.

    Returns:
        ``keras.utils.pack_x_y_sample_weight(x, y, sample_weight)``: ``x`` with the
        masked ``item_ids`` and the ``padding_mask`` of the unmasked ones, ``y`` the
        original id of every chosen slot (0 elsewhere), ``sample_weight`` 1.0 at the
        chosen slots and 0.0 elsewhere.

    Example:

    >>> preprocessor = ClozePreprocessor(num_items=20, mask_prob=1.0, mask_token_rate=1.0,
    ...                                  random_token_rate=0.0)
    >>> x, y, sample_weight = preprocessor({"item_ids": keras.ops.convert_to_tensor([[0, 3, 4]])})
    >>> keras.ops.convert_to_numpy(x["item_ids"]).tolist(), keras.ops.convert_to_numpy(y).tolist()
    ([[0, 1, 1]], [[0, 3, 4]])
    """

    def call(self, x):
        ids = x["item_ids"] if isinstance(x, dict) else x
        mask = x.get("padding_mask") if isinstance(x, dict) else None
        ids = ops.convert_to_tensor(ids)
        if mask is None:
            mask = ops.not_equal(ids, vocab.PAD_ID)
        masked, labels, sample_weight = super().call(ids)
        return keras.utils.pack_x_y_sample_weight(
            {"item_ids": masked, "padding_mask": mask}, labels, sample_weight
        )

    def compute_output_spec(self, x):
        ids = x["item_ids"] if isinstance(x, dict) else x
        mask = x.get("padding_mask") if isinstance(x, dict) else None
        masked, labels, sample_weight = super().compute_output_spec(ids)
        if mask is None:
            mask = keras.KerasTensor(ids.shape, dtype="bool")
        return {"item_ids": masked, "padding_mask": mask}, labels, sample_weight
