"""Model kinds: what ``--model NAME`` means, decided in this one place.

A kind knows how to build, train, load and export its models. The CLI and the TFX
trainer ask the registry once and pass the kind down (to ``tfseqrec.training``,
``tfseqrec.export``), and never test a kind's name themselves; a new model kind is
one more entry in ``KINDS``. ``load`` (``tfseqrec.load``) reads a model directory of
any kind.

Example:

>>> sorted(KINDS)
['bert4rec', 'hstu', 'recformer', 'sasrec', 'unisrec']
>>> get("bert4rec").config_class.__name__, get("recformer").config_class.__name__
('TrainConfig', 'RecformerConfig')
>>> get("recformer").needs_item_text, get("unisrec").needs_item_text, get("sasrec").needs_item_text
(True, True, False)
"""

import dataclasses
import inspect
import json
import os

import numpy as np

from tfseqrec import export, models
from tfseqrec.data import numpy_pipeline, pipeline, readers, splits, text, vocab
from tfseqrec.export.module import (
    Recommender,
    TextRecommender,
    TimedRecommender,
    UniSRecTextRecommender,
)
from tfseqrec.models.hstu import presets as hstu_presets
from tfseqrec.training import directory, id_models, pretrain, recformer
from tfseqrec.training.config import (
    LEGACY_MODEL_OPTIONS,
    MODELS,
    PRETRAINED_MODELS,
    RecformerConfig,
    TrainConfig,
)

# Time buckets of HSTU's relative time bias when the data has event times (the reference's).
DEFAULT_TIME_BUCKETS = hstu_presets.TIME_BUCKETS


class ModelKind:
    """The operations every kind provides (subclasses fill them in).

    Attributes:
        name: the ``--model`` name.
        config_class: the options dataclass (``tfseqrec.training.TrainConfig`` or
            ``RecformerConfig``); ``option_names`` lists its fields.
        config_file: the run's JSON in a model directory.
        needs_item_text: training reads item text (``--item-text``).
        pretrainable: ``tfseqrec pretrain`` pre-trains it and ``init_from`` starts from that.
        attention_maps: ``tfseqrec plot`` can draw its attention over a history.
    """

    name = None
    config_file = None
    needs_item_text = False
    attention_maps = False
    pretrainable = False

    def pretrain(self, domains, config, output_dir, verbose="auto"):
        """``tfseqrec pretrain`` of this kind (``tfseqrec.training.pretrain``); per-epoch rows."""
        pretrainable = sorted(k.name for k in KINDS.values() if k.pretrainable)
        raise ValueError(f"tfseqrec pretrain pre-trains {', '.join(pretrainable)}, not {self.name}")

    @property
    def config_class(self):
        raise NotImplementedError

    def option_names(self):
        return {f.name for f in dataclasses.fields(self.config_class)}

    def takes_option(self, name):
        """Whether ``name`` may be given to this kind (a flag or a ``--config`` key)."""
        return name in self.option_names()

    def check(self, config):
        """Checks what ``options`` cannot (kinds whose options are all fields of ``config_class``: nothing)."""

    @property
    def presets(self):
        """``{name: options}``: the kind's tuned configurations (``tfseqrec train --preset``)."""
        return {}

    def options(self, values, preset=None):
        """The kind's options dataclass of a dict (unknown keys are an error).

        ``preset``: a name in ``presets``, whose options ``values`` override.
        """
        values = dict(values)
        if preset is not None:
            if preset not in self.presets:
                known = ", ".join(sorted(self.presets)) or "none"
                raise ValueError(f"{self.name} has no preset {preset!r}; its presets: {known}")
            values["preset"] = preset
        return self.config_class.from_dict(values)

    def train(
        self,
        data_path,
        output_dir,
        options,
        item_text=None,
        verbose="auto",
        overwrite=False,
        strategy=None,
        **read_kwargs,
    ):
        """Trains on ``data_path``'s leave-one-out split; ``(model, split, epochs)``.

        ``strategy``: a ``tf.distribute`` strategy or its name (``tfseqrec.distribute``).
        """
        raise NotImplementedError

    def fit(
        self,
        split,
        vocabulary,
        output_dir,
        options,
        verbose="auto",
        data=None,
        max_steps=None,
        item_text=None,
        strategy=None,
    ):
        """Trains on a prepared split (the TFX trainer's path); returns the model.

        ``item_text``: the items' text file, for kinds that read it. ``strategy``: as
        for ``train``.
        """
        raise ValueError(f"{self.name} models cannot be trained on a prepared id split")

    def load(self, model_dir):
        """``(model, vocabulary, info)`` of a model directory of this kind."""
        raise NotImplementedError

    def owns(self, model):
        """Whether ``model`` (as ``load`` returns it) is of this kind."""
        raise NotImplementedError

    def serving_module(self, model, vocabulary, vocabulary_path, k):
        """The ``tf.Module`` whose signatures ``tfseqrec.export`` saves."""
        raise NotImplementedError

    def add_items(self, model, vocabulary, info, raw_text):
        """``(model, vocabulary, added)`` with the items of ``raw_text`` it lacks."""
        raise ValueError(
            f"{self.name} reads item ids only; new items need retraining (--item-text is for "
            f"{', '.join(k.name for k in KINDS.values() if k.needs_item_text)})"
        )


