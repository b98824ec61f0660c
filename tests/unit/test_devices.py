"""Inference on another device with the plugin's models, checked on the CPU: fairseq's commands move a model with
``model.cuda()`` and its inputs with ``.cuda()`` (fairseq-interactive, -generate, -validate), which moves every
parameter and buffer; what a model keeps in plain attributes does not move. These tests list every tensor a model holds
outside its parameters and buffers after a forward in evaluation, so that a new one is seen, and check that each is
made again where the weights are (GPU runs: tests/cli/test_gpu_inference.py)."""

import pytest
import torch
from conftest import SMALL_LSTM, SMALL_TRANSFORMER, build, random_batch

from fairseq_joint.models.gile_classifier import GileClassifier, GileClassifierConfig, GileModelInputs


def held_outside(model: torch.nn.Module) -> list:
    """The names of the tensors ``model``'s modules hold in their attributes (in dicts, lists and tuples too) that are
    neither their parameters nor their buffers: what ``.to()``/``.cuda()`` leaves where it is."""
    found = []

    def walk(value, path):
        if torch.is_tensor(value):
            if id(value) not in owned:
                found.append(path)
        elif isinstance(value, dict):
            for key, item in value.items():
                walk(item, f"{path}[{key!r}]")
        elif isinstance(value, (list, tuple)):
            for i, item in enumerate(value):
                walk(item, f"{path}[{i}]")

    for name, module in model.named_modules():
        owned = {id(t) for t in [*module.parameters(recurse=False), *module.buffers(recurse=False)]}
        for key, value in vars(module).items():
            if key not in ("_parameters", "_buffers", "_modules"):
                walk(value, f"{name}.{key}")
    return found


@pytest.mark.parametrize("arch, flags", [("joint_transformer", SMALL_TRANSFORMER), ("joint_lstm", SMALL_LSTM)])
def test_a_translation_model_holds_no_tensor_that_cuda_leaves_behind(tiny_bin, arch, flags):
    """After beam search's kind of forward (evaluation, no autograd), the only tensors outside the parameters and
    buffers are fairseq's Transformer future mask (fairseq moves it to the input's device at each use) and the output
    layer's eval cache of the class side g_out(X) with the probes of the weights it was made from: the cache is keyed
    by its weights' storage, dtype and device, so a moved model makes it again (tests/unit/test_output_layers.py,
    test_eval_cache_follows_a_dtype_change)."""
    task, model = build(tiny_bin, arch, "--output-layer", "joint", "--joint-dim", 12, *flags)
    model.eval()
    with torch.no_grad():
        model(*random_batch(task))
    cache = ["decoder.output_projection._cache"] + [f"decoder.output_projection._cache_source[1][{i}]" for i in range(3)]
    assert sorted(held_outside(model)) == sorted((["decoder._future_mask"] if arch == "joint_transformer" else []) + cache)
    layout = model.decoder.output_projection._cache_source[0]
    assert all(entry[2] == torch.device("cpu") for entry in layout[:-1])  # each weight's device is part of the key


def test_a_gile_model_drops_the_label_vectors_it_keeps_when_it_moves():
    """A gile_classifier keeps label vectors between calls (a fine-tuned encoder's, in evaluation and with
    --finetune-label-refresh): ``.to()``, ``.cuda()``, ``.half()`` drop them, so they are computed again where the
    weights are; nothing else is held outside its parameters and buffers. (Its frozen sentence encoder is held outside
    its modules too: LabelPredictor.to moves it, tests/unit/test_hub_api.py and tests/cli/test_hub.py.)"""
    from fairseq.data import Dictionary

    dictionary = Dictionary()
    for w in ("apple", "pear", "car"):
        dictionary.add_symbol(w)
    cfg = GileClassifierConfig(head="gile", embed_dim=4, encoder_dim=4, attention_dim=4, joint_dim="8")
    model = GileClassifier.build(cfg, GileModelInputs(dictionary, ("a", "b"), [[0], [1]], True)).eval()
    with torch.no_grad():
        model.label_scores(model(torch.tensor([[4, 5]])), torch.tensor([[4], [6]]), torch.tensor([0, -1]))
    assert held_outside(model) == []
    for move in (lambda m: m.to("cpu"), lambda m: m.double(), lambda m: m.cpu()):
        model.evaluation_label_vectors[("key",)] = torch.zeros(2, 4)
        model.label_vector_cache[0] = torch.zeros(4)
        assert len(held_outside(model)) == 2
        move(model)
        assert held_outside(model) == [] and not model.evaluation_label_vectors and not model.label_vector_cache
