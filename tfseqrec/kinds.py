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
import json
import os

from tfseqrec import export, models, registry
from tfseqrec.data import readers, splits, text
from tfseqrec.export.module import (
    ContextRecommender,
    Recommender,
    TextRecommender,
    TimedRecommender,
    UniSRecTextRecommender,
)
from tfseqrec.training import directory, id_models, pretrain, recformer
from tfseqrec.training.config import RecformerConfig, TrainConfig


class ModelKind:
    """The operations every kind provides (subclasses fill them in).

    Attributes:
        spec: the kind's ``tfseqrec.registry.ModelSpec``.
        name: the ``--model`` name.
        config_class: the options dataclass (``tfseqrec.training.TrainConfig`` or
            ``RecformerConfig``); ``option_names`` lists its fields.
        config_file: the run's JSON in a model directory.
        needs_item_text: training reads item text (``--item-text``).
        pretrainable: ``tfseqrec pretrain`` pre-trains it and ``init_from`` starts from that.
        attention_maps: ``tfseqrec plot`` can draw its attention over a history.
    """

    config_file = None
    attention_maps = False

    def __init__(self, spec):
        self.spec = spec
        self.name = spec.name
        self.needs_item_text = spec.reads_item_text
        self.pretrainable = spec.pretrainable

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
        return {name: dict(preset.options) for name, preset in self.spec.presets.items()}

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
        item_features=None,
        **read_kwargs,
    ):
        """Trains on ``data_path``'s leave-one-out split; ``(model, split, epochs)``.

        ``strategy``: a ``tf.distribute`` strategy or its name (``tfseqrec.distribute``).
        ``item_features``: an item-features file, for the id models.
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
        item_features=None,
        warm_start=None,
    ):
        """Trains on a prepared split (the TFX trainer's path); returns ``(model, vocabulary)``:
        the vocabulary is ``vocabulary`` unless a warm start grew the trained one.

        ``item_text``: the items' text file, for kinds that read it; ``item_features``:
        an item-features file, for the id models. ``strategy``: as for ``train``.
        ``warm_start``: a model directory of this kind to start from (the id models;
        ``id_models.warm_prepared``).
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

    def add_featured_items(self, model, vocabulary, model_dir, path):
        """``(model, vocabulary, added)`` with the items of the item-features file ``path`` it lacks."""
        if self.needs_item_text:
            raise ValueError(f"{self.name} reads the items' text; --item-features is for the id models")
        return id_models.add_featured_items(model, vocabulary, model_dir, path)

    def add_items(self, model, vocabulary, info, raw_text):
        """``(model, vocabulary, added)`` with the items of ``raw_text`` it lacks."""
        raise ValueError(
            f"{self.name} reads item ids only; new items need retraining (--item-text is for "
            f"{', '.join(k.name for k in KINDS.values() if k.needs_item_text)})"
        )


class IdModelKind(ModelKind):
    """SASRec, BERT4Rec and HSTU: item-id models trained by ``tfseqrec.training.id_models``.

    Args:
        spec: its ``tfseqrec.registry.ModelSpec``: the model class (``class_name``), and
            whether it trains on masked sequences (``preparation`` ``"cloze"``:
            ``pipeline.cloze_dataset``) or on next-item targets at every position
            (``pipeline.causal_dataset``; ``"timed"`` with the events' times).

    The model is built from the config's ``model_options`` (its constructor's
    arguments; those left out take the constructor's defaults), the training
    options from ``TrainConfig`` (left ``None``: the registry's defaults, or the
    data's choice, ``tfseqrec.presets.for_data``).
    """

    config_file = id_models.CONFIG_FILE
    attention_maps = True

    def __init__(self, spec):
        super().__init__(spec)
        self.model_class = spec.class_name
        self.cloze = spec.preparation == "cloze"
        self.time_bias = spec.time_bias

    @property
    def config_class(self):
        return TrainConfig

    def takes_option(self, name):
        """Every name: one that is not a training option is a model option, checked by ``check``."""
        return True

    def options(self, values, preset=None):
        return super().options({**values, "model": self.name}, preset)

    def build(self, config, num_items, loss_normalizer=None, loss=None, **model_kwargs):
        """The model of ``config`` for a catalogue of ``num_items`` (``id_models.construct``)."""
        return id_models.construct(self.spec, config, num_items, loss_normalizer, loss, **model_kwargs)

    def check(self, config):
        """``id_models.check``: a bad model option is a ``ValueError`` naming it."""
        id_models.check(self.spec, config)

    def constructor_options(self, config):
        """``id_models.constructor_options``."""
        return id_models.constructor_options(self.spec, config)

    def training_dataset(self, config, sequences):
        """The ``tf.data`` training pipeline of ``config`` (``id_models.training_dataset``)."""
        return id_models.training_dataset(self.spec, config, sequences)

    def train(
        self,
        data_path,
        output_dir,
        options,
        item_text=None,
        verbose="auto",
        overwrite=False,
        strategy=None,
        item_features=None,
        warm_start=None,
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
            item_features=item_features,
            strategy=strategy,
            warm_start=warm_start,
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
        item_features=None,
        warm_start=None,
    ):
        config, warm = self.options(options), None
        if warm_start is not None:
            warm, config, split, vocabulary = id_models.warm_prepared(
                self, config, split, vocabulary, warm_start
            )
            data = {
                **(data or {}),
                "warm_start": {
                    "from": warm_start,
                    "items": warm["items"],
                    "vanished_items": warm["vanished_items"],
                },
            }
        config, model_kwargs = id_models.model_inputs(
            self.spec, config, vocabulary, item_text, output_dir, verbose
        )
        if item_features is not None:
            model_kwargs.update(
                id_models.feature_inputs(self.spec, item_features, vocabulary, output_dir, verbose)
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
            warm=warm,
        )
        return model, vocabulary

    def load(self, model_dir):
        return directory.read(model_dir, self.config_file)

    def owns(self, model):
        # Exactly the class: a UniSRec is a SASRec subclass, but not a SASRec kind.
        return type(model) is getattr(models, self.model_class)

    def serving_module(self, model, vocabulary, vocabulary_path, k):
        """``Recommender``, ``ContextRecommender`` for a model that reads event context (its signatures
        also take ``event_<column>``), or ``TimedRecommender`` (whose signatures also take ``timestamps``) for a
        model that reads event times."""
        if model.event_features:
            module = ContextRecommender
        else:
            module = TimedRecommender if model.uses_timestamps else Recommender
        return module(model, vocabulary, vocabulary_path, k=k)


class UniSRecKind(IdModelKind):
    """UniSRec: an id model's training over frozen text vectors of the items' text.

    Before training, ``id_models.model_inputs`` encodes every item's text once with the
    frozen sentence encoder (all-MiniLM-L6-v2, ``tfseqrec.models.SentenceEncoder``) and
    keeps the text beside the model (``item_text.json``).
    """

    needs_item_text = True

    def pretrain(self, domains, config, output_dir, verbose="auto"):
        return pretrain.pretrain_unisrec(self, domains, config, output_dir, verbose)

    def train(
        self,
        data_path,
        output_dir,
        options,
        item_text=None,
        verbose="auto",
        overwrite=False,
        strategy=None,
        item_features=None,
        **read_kwargs,
    ):
        if item_features is not None:
            raise ValueError(
                "unisrec reads its items' text (--item-text); --item-features is for the id models"
            )
        if item_text is None:
            raise ValueError("unisrec needs the items' text (--item-text: *.item.json, movies.dat, u.item)")
        options = dict(options)
        options["attributes"] = id_models.with_attributes(self.options(options), item_text).attributes
        return super().train(
            data_path, output_dir, options, item_text, verbose, overwrite, strategy, **read_kwargs
        )

    def load(self, model_dir):
        """``(model, vocabulary, info)``; the model keeps the items' strings (``set_item_text``: the export's warm-up)."""
        model, vocabulary, info = super().load(model_dir)
        raw_text = directory.read_item_text(model_dir)
        if model.backbone.text_encoder is not None and raw_text is not None:
            texts, _ = text.item_texts(raw_text, vocabulary, model.backbone.text_encoder["attributes"])
            model.backbone.set_item_text(texts)
        return model, vocabulary, info

    def serving_module(self, model, vocabulary, vocabulary_path, k):
        if model.backbone.text_encoder is None:
            return super().serving_module(model, vocabulary, vocabulary_path, k)
        return UniSRecTextRecommender(
            model,
            vocabulary,
            vocabulary_path,
            models.SentenceEncoder.from_pretrained(**model.backbone.text_encoder),
            k=k,
        )

    def add_items(self, model, vocabulary, info, raw_text):
        """New items by their text alone: vectors from the model's sentence encoder, no retraining."""
        if model.backbone.text_encoder is None:
            raise ValueError(
                "this UniSRec does not record how its text vectors were made (text_encoder); "
                "it cannot encode new items"
            )
        grown, added = vocabulary.with_items(raw_text)
        if not added:
            return model, vocabulary, []
        texts, _ = text.item_texts(raw_text, grown, model.backbone.text_encoder["attributes"])
        directory.require_new_item_text(
            "--item-text", texts, grown, vocabulary.size, model.backbone.text_encoder["attributes"]
        )
        vectors = models.SentenceEncoder.from_pretrained(**model.backbone.text_encoder).encode(
            texts[vocabulary.size :]
        )
        grown_model = model.resized(grown.num_items, vectors)
        grown_model.backbone.set_item_text(texts)
        return grown_model, grown, added


class RecformerKind(ModelKind):
    """Recformer: item text in, trained by ``tfseqrec.training.recformer``."""

    config_file = "recformer_config.json"

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
        item_features=None,
        **read_kwargs,
    ):
        if strategy is not None:
            raise ValueError("recformer trains on one device; --strategy is for the id models")
        if item_features is not None:
            raise ValueError(
                "recformer reads its items' text (--item-text); --item-features is for the id models"
            )
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
        item_features=None,
        warm_start=None,
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


def _kind(spec):
    """The kind object of a registry entry, by how its data are prepared."""
    if spec.preparation == "text":
        return RecformerKind(spec)
    if spec.reads_item_text:
        return UniSRecKind(spec)
    return IdModelKind(spec)


# Every registry entry's kind: its defaults and presets are the registry's (``tfseqrec.registry``).
KINDS = {name: _kind(spec) for name, spec in registry.MODELS.items()}


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