class IdModelKind(ModelKind):
    """SASRec, BERT4Rec and HSTU: item-id models trained by ``tfseqrec.training.id_models``.

    Args:
        name: the ``--model`` name.
        model_class: name of the class in ``tfseqrec.models``.
        cloze: trained on masked sequences (``pipeline.cloze_dataset``) rather than
            next-item targets at every position (``pipeline.causal_dataset``).
        time_bias: the model has a relative time bias (``num_time_buckets``), which
            the data's event times switch on (``with_time_bias``).

    The model is built from the config's ``model_options`` (its constructor's
    arguments; those left out take the constructor's defaults), the training
    options from ``TrainConfig`` (left ``None``: the model class's
    ``default_training``).
    """

    config_file = "train_config.json"
    attention_maps = True

    def __init__(self, name, model_class, cloze, time_bias=False):
        self.name = name
        self.model_class = model_class
        self.cloze = cloze
        self.time_bias = time_bias

    @property
    def config_class(self):
        return TrainConfig

    def takes_option(self, name):
        """Every name: one that is not a training option is a model option, checked by ``check``."""
        return True

    @property
    def pretrainable(self):
        return self.name in PRETRAINED_MODELS

    @property
    def presets(self):
        return MODELS[self.name].presets

    def options(self, values, preset=None):
        return super().options({**values, "model": self.name}, preset)

    def build(self, config, num_items, loss_normalizer=None, loss=None, **model_kwargs):
        """The model of ``config`` for a catalogue of ``num_items`` (``model_kwargs`` to its constructor).

        A model option the constructor does not take, or one out of range, is a
        ``ValueError`` naming it.
        """
        options = self.constructor_options(config)
        kwargs = {
            **options,
            **model_kwargs,
            "num_items": num_items,
            "max_sequence_length": config.max_sequence_length,
            "loss": loss,
            "loss_normalizer": loss_normalizer,
        }
        if self.cloze:
            kwargs.update(last_item_only_prob=config.last_item_only_prob, seed=config.seed)
            if config.mask_prob is not None:  # None before the data settle it: the constructor's
                kwargs["mask_prob"] = config.mask_prob
        return _constructed(getattr(models, self.model_class), kwargs, options)

    def check(self, config):
        """Checks ``config.model_options`` by building a one-item model of them (``ValueError`` naming a bad one).

        This creates TensorFlow variables: call it after a multi-worker strategy exists.
        """
        self.build(config, 1)

    def constructor_options(self, config):
        """``config.model_options`` less the values files written before presets recorded for every
        model (``LEGACY_MODEL_OPTIONS``) where the constructor does not take them."""
        accepted = _model_arguments(getattr(models, self.model_class))
        return {
            k: v for k, v in config.model_options.items() if k in accepted or LEGACY_MODEL_OPTIONS.get(k) != v
        }

    def initialize(self, model, checkpoint):
        """Starts ``model`` from a pre-trained checkpoint (``init_from``); only UniSRec has one."""
        raise ValueError(f"{self.name} has no pre-training; init_from is for unisrec and recformer")

    def prepare(self, model, train):
        """Tells a freshly built ``model`` what it needs of the training sequences ``train`` (id models: nothing)."""

    def model_inputs(self, config, vocabulary, item_text, output_dir, verbose="auto"):
        """``(config, model_kwargs)``: what the model's constructor needs beyond ``build``'s options.

        Id models need nothing; a kind that reads item text encodes it here.
        """
        return config, {}

    def with_time_bias(self, config, sequences):
        """``(config, note)``: ``num_time_buckets`` settled by whether ``sequences`` carry times.

        A kind whose model has a time bias (``time_bias``) uses 128 buckets when the
        data has event times and the model option is unset, none otherwise; ``note``
        is the line the training log prints about it. Asking for buckets without
        times, or of a kind without a time bias, is an error.
        """
        wanted = config.model_options.get("num_time_buckets")
        has_times = sequences.timestamps is not None
        if not self.time_bias:
            if wanted:
                raise ValueError(
                    f"num_time_buckets applies to models with a time bias (hstu), not {self.name}"
                )
            return config, None
        if wanted and not has_times:
            raise ValueError(
                f"num_time_buckets={wanted} needs event times, and the data has none (the SASRec "
                "text format, or a CSV without a time column)"
            )
        buckets = (DEFAULT_TIME_BUCKETS if has_times else 0) if wanted is None else wanted
        config = dataclasses.replace(
            config, model_options={**config.model_options, "num_time_buckets": buckets}
        )
        if buckets:
            return (
                config,
                f"{self.name}: the data has event times: relative time bias over {buckets} log buckets",
            )
        reason = "the data has no event times" if not has_times else "num_time_buckets=0"
        return config, f"{self.name}: no time bias ({reason}); relative position bias only"

    def training_dataset(self, config, sequences):
        """The ``tf.data`` training pipeline of ``config``."""
        if self.cloze:
            return pipeline.cloze_dataset(
                sequences,
                config.max_sequence_length,
                config.batch_size,
                seed=config.seed,
                window_stride=config.window_stride,
                bucket_boundaries=config.bucket_boundaries,
            )
        return pipeline.causal_dataset(
            sequences,
            config.max_sequence_length,
            config.batch_size,
            seed=config.seed,
            window_stride=config.window_stride,
            bucket_boundaries=config.bucket_boundaries,
            timestamps=bool(config.time_buckets),
        )

    def _windows(self, config):
        """The training windows' ``sliding_windows`` arguments: Cloze windows of ``N`` items, or
        next-item windows of ``N + 1`` (inputs and the targets one item later) holding two or more."""
        if self.cloze:
            return {"width": config.max_sequence_length, "stride": config.window_stride, "min_length": 1}
        return {"width": config.max_sequence_length + 1, "stride": config.window_stride, "min_length": 2}

    def targets_per_window(self, config, sequences):
        """Expected training targets of each window of ``sequences`` (the loss normaliser's input)."""
        windows, _ = pipeline.sliding_windows(sequences, **self._windows(config))
        if self.cloze:
            items = (windows != vocab.PAD_ID).sum(axis=1)
            # mask_prob of the items, at least one; or only the last item.
            p = config.last_item_only_prob
            return (1 - p) * np.maximum(config.mask_prob * items, 1) + p
        return (windows[:, :-1] != vocab.PAD_ID).sum(axis=1)

    def targets_outside_windows(self, config, sequences):
        """``(outside, total)``: the training targets of ``sequences`` that no training window of
        ``config`` holds (``numpy_pipeline.targets_outside_windows``), and all of them. A next-item
        window's first item is input only."""
        return numpy_pipeline.targets_outside_windows(
            sequences, **self._windows(config), first_is_target=self.cloze
        )

    def train(
        self,
        data_path,
        output_dir,
        options,
        item_text=None,
        verbose="auto",
        overwrite=False,
        strategy=None,
        **read_kwargs,
    ):
        model, history, split, _ = id_models.train(
            self,
            data_path,
            output_dir,
            self.options(options),
            verbose=verbose,
            overwrite=overwrite,
            item_text=item_text,
            strategy=strategy,
            **read_kwargs,
        )
        return model, split, len(history.history.get("loss", []))

    def fit(
        self,
        split,
        vocabulary,
        output_dir,
        options,
        verbose="auto",
        data=None,
        max_steps=None,
        item_text=None,
        strategy=None,
    ):
        config, model_kwargs = self.model_inputs(
            self.options(options), vocabulary, item_text, output_dir, verbose
        )
        model, _ = id_models.fit(
            self,
            split,
            vocabulary,
            output_dir,
            config,
            strategy,
            verbose=verbose,
            data=data,
            log_dir=output_dir,
            max_steps=max_steps,
            model_kwargs=model_kwargs,
        )
        return model

    def load(self, model_dir):
        return directory.read(model_dir, self.config_file)

    def owns(self, model):
        # Exactly the class: a UniSRec is a SASRec subclass, but not a SASRec kind.
        return type(model) is getattr(models, self.model_class)

    def serving_module(self, model, vocabulary, vocabulary_path, k):
        """``Recommender``, or ``TimedRecommender`` (whose signatures also take ``timestamps``) for a
        model that reads event times."""
        module = TimedRecommender if model.uses_timestamps else Recommender
        return module(model, vocabulary, vocabulary_path, k=k)


