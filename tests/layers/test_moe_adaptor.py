import numpy as np
import tensorflow as tf

from tests import test_case
from tfseqrec.layers import MoEAdaptor


def _numpy_adaptor(x, layer):
    """UniSRec's Eq. 2-3 without noise or dropout: sum_k softmax(x G)_k (x - b_k) W_k."""
    b, w, g = (
        np.asarray(v, np.float64) for v in (layer.whitening_bias, layer.expert_kernel, layer.gate_kernel)
    )
    logits = x @ g
    gates = np.exp(logits - logits.max(-1, keepdims=True))
    gates /= gates.sum(-1, keepdims=True)
    experts = np.stack([(x - b[k]) @ w[k] for k in range(len(b))], axis=-2)
    return (gates[..., None] * experts).sum(-2)


class MoEAdaptorTest(test_case.TestCase):
    def test_layer_harness(self):
        self.run_layer_test(
            MoEAdaptor,
            {"output_dim": 4, "num_experts": 3},
            np.ones((2, 5, 6), "float32"),
            (2, 5, 4),
            expected_partial_output=[0.5441, 0.4142, 0.0009, 0.0814],
        )  # NumPy: Eq. 2-3

    def test_matches_the_paper_equations(self):
        layer = MoEAdaptor(output_dim=4, num_experts=3, dropout=0.3)
        x = np.random.default_rng(1).normal(size=(2, 5, 6)).astype("float32")
        layer.build(x.shape)
        test_case.set_numpy_weights(layer, seed=2, scale=0.5)
        self.assertAllClose(layer(x), _numpy_adaptor(x.astype(np.float64), layer), atol=1e-5)
        # Training without dropout or noise computes the same through the per-expert path.
        quiet = MoEAdaptor(output_dim=4, num_experts=3, dropout=0.0, noisy_gating=False)
        quiet.build(x.shape)
        for mine, theirs in zip(quiet.weights, layer.weights):
            mine.assign(theirs)
        self.assertAllClose(quiet(x, training=True), _numpy_adaptor(x.astype(np.float64), quiet), atol=1e-5)

    def test_noisy_gates_only_while_training(self):
        layer = MoEAdaptor(output_dim=4, num_experts=3)
        x = np.random.default_rng(1).normal(size=(8, 6)).astype("float32")
        layer.build(x.shape)
        a, b = np.asarray(layer.gates(x, training=True)), np.asarray(layer.gates(x, training=True))
        self.assertNotAllClose(a, b)
        self.assertAllClose(a.sum(-1), np.ones(8), atol=1e-6)
        # Zero gate kernels at the start: every expert weighs the same at inference.
        self.assertAllClose(layer.gates(x), np.full((8, 3), 1 / 3), atol=1e-6)

    def test_gradient_holds_no_copy_of_the_kernel_per_row(self):
        # TensorFlow's einsum gradient over "..." broadcast the kernel to [batch, length,
        # experts, input_dim, output_dim]: 10.8 GiB a step at UniSRec's training sizes.
        layer = MoEAdaptor(output_dim=4, num_experts=3, dropout=0.3)
        x = tf.random.normal((2, 5, 6))
        layer.build(x.shape)

        @tf.function
        def gradients(x):
            with tf.GradientTape() as tape:
                loss = tf.reduce_sum(layer(x, training=True) ** 2)
            return tape.gradient(loss, layer.trainable_weights)

        graph = gradients.get_concrete_function(x).graph
        largest = max(t.shape.num_elements() or 0 for op in graph.get_operations() for t in op.outputs)
        self.assertEqual(largest, 2 * 5 * 3 * 6)  # one dropout copy of the rows per expert
