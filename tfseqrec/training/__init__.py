"""Training: options (``config``), callbacks, model directories, and one driver per model family.

- ``config``: ``TrainConfig`` (SASRec, BERT4Rec) and ``RecformerConfig``, checked on
  construction; option names mean the same in both.
- ``callbacks``: ``BestModel``, ``HistoryLog``, ``TimeLimit``, ``StepLimit``,
  ``RankingValidation``.
- ``directory``: model directories written whole or not at all, resumed, read back.
- ``id_models``: the SASRec / BERT4Rec / HSTU / UniSRec driver (``train``, ``fit``); each takes
  the model's kind (``tfseqrec.kinds.get(name)``) as its first argument.
- ``warm``: ``warm_start``, a trained model grown onto a log that grew.
- ``recformer``: the Recformer driver (alignment, two-stage fine-tuning, new items).

Which driver a ``--model`` name uses is ``tfseqrec.kinds``'s decision; the names
below are the id-model driver's. A model directory is read back by ``tfseqrec.load``
(``tfseqrec.kinds.load``), whatever its kind.
"""

from tfseqrec.training.callbacks import (
    BestModel,
    HistoryLog,
    RankingValidation,
    StepLimit,
    TimeLimit,
    TrainingDiverged,
    weights_finite,
)
from tfseqrec.training.config import Options, RecformerConfig, TrainConfig
from tfseqrec.training.directory import MODEL_FILE, PARTIAL_SUFFIX, output_directory
from tfseqrec.training.id_models import (
    CONFIG_FILE,
    build_model,
    fit,
    learning_rate,
    loss_normalizer,
    train,
)
from tfseqrec.training.warm import warm_start