class UniSRecKind(IdModelKind):
    """UniSRec: an id model's training over frozen text vectors of the items' text.

    Before training, ``item_inputs`` encodes every item's text once with the frozen
    sentence encoder (all-MiniLM-L6-v2, ``tfseqrec.models.SentenceEncoder``) and
    keeps the text beside the model (``item_text.json``).
    """

    needs_item_text = True

    def pretrain(self, domains, config, output_dir, verbose="auto"):
        return pretrain.pretrain_unisrec(self, domains, config, output_dir, verbose)

    def __init__(self):
        super().__init__("unisrec", "UniSRec", cloze=False)

    def initialize(self, model, checkpoint):
        """Starts ``model`` from a ``tfseqrec pretrain --model unisrec`` directory (all but the item tables)."""

        pretrain.read_config(checkpoint, "unisrec")
        pretrained = directory.load_model_file(os.path.join(checkpoint, pretrain.MODEL_FILE))
        return model.load_shared_weights(pretrained)

    def prepare(self, model, train):
        """With id embeddings: the items absent from ``train`` are scored by their text alone."""
        model.set_trained_items(train.item_counts(vocab.NUM_RESERVED + model.num_items))

    def train(
        self,
        data_path,
        output_dir,
        options,
        item_text=None,
        verbose="auto",
        overwrite=False,
        strategy=None,
        **read_kwargs,
    ):
        if item_text is None:
            raise ValueError("unisrec needs the items' text (--item-text: *.item.json, movies.dat, u.item)")
        options = dict(options)
        options["attributes"] = self.with_attributes(self.options(options), item_text).attributes
        return super().train(
            data_path, output_dir, options, item_text, verbose, overwrite, strategy, **read_kwargs
        )

    def model_inputs(self, config, vocabulary, item_text, output_dir, verbose="auto"):
        if item_text is None:
            raise ValueError(
                f"{self.name} reads the items' text: give its file (in the TFX pipeline, "
                "custom_config={'item_text': PATH})"
            )
        config = self.with_attributes(config, item_text)
        os.makedirs(output_dir, exist_ok=True)
        return config, self.item_inputs(config, vocabulary, item_text, output_dir, verbose)

    @staticmethod
    def with_attributes(config, item_text):
        """``config`` with the attributes of ``item_text``'s format when it names none."""
        if config.attributes is None:
            config = dataclasses.replace(config, attributes=text.default_attributes(item_text))
        return config

    def item_inputs(self, config, vocabulary, item_text, output_dir, verbose="auto"):
        """``{"text_dim", "text_embeddings"}`` of the vocabulary's items; writes their text to ``output_dir``."""
        raw_text = readers.read_item_text(item_text)
        texts, missing = text.item_texts(raw_text, vocabulary, config.attributes)
        directory.require_text(item_text, raw_text, vocabulary, missing)
        directory.write_item_text(output_dir, raw_text, vocabulary)
        encoder_config = {
            "attributes": list(config.attributes),
            "max_attribute_tokens": config.max_attribute_tokens,
            "num_layers": 6,
        }
        encoder = models.SentenceEncoder.from_pretrained(**encoder_config)
        vectors = encoder.encode(texts[vocab.NUM_RESERVED :], progress=None if verbose == "auto" else False)
        return {"text_dim": encoder.dim, "text_embeddings": vectors, "text_encoder": encoder_config}

    def load(self, model_dir):
        """``(model, vocabulary, info)``; the model keeps the items' strings (``set_item_text``: the export's warm-up)."""
        model, vocabulary, info = super().load(model_dir)
        raw_text = directory.read_item_text(model_dir)
        if model.text_encoder is not None and raw_text is not None:
            texts, _ = text.item_texts(raw_text, vocabulary, model.text_encoder["attributes"])
            model.set_item_text(texts)
        return model, vocabulary, info

    def serving_module(self, model, vocabulary, vocabulary_path, k):
        if model.text_encoder is None:
            return super().serving_module(model, vocabulary, vocabulary_path, k)
        return UniSRecTextRecommender(
            model,
            vocabulary,
            vocabulary_path,
            models.SentenceEncoder.from_pretrained(**model.text_encoder),
            k=k,
        )

    def add_items(self, model, vocabulary, info, raw_text):
        """New items by their text alone: vectors from the model's sentence encoder, no retraining."""
        if model.text_encoder is None:
            raise ValueError(
                "this UniSRec does not record how its text vectors were made (text_encoder); "
                "it cannot encode new items"
            )
        grown, added = vocabulary.with_items(raw_text)
        if not added:
            return model, vocabulary, []
        texts, _ = text.item_texts(raw_text, grown, model.text_encoder["attributes"])
        directory.require_new_item_text(
            "--item-text", texts, grown, vocabulary.size, model.text_encoder["attributes"]
        )
        vectors = models.SentenceEncoder.from_pretrained(**model.text_encoder).encode(
            texts[vocabulary.size :]
        )
        grown_model = model.resized(grown.num_items, vectors)
        grown_model.set_item_text(texts)
        return grown_model, grown, added


