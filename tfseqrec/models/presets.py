"""Each model's training defaults and its named presets (tuned configurations), by ``--model`` name.

A model option's default lives in the model's constructor only. What the constructor
does not hold, how the model is trained by default, is the model's
``default_training`` (``TRAINING`` below): the values of the ``TrainConfig``
training options left ``None`` (loss, learning rate, warm-up). A preset is a tuned
configuration by name, ``Model.presets[name]``: model options and training options
together, applied by ``tfseqrec train --preset NAME`` (or ``{"preset": NAME}`` in
the options), explicit options overriding it. A preset pins the values it was
measured with, so that it still reproduces its figures if a default changes.

Each model's own live in its package (``tfseqrec/models/sasrec/presets.py``, ...);
this module gathers them. ``tfseqrec.cli.PRESETS`` lists the preset names for help
(a test checks that it matches).
"""

from tfseqrec.models.bert4rec import presets as bert4rec
from tfseqrec.models.hstu import presets as hstu
from tfseqrec.models.sasrec import presets as sasrec
from tfseqrec.models.unisrec import presets as unisrec

TRAINING = {
    "sasrec": sasrec.TRAINING,
    "bert4rec": bert4rec.TRAINING,
    "unisrec": unisrec.TRAINING,
    "hstu": hstu.TRAINING,
}

PRESETS = {
    "sasrec": sasrec.PRESETS,
    "bert4rec": bert4rec.PRESETS,
    "hstu": hstu.PRESETS,
    "unisrec": unisrec.PRESETS,
}
