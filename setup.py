"""tfseqrec: transformer sequential recommenders for TensorFlow / Keras."""

import pathlib

import setuptools

here = pathlib.Path(__file__).parent

setuptools.setup(
    name="tfseqrec",
    version="0.1.0",
    description="SASRec, BERT4Rec and Recformer in Keras 3 with tf.data, TF Serving and TFX",
    long_description=(here / "README.md").read_text(encoding="utf-8"),
    long_description_content_type="text/markdown",
    license="Apache-2.0",
    python_requires=">=3.10,<3.13",
    packages=setuptools.find_packages(include=["tfseqrec", "tfseqrec.*", "components", "components.*"]),
    package_data={"tfseqrec": ["defaults.json"]},  # `tfseqrec train -h` reads it
    install_requires=[
        "tensorflow>=2.16,<2.22",
        "keras>=3.3",
        "numpy>=1.23",
        "pyarrow>=10",  # columnar CSV reading and hash factorising of raw ids (tfseqrec.data)
        "tqdm>=4.60",
        "tensorboard>=2.16",  # TensorFlow 2.21 no longer installs it; `train` logs to it
        "matplotlib>=3.8",  # `tfseqrec plot`
    ],
    extras_require={
        # Exact versions live in requirements/*.txt; these are the compatible ranges.
        "tfx": ["tfx>=1.16,<1.17", "apache-beam[gcp]>=2.59,<3", "dill"],
        "serving": ["tensorflow-serving-api>=2.16,<2.22"],
        "text": ["tensorflow-text>=2.16,<2.22", "safetensors>=0.4"],
        "recommenders": ["tensorflow-recommenders==0.7.7", "tf-keras>=2.16,<2.22"],
        "dev": ["pytest>=8"],
    },
    entry_points={"console_scripts": ["tfseqrec=tfseqrec.cli:main"]},
)