class RecformerKind(ModelKind):
    """Recformer: item text in, trained by ``tfseqrec.training.recformer``."""

    name = "recformer"
    config_file = "recformer_config.json"
    needs_item_text = True
    pretrainable = True

    def pretrain(self, domains, config, output_dir, verbose="auto"):
        return recformer.pretrain_recformer(domains, config, output_dir, verbose)

    @property
    def config_class(self):
        return RecformerConfig

    def train(
        self,
        data_path,
        output_dir,
        options,
        item_text=None,
        verbose="auto",
        overwrite=False,
        strategy=None,
        **read_kwargs,
    ):
        if strategy is not None:
            raise ValueError("recformer trains on one device; --strategy is for the id models")
        if item_text is None:
            raise ValueError("recformer needs the items' text (--item-text: *.item.json, movies.dat, u.item)")
        split, vocabulary, report = splits.prepare(readers.read_interactions(data_path, **read_kwargs))
        recommender, rows, split, _ = recformer.train(
            data_path,
            item_text,
            output_dir,
            self.options(options),
            verbose=verbose,
            split=split,
            vocabulary=vocabulary,
            report=report,
            overwrite=overwrite,
        )
        return recommender, split, len(rows)

    def fit(
        self,
        split,
        vocabulary,
        output_dir,
        options,
        verbose="auto",
        data=None,
        max_steps=None,
        item_text=None,
        strategy=None,
    ):
        raise ValueError(
            "recformer reads item text, which the TFX pipeline's id sequences do not carry; "
            "train it with 'tfseqrec train --model recformer --item-text ...'"
        )

    def load(self, model_dir):
        return recformer.read_model(model_dir)

    def owns(self, model):
        return isinstance(model, models.RecformerRecommender)

    def serving_module(self, model, vocabulary, vocabulary_path, k):
        # Without the training-time state cache: the export computes a request's item states itself.
        return TextRecommender(model.uncached(), vocabulary, vocabulary_path, model.tokenizer, k=k)

    def add_items(self, model, vocabulary, info, raw_text):
        return recformer.add_items(model, vocabulary, raw_text, self.options(info["config"]))


