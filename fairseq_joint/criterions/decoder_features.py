"""The one place where a fairseq-joint criterion reads a translation model: decoder features, targets, output layer."""

from typing import Tuple

from torch import Tensor

from fairseq_joint.errors import OptionError
from fairseq_joint.modules.output_layers import OutputLayer


def output_layer_of(model, criterion: str) -> OutputLayer:
    """The fairseq-joint output layer of ``model`` (``decoder.output_projection``), or a one-line error."""
    layer = getattr(getattr(model, "decoder", None), "output_projection", None)
    if not isinstance(layer, OutputLayer):
        raise OptionError(f"--criterion {criterion} needs a fairseq-joint model (--arch joint_transformer*/joint_lstm*), "
                         "whose decoder has an --output-layer")
    return layer


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


def decoder_features(model, sample, criterion: str, ignore_prefix_size: int = 0) -> Tuple[Tensor, Tensor, OutputLayer]:
    """``(h, target, layer)``: the decoder features h (B x T x dh, ``features_only=True``) of ``sample``, its targets
    (B x T), both without the first ``ignore_prefix_size`` positions, and the output layer that scores h."""
    layer = output_layer_of(model, criterion)
    features, target = features_and_target(model, model(**sample["net_input"], features_only=True), sample,
                                            ignore_prefix_size)
    return features, target, layer
