"""UniSRec's adaptor: parametric whitening experts mixed by a (noisy) softmax gate."""

import keras
from keras import ops


@keras.saving.register_keras_serializable(package="tfseqrec")
class MoEAdaptor(keras.layers.Layer):
    """Mixture of parametric-whitening experts over frozen text vectors.

    Each expert ``k`` whitens its input with a learned shift and projection,
    ``e_k(x) = (dropout(x) - b_k) W_k`` (UniSRec's Eq. 2), and a softmax gate over
    ``x G`` mixes them: ``sum_k g_k(x) e_k(x)`` (Eq. 3). While training, the gate
    logits get Gaussian noise of standard deviation ``softplus(x N) + 0.01`` (the
    official code's noisy gating). Each expert draws its own dropout mask.

    Args:
        output_dim: width of the adapted vectors (the encoder's ``hidden_dim``).
        num_experts: experts (the paper: 8).
        dropout: dropout of each expert's input (the paper: 0.2).
        noisy_gating: add the gate noise while training.
        kernel_initializer: initializer of the expert projections (default, as the
            official code: ``N(0, 0.02)``); the gate and noise kernels start at zero, so the
            experts start equally weighted.

    Call arguments:
        inputs: float ``[..., input_dim]`` text vectors.
        training: dropout and gate-noise switch.

    Returns:
        float ``[..., output_dim]``.

    Example:

    >>> adaptor = MoEAdaptor(output_dim=4, num_experts=2)
    >>> tuple(adaptor(keras.ops.ones((3, 5, 6))).shape)
    (3, 5, 4)

    Reference:
        Hou et al., "Towards Universal Sequence Representation Learning for
        Recommender Systems", KDD 2022.
    """

    def __init__(
        self, output_dim, num_experts=8, dropout=0.2, noisy_gating=True, kernel_initializer=None, **kwargs
    ):
        super().__init__(**kwargs)
        self.output_dim = output_dim
        self.num_experts = num_experts
        self.dropout = dropout
        self.noisy_gating = noisy_gating
        self.kernel_initializer = keras.initializers.get(
            kernel_initializer or keras.initializers.RandomNormal(stddev=0.02)
        )
        self.dropout_layer = keras.layers.Dropout(dropout, dtype=self.dtype_policy)
        self.seed_generator = keras.random.SeedGenerator()

    def build(self, input_shape):
        input_dim = int(input_shape[-1])
        self.whitening_bias = self.add_weight(
            name="whitening_bias", shape=(self.num_experts, input_dim), initializer="zeros"
        )
        self.expert_kernel = self.add_weight(
            name="expert_kernel",
            shape=(self.num_experts, input_dim, self.output_dim),
            initializer=self.kernel_initializer,
        )
        self.gate_kernel = self.add_weight(
            name="gate_kernel", shape=(input_dim, self.num_experts), initializer="zeros"
        )
        if self.noisy_gating:
            self.noise_kernel = self.add_weight(
                name="noise_kernel", shape=(input_dim, self.num_experts), initializer="zeros"
            )
        self.built = True

    def gates(self, inputs, training=None):
        """The experts' weights ``[..., num_experts]`` (softmax of the gate logits)."""
        logits = ops.matmul(inputs, self.gate_kernel)
        if training and self.noisy_gating:
            stddev = ops.softplus(ops.matmul(inputs, self.noise_kernel)) + 0.01
            logits = (
                logits
                + keras.random.normal(ops.shape(logits), seed=self.seed_generator, dtype=logits.dtype)
                * stddev
            )
        return ops.softmax(logits, axis=-1)

    def call(self, inputs, training=None):
        # Rows, not ``...``: TensorFlow's einsum gradient broadcasts an ellipsis against
        # the kernel, [..., experts, input_dim, output_dim] in memory (10.8 GiB and 16 s
        # a step at 128 x 50 histories of 384-wide vectors, against 0.95 GiB and 0.2 s
        # over rows), so the leading dimensions are flattened and restored.
        shape = ops.shape(inputs)
        rows = ops.reshape(inputs, (-1, shape[-1]))
        gates = self.gates(rows, training)
        if training and self.dropout > 0:
            # One dropout mask per expert, as each of the paper's experts has its own.
            x = ops.repeat(ops.expand_dims(rows, 1), self.num_experts, axis=1)
            x = self.dropout_layer(x, training=True) - self.whitening_bias
            experts = ops.einsum("nki,kio->nko", x, self.expert_kernel)
        else:
            # (x - b_k) W_k = x W_k - b_k W_k: no [rows, experts, input_dim] copy of x.
            experts = ops.einsum("ni,kio->nko", rows, self.expert_kernel) - ops.einsum(
                "ki,kio->ko", self.whitening_bias, self.expert_kernel
            )
        mixed = ops.sum(experts * ops.expand_dims(gates, -1), axis=1)
        return ops.reshape(mixed, (*shape[:-1], self.output_dim))

    def compute_output_shape(self, input_shape):
        return tuple(input_shape[:-1]) + (self.output_dim,)

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "output_dim": self.output_dim,
                "num_experts": self.num_experts,
                "dropout": self.dropout,
                "noisy_gating": self.noisy_gating,
                "kernel_initializer": keras.initializers.serialize(self.kernel_initializer),
            }
        )
        return config