# Each id-model kind's defaults and presets are its model class's (``tfseqrec.models.presets``).
KINDS = {
    kind.name: kind
    for kind in (
        IdModelKind("sasrec", "SASRec", cloze=False),
        IdModelKind("bert4rec", "BERT4Rec", cloze=True),
        UniSRecKind(),
        IdModelKind("hstu", "HSTU", cloze=False, time_bias=True),
        RecformerKind(),
    )
}


def _constructed(model_class, kwargs, model_options):
    """``model_class(**kwargs)``; a model option it does not take is a ``ValueError`` naming it.

    Which options the model takes is read from the constructors' signatures
    (``_model_arguments``) before anything is built; the constructor's own checks
    name an option out of range.
    """
    unknown = sorted(set(model_options) - _model_arguments(model_class))
    if unknown:
        training = sorted(f.name for f in dataclasses.fields(TrainConfig))
        raise ValueError(
            f"unknown training options {unknown}: neither training options ({training}) nor "
            f"arguments of {model_class.__name__}'s constructor (model options)"
        )
    return model_class(**kwargs)


def _model_arguments(model_class):
    """The names of the keyword arguments ``model_class`` takes: its own and its task's, and its
    backbone's (``backbone_cls``), which the task passes on; read from the ``__init__`` of each
    tfseqrec class up the hierarchy for as long as one passes ``**kwargs`` on."""
    names = set()
    for cls in (model_class, model_class.backbone_cls):
        for klass in cls.__mro__:
            if klass.__module__.split(".")[0] != "tfseqrec":
                break  # Keras's own: the task's signature names what it passes to them
            if "__init__" not in vars(klass):
                continue
            parameters = inspect.signature(klass.__init__).parameters.values()
            names.update(p.name for p in parameters if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY))
            if all(p.kind != p.VAR_KEYWORD for p in parameters):
                break  # passes nothing on to the classes above it
    return names - {"self"}


