"""The one place where a fairseq-joint criterion reads a translation model (decoder features, targets, output layer)
and the rule that the model is one (:func:`check_translation_model`), and the shape every translation criterion of the plugin takes: fairseq's ``forward``, which runs the model once, and
the loss in ``compute_loss(model, net_output, sample, reduce)``."""

from typing import Tuple

from fairseq.criterions import FairseqCriterion
from torch import Tensor

from fairseq_joint.errors import OptionError
from fairseq_joint.models.output_layer_model import OutputLayerModelMixin
from fairseq_joint.modules.output_layers import OutputLayer
from fairseq_joint.options import arch, registered


def check_translation_model(cfg) -> None:
    """The rule of every criterion that scores a decoder's features through its output layer (its config's
    ``validate``, run once before fairseq starts): the model of ``cfg`` (a whole configuration) is a fairseq-joint
    translation model, whose decoder has an ``--output-layer``."""
    model = registered(cfg, "model")
    if not issubclass(model, OutputLayerModelMixin):
        raise OptionError(f"--criterion {cfg.criterion._name} scores the --output-layer of a fairseq-joint translation "
                          f"model, not --arch {arch(cfg.model)} ({model.__name__}): use --arch joint_transformer or "
                          "joint_lstm (or one of their presets, e.g. joint_transformer_wmt_en_de)")


def output_layer_of(model) -> OutputLayer:
    """The output layer of ``model``, a fairseq-joint translation model (:func:`check_translation_model`): its
    decoder's ``output_projection``."""
    return model.decoder.output_projection


def features_and_target(model, net_output, sample, ignore_prefix_size: int = 0) -> Tuple[Tensor, Tensor]:
    """``(h, target)``: the decoder features h (B x T x dh) of ``net_output`` (the model's output with
    ``features_only=True``) and the targets of ``sample`` (B x T), both without the first ``ignore_prefix_size``
    positions (as fairseq's ``get_lprobs_and_target``)."""
    features = net_output[0]
    target = model.get_targets(sample, net_output)
    if ignore_prefix_size > 0:
        features = features[:, ignore_prefix_size:, :]
        target = target[:, ignore_prefix_size:]
    return features, target


class DecoderFeaturesCriterion(FairseqCriterion):
    """A loss over a translation decoder's features h, in fairseq's shape: ``forward`` runs the model once with
    ``features_only=True`` (the criterion scores the vocabulary, or a subset of it, through the output layer) and
    hands its output to ``compute_loss(model, net_output, sample, reduce)``, which returns ``(loss, sample_size, what
    to log)``; ``forward`` adds the loss and the batch's counts. The subclasses set ``sentence_avg``."""

    sentence_avg = False

    def forward(self, model, sample, reduce=True):
        net_output = model(**sample["net_input"], features_only=True)
        loss, sample_size, logging_output = self.compute_loss(model, net_output, sample, reduce=reduce)
        logging_output.update(loss=loss.data, ntokens=sample["ntokens"], nsentences=sample["target"].size(0),
                              sample_size=sample_size)
        return loss, sample_size, logging_output

    def sample_size(self, sample) -> int:
        """fairseq's normalizer of a batch's loss: its sentences with ``--sentence-avg``, else its target tokens."""
        return sample["target"].size(0) if self.sentence_avg else sample["ntokens"]