def get(name):
    """The kind called ``name``; ``ValueError`` naming the known ones otherwise."""
    if name not in KINDS:
        raise ValueError(f"unknown model {name!r}; expected one of {sorted(KINDS)}")
    return KINDS[name]


def for_model_dir(model_dir):
    """The kind of a directory ``tfseqrec train`` wrote (by its run JSON)."""
    for kind in KINDS.values():
        path = os.path.join(model_dir, kind.config_file)
        if os.path.exists(path):
            with open(path) as f:
                config = json.load(f).get("config", {})
            if config.get("model", kind.name) == kind.name:
                return kind
    if not os.path.isdir(model_dir):
        raise FileNotFoundError(f"{model_dir}: no such model directory")
    files = sorted({kind.config_file for kind in KINDS.values()})
    raise FileNotFoundError(
        f"{model_dir}: neither of {files}; is it a directory written by 'tfseqrec train'?"
    )


def for_model(model):
    """The kind of a model object (as ``load`` returns it)."""
    for kind in KINDS.values():
        if kind.owns(model):
            return kind
    raise TypeError(f"{type(model).__name__} is not a model of any kind in {sorted(KINDS)}")


def load(model_dir):
    """``(model, vocabulary, info)`` of any model directory ``tfseqrec train`` writes."""
    return for_model_dir(model_dir).load(model_dir)


def export_model(model, vocabulary, base_path, version=None, k=10, warmup=True):
    """Writes ``model`` as the next TF Serving version under ``base_path`` (or ``version``).

    ``tfseqrec.export.export_version`` with the model's kind (``for_model``); ``k`` and
    ``warmup`` as there. Returns ``(path, version)``.
    """
    return export.export_version(
        for_model(model), model, vocabulary, base_path, version=version, k=k, warmup=warmup
    )
