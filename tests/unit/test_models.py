"""joint_lstm / joint_transformer against fairseq's own lstm / transformer: parameter counts, logits on
equal weights, features_only, and the configuration errors users hit when building a model."""

import pytest
import torch
from conftest import SMALL_LSTM, SMALL_TRANSFORMER, build, random_batch, training_args

from fairseq_joint.errors import CheckpointError, InputError, OptionError


def n_params(model):
    return sum(p.numel() for p in model.parameters())


@pytest.mark.parametrize(
    "ours, theirs, fc_keys",
    [
        (("joint_transformer", "--output-layer", "softmax", "--no-output-bias", *SMALL_TRANSFORMER),
         ("transformer", *SMALL_TRANSFORMER), {"decoder.output_projection.weight": "decoder.output_projection.weight"}),
        (("joint_transformer", "--output-layer", "tied", "--no-output-bias", *SMALL_TRANSFORMER),
         ("transformer", "--share-decoder-input-output-embed", *SMALL_TRANSFORMER), {}),
        (("joint_lstm", "--output-layer", "softmax", *SMALL_LSTM), ("lstm", *SMALL_LSTM),
         {"decoder.output_projection.weight": "decoder.fc_out.weight", "decoder.output_projection.bias": "decoder.fc_out.bias"}),
        (("joint_lstm", "--output-layer", "tied", "--no-output-bias", *SMALL_LSTM),
         ("lstm", "--share-decoder-input-output-embed", *SMALL_LSTM), {}),
    ],
    ids=["transformer-softmax", "transformer-tied", "lstm-softmax", "lstm-tied"],
)
def test_softmax_and_tied_match_fairseq_models(tiny_bin, ours, theirs, fc_keys):
    task, mine = build(tiny_bin, *ours)
    _, ref = build(tiny_bin, *theirs)
    assert n_params(mine) == n_params(ref)
    # equal weights => equal logits
    ref_state = ref.state_dict()
    state = mine.state_dict()
    for key in state:
        src_key = fc_keys.get(key, key)
        if src_key in ref_state:
            state[key] = ref_state[src_key]
    mine.load_state_dict(state)
    mine.eval(), ref.eval()
    src, lengths, prev = random_batch(task)
    with torch.no_grad():
        torch.testing.assert_close(mine(src, lengths, prev)[0], ref(src, lengths, prev)[0])


@pytest.mark.parametrize("kind", ["softmax", "tied", "bilinear", "label", "context", "joint"])
def test_fairseqs_trainer_sees_no_shared_parameter_of_the_output_layer(tiny_bin, kind):
    """fairseq's Trainer catalogs the parameters a model shares (and ties them again after moving it): none of the
    output layer's, whose absent parameters are no registered Nones (it took them for one shared parameter and logged
    "detected shared parameter: decoder.output_projection.weight <- ...class_weight")."""
    from fairseq.trainer import _catalog_shared_params

    _, model = build(tiny_bin, "joint_lstm", "--output-layer", kind, "--joint-dim", 12, *SMALL_LSTM)
    # (fairseq's own LSTM attention has two bias-free Linear layers: those it takes for one shared parameter too)
    assert not [names for names in _catalog_shared_params(model) if any("output_projection" in n for n in names)]


def test_a_fairseq_transformers_own_state_loads_into_the_softmax_layer(tiny_bin):
    """--finetune-from-model of fairseq's transformer into joint_transformer --output-layer softmax --no-output-bias:
    its state dict, which records no output layer, loads as it is (strict), and the logits are equal."""
    task, mine = build(tiny_bin, "joint_transformer", "--output-layer", "softmax", "--no-output-bias",
                       *SMALL_TRANSFORMER)
    _, ref = build(tiny_bin, "transformer", *SMALL_TRANSFORMER)
    mine.load_state_dict(ref.state_dict())
    _, joint = build(tiny_bin, "joint_transformer", "--output-layer", "joint", "--joint-dim", 12, *SMALL_TRANSFORMER)
    stripped = {k: v for k, v in joint.state_dict().items() if not k.endswith("_extra_state")}
    with pytest.raises(RuntimeError, match="output_projection._extra_state"):  # another layer's is still compared
        joint.load_state_dict(stripped)
    mine.eval(), ref.eval()
    src, lengths, prev = random_batch(task)
    with torch.no_grad():
        torch.testing.assert_close(mine(src, lengths, prev)[0], ref(src, lengths, prev)[0])


@pytest.mark.parametrize("arch, extra", [("joint_transformer", SMALL_TRANSFORMER), ("joint_lstm", SMALL_LSTM)])
def test_bias_adds_exactly_vocab_size_parameters(tiny_bin, arch, extra):
    _, with_bias = build(tiny_bin, arch, "--output-layer", "tied", *extra)
    task, without = build(tiny_bin, arch, "--output-layer", "tied", "--no-output-bias", *extra)
    assert n_params(with_bias) - n_params(without) == len(task.tgt_dict)


@pytest.mark.parametrize("arch, extra", [("joint_transformer", SMALL_TRANSFORMER), ("joint_lstm", SMALL_LSTM)])
@pytest.mark.parametrize("kind", ["softmax", "tied", "bilinear", "label", "context", "joint"])
def test_features_only_feeds_the_output_layer(tiny_bin, arch, extra, kind):
    task, model = build(tiny_bin, arch, "--output-layer", kind, "--joint-dim", 12, *extra)
    model.eval()
    src, lengths, prev = random_batch(task)
    layer = model.decoder.output_projection
    assert layer.output_layer == kind
    if kind != "softmax":
        assert layer.embedding is model.decoder.embed_tokens  # shared, not copied
    with torch.no_grad():
        h, _ = model(src, lengths, prev, features_only=True)
        assert h.shape == (3, 5, 16)
        logits, _ = model(src, lengths, prev)
        torch.testing.assert_close(layer(h), logits)
        ids = torch.tensor([4, 9, 2])
        torch.testing.assert_close(layer(h, ids=ids), logits[..., ids])


def test_retain_dropout_keeps_the_joint_dropout_in_generation(tiny_bin):
    """--joint-dropout is a FairseqDropout: off in eval mode, kept by fairseq-generate's --retain-dropout (fairseq's
    make_generation_fast_), by name with --retain-dropout-modules OutputLayer (it was a bare F.dropout: never kept)."""
    def twice(retained):
        task, model = build(tiny_bin, "joint_lstm", "--output-layer", "joint", "--joint-dim", 12, "--joint-dropout",
                            "0.5", "--dropout", "0", *SMALL_LSTM)
        model.make_generation_fast_(retain_dropout=True, retain_dropout_modules=[retained])  # eval mode too
        src, lengths, prev = random_batch(task)
        with torch.no_grad():
            return [model(src, lengths, prev)[0] for _ in range(2)]

    assert torch.equal(*twice("FairseqIncrementalDecoder"))  # another module named: the joint dropout stays off
    assert not torch.equal(*twice("OutputLayer"))


@pytest.mark.parametrize("arch, extra", [("joint_transformer", SMALL_TRANSFORMER), ("joint_lstm", SMALL_LSTM)])
def test_uniform_output_layer_init_is_one_change(tiny_bin, arch, extra):
    """--output-layer-init uniform changes the output layer's start and nothing else: with the same seed, the
    decoder layers that fairseq's Transformer builds after the output layer start as in the default run, and the
    next random draw after the build is the default run's. It used to shift the random stream, so a Transformer's
    decoder layers started differently too (study runs made before then changed the whole decoder's start)."""
    built = {}
    for init in ("fairseq", "uniform"):
        _, model = build(tiny_bin, arch, "--output-layer", "joint", "--joint-dim", 12, "--output-layer-init", init, *extra)
        built[init] = ({k: v for k, v in model.state_dict().items() if torch.is_tensor(v)}, torch.rand(4))
    (default, next_default), (uniform, next_uniform) = built["fairseq"], built["uniform"]
    changed = {k for k in default if not torch.equal(default[k], uniform[k])}
    assert changed == {f"decoder.output_projection.{n}" for n in
                       ("class_weight", "class_bias", "context_weight", "context_bias", "bias")}
    assert all(uniform[k].abs().max() <= 0.1 for k in changed)
    torch.testing.assert_close(next_default, next_uniform, rtol=0, atol=0)


@pytest.mark.parametrize("arch, extra", [("joint_transformer", SMALL_TRANSFORMER), ("joint_lstm", SMALL_LSTM)])
def test_init_seed_changes_the_start_only(tiny_bin, arch, extra):
    """--init-seed S draws every initial parameter from S, whatever --seed's random state: the same S gives the same
    start, another S another start of every random parameter, S equal to the seed the default run's start; the random
    stream after the build (fairseq's next draws) is the same for every S."""

    def start(*flags, seed=0):
        from fairseq import tasks

        args = training_args(tiny_bin, arch, "--output-layer", "joint", "--joint-dim", 12, *extra, *flags)
        task = tasks.setup_task(args)
        torch.manual_seed(seed)
        model = task.build_model(args)
        return {k: v for k, v in model.state_dict().items() if torch.is_tensor(v) and v.is_floating_point()}, torch.rand(4)

    default, next_default = start()
    s7, next_s7 = start("--init-seed", 7)
    s7_other_seed, _ = start("--init-seed", 7, seed=3)
    s8, next_s8 = start("--init-seed", 8)
    s0, _ = start("--init-seed", 0)
    for k in default:
        torch.testing.assert_close(s7[k], s7_other_seed[k], rtol=0, atol=0)
        torch.testing.assert_close(s0[k], default[k], rtol=0, atol=0)
    redrawn = {k for k in s7 if not torch.equal(s7[k], s8[k])}
    constant = {k for k in s7 if s7[k].unique().numel() <= 2}  # zero biases, ones of layer norms
    assert redrawn == set(s7) - constant and len(redrawn) >= 10
    assert all(not torch.equal(s7[k], default[k]) for k in redrawn)
    torch.testing.assert_close(next_s7, next_s8, rtol=0, atol=0)
    assert not torch.equal(next_s7, next_default)  # the stream is left as it was before the build


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_init_seed_leaves_the_gpu_stream_as_it_was(tiny_bin):
    """--init-seed reseeds the CPU and this process's GPU for the build only: afterwards the GPU's random state (the
    dropout masks of a CUDA run) is the one it had before, so two --init-seed values train with the same masks."""
    from fairseq import tasks

    args = training_args(tiny_bin, "joint_lstm", "--output-layer", "joint", "--joint-dim", 12, *SMALL_LSTM,
                         "--init-seed", 7)
    task = tasks.setup_task(args)
    torch.cuda.manual_seed(5)
    before = torch.cuda.get_rng_state()
    task.build_model(args)
    torch.testing.assert_close(torch.cuda.get_rng_state(), before, rtol=0, atol=0)
    torch.cuda.manual_seed(7)  # what the build's reseed would have left behind without the fork
    assert not torch.equal(torch.cuda.get_rng_state(), before)


def test_joint_lstm_wmt17_is_the_papers_configuration(tiny_bin):
    task, model = build(tiny_bin, "joint_lstm_wmt17", "--joint-dim", 512)
    assert model.encoder.num_layers == 2 and model.decoder.num_layers == 2
    assert model.decoder.embed_tokens.embedding_dim == 512 and model.decoder.hidden_size == 512
    assert model.encoder.dropout_out_module.p == 0.3 and model.decoder.dropout_in_module.p == 0.3
    layer = model.decoder.output_projection
    assert (layer.output_layer, layer.joint_dim, layer.activation_name) == ("joint", 512, "tanh")


def test_the_uniform_init_preset_is_joint_lstm_wmt17_with_that_init_only(tiny_bin):
    """joint_lstm_wmt17_uniform_init = joint_lstm_wmt17 + --output-layer-init uniform; an explicit flag still wins."""
    paper = vars(training_args(tiny_bin, "joint_lstm_wmt17"))
    preset = vars(training_args(tiny_bin, "joint_lstm_wmt17_uniform_init"))
    differ = {k for k in paper.keys() | preset.keys() if paper.get(k) != preset.get(k)}
    assert differ == {"arch", "output_layer_init"} and (paper["output_layer_init"], preset["output_layer_init"]) == (
        "fairseq", "uniform")
    assert training_args(tiny_bin, "joint_lstm_wmt17_uniform_init", "--output-layer-init", "identity"
                         ).output_layer_init == "identity"


def test_tied_with_unequal_dims_says_how_to_fix(tiny_bin):
    with pytest.raises(OptionError, match=r"tied needs the embedding dim d=16 to equal the decoder output dim dh=24.*--output-layer joint"):
        build(tiny_bin, "joint_lstm", "--output-layer", "tied", *SMALL_LSTM, "--decoder-out-embed-dim", 24)
    # the joint layer takes any d, dh
    build(tiny_bin, "joint_lstm", "--output-layer", "joint", *SMALL_LSTM, "--decoder-out-embed-dim", 24)


def test_joint_lstm_refuses_at_build_what_fairseqs_lstm_refuses(tiny_bin):
    """fairseq's LSTMModel.build_model's rules, which joint_lstm builds its modules without: the data's (a joint
    dictionary to share), and those on the options, which are checked before fairseq starts
    (tests/unit/test_option_checks.py) and again here, for a model built without those checks."""
    with pytest.raises(InputError, match=r"^--share-all-embeddings requires a joint dictionary"):
        build(tiny_bin, "joint_lstm", *SMALL_LSTM, "--share-all-embeddings")
    with pytest.raises(OptionError, match="^--encoder-layers must match --decoder-layers"):
        build(tiny_bin, "joint_lstm", *SMALL_LSTM, "--encoder-layers", 2, "--decoder-layers", 1)
    with pytest.raises(OptionError, match="^--adaptive-softmax-cutoff builds fairseq's adaptive softmax"):
        build(tiny_bin, "joint_transformer", "--adaptive-softmax-cutoff", "8,16")


def test_unknown_output_layer_lists_choices(tiny_bin, capsys):
    with pytest.raises(SystemExit):
        build(tiny_bin, "joint_transformer", "--output-layer", "jiont")
    err = capsys.readouterr().err
    assert "--output-layer" in err and "joint" in err and "softmax" in err and "jiont" in err


def test_fairseq_tying_flag_with_tied_is_the_tied_model(tiny_bin):
    """With another --output-layer the flag is refused (tests/unit/test_option_checks.py); with tied it only says what
    --output-layer tied already does: no error, the same tied model."""
    for arch, extra in (("joint_lstm", SMALL_LSTM), ("joint_transformer", SMALL_TRANSFORMER)):
        _, model = build(tiny_bin, arch, "--output-layer", "tied", "--share-decoder-input-output-embed", *extra)
        layer = model.decoder.output_projection
        assert layer.output_layer == "tied" and layer.embedding is model.decoder.embed_tokens


@pytest.mark.parametrize("arch, extra", [("joint_lstm", SMALL_LSTM), ("joint_transformer", SMALL_TRANSFORMER)])
@pytest.mark.parametrize("kind", ["tied", "joint"])
def test_share_all_embeddings_one_table_for_source_target_and_output(joined_bin, arch, extra, kind):
    task, model = build(joined_bin, arch, "--share-all-embeddings", "--output-layer", kind, "--joint-dim", 12, *extra)
    E = model.encoder.embed_tokens
    assert E is model.decoder.embed_tokens and model.decoder.output_projection.embedding is E
    assert n_params(model) == n_params(build(joined_bin, arch, "--output-layer", kind, "--joint-dim", 12, *extra)[1]) \
        - E.weight.numel()  # one |V| x d table less than with separate source and target embeddings
    model.eval()
    src, lengths, prev = random_batch(task)
    with torch.no_grad():
        h, _ = model(src, lengths, prev, features_only=True)
        logits, _ = model(src, lengths, prev)
    expected = model.decoder.output_projection(h)
    torch.testing.assert_close(logits, expected)
    if kind == "tied":  # E h + b with the one shared table
        torch.testing.assert_close(logits, h @ E.weight.t() + model.decoder.output_projection.bias)


def test_architectures_record_the_feature_size_for_a_second_output_layer(tiny_bin):
    """--label-embedding-input-dim defaults to dh, the size of the features the output layer reads."""
    assert training_args(tiny_bin, "joint_lstm", *SMALL_LSTM, "--decoder-out-embed-dim", 20).label_embedding_input_dim == 20
    assert training_args(tiny_bin, "joint_transformer_tiny").label_embedding_input_dim == 32
    assert training_args(tiny_bin, "joint_lstm_wmt17").label_embedding_input_dim == 512
    assert training_args(tiny_bin, "joint_lstm_tiny", "--criterion", "label_embedding_cross_entropy",
                         "--label-embedding-input-dim", 7).label_embedding_input_dim == 7  # given: kept


def test_dictionary_mismatch_on_load(tiny_bin):
    task, model = build(tiny_bin, "joint_transformer_tiny")
    state = model.state_dict()
    state["decoder.embed_tokens.weight"] = torch.zeros(len(task.tgt_dict) + 5, 32)
    with pytest.raises(CheckpointError, match=r"target dictionary has \d+ entries but the data's has \d+.*--tgtdict"):
        model.load_state_dict(state)


def test_a_model_of_the_other_language_pair_is_refused_on_load(joined_bin):
    """Over one joined dictionary an en-de model given --source-lang de --target-lang en loaded and translated de-en
    without a word: the model records the pair it was built for. A checkpoint saved before that loads as before."""
    _, en_de = build(joined_bin, "joint_transformer_tiny", "--source-lang", "en", "--target-lang", "de")
    _, de_en = build(joined_bin, "joint_transformer_tiny", "--source-lang", "de", "--target-lang", "en")
    with pytest.raises(CheckpointError, match=r"^the checkpoint's language pair \(--source-lang, --target-lang\) has "
                                              r"other entries than the data's: translate in the direction it was "
                                              r"trained for"):
        de_en.load_state_dict(en_de.state_dict())
    older = {**en_de.state_dict(), "data_fingerprints": en_de.data_fingerprints[:2]}  # dictionaries only
    _, again = build(joined_bin, "joint_transformer_tiny", "--source-lang", "en", "--target-lang", "de")
    again.load_state_dict(older)
    assert torch.equal(again.data_fingerprints, en_de.data_fingerprints)
    de_en.load_state_dict(older)  # an older checkpoint says no pair: not compared


def test_a_recorded_activation_a_layer_never_applied_is_not_held_against_it(tiny_bin):
    """A tied layer has no σ: a checkpoint that recorded one (--joint-activation relu, ignored in training, now refused)
    loads into the tied model built without it; a layer whose σ acts is still compared."""
    _, tied = build(tiny_bin, "joint_transformer_tiny", "--output-layer", "tied")
    state = tied.state_dict()
    key = next(k for k in state if k.endswith("output_projection._extra_state"))
    state[key]["fairseq_joint_output_layer"]["activation"] = "relu"  # as an older checkpoint recorded it
    tied.load_state_dict(state)
    _, label = build(tiny_bin, "joint_transformer_tiny", "--output-layer", "label")
    state = label.state_dict()
    state[key]["fairseq_joint_output_layer"]["activation"] = "relu"
    with pytest.raises(CheckpointError, match=r"activation: checkpoint 'relu' vs model 'tanh'"):
        label.load_state_dict(state)


def test_output_layer_configuration_mismatch_on_load(tiny_bin):
    _, a = build(tiny_bin, "joint_transformer_tiny", "--joint-dim", 8)
    _, b = build(tiny_bin, "joint_transformer_tiny", "--joint-dim", 12)
    with pytest.raises(CheckpointError, match=r"checkpoint's output layer differs.*joint_dim: checkpoint 8 vs model 12"):
        b.load_state_dict(a.state_dict())


@pytest.mark.parametrize("arch, extra", [("joint_transformer", SMALL_TRANSFORMER), ("joint_lstm", SMALL_LSTM)])
def test_beam_search_projects_the_vocabulary_once(tiny_bin, arch, extra, monkeypatch):
    """fairseq's SequenceGenerator calls the decoder once per step; σ(E U + b_u) must come from the cache."""
    from fairseq.sequence_generator import SequenceGenerator

    task, model = build(tiny_bin, arch, "--output-layer", "joint", "--joint-dim", 12, *extra)
    model.eval()
    layer = model.decoder.output_projection
    calls = []
    original = layer.project_classes
    monkeypatch.setattr(layer, "project_classes", lambda x: calls.append(x.shape) or original(x))
    gen = SequenceGenerator([model], task.tgt_dict, beam_size=3, max_len_a=0, max_len_b=6, min_len=6)
    src, lengths, _ = random_batch(task)
    with torch.no_grad():
        hyps = gen.generate([model], {"net_input": {"src_tokens": src, "src_lengths": lengths}})
    assert len(hyps) == 3 and all(len(h) == 3 for h in hyps)
    assert len(calls) == 1 and calls[0][0] == len(task.tgt_dict)


@pytest.mark.parametrize("arch, extra", [("joint_lstm", SMALL_LSTM), ("joint_transformer", SMALL_TRANSFORMER)])
def test_share_all_embeddings_model_builds_again_from_the_arguments_it_saves(joined_bin, arch, extra):
    """fairseq turns --share-decoder-input-output-embed on in the arguments of a --share-all-embeddings model,
    which the checkpoint saves: fairseq-generate rebuilds the joint model from them (scripts/demo.sh does)."""
    from fairseq import tasks

    args = training_args(joined_bin, arch, "--share-all-embeddings", "--output-layer", "joint", "--joint-dim", 12, *extra)
    task = tasks.setup_task(args)
    first = task.build_model(args)
    again = task.build_model(args)  # what loading the checkpoint does with the saved arguments
    assert again.decoder.output_projection.output_layer == "joint"
    assert n_params(again) == n_params(first)


@pytest.mark.parametrize("arch, extra", [("joint_transformer", SMALL_TRANSFORMER), ("joint_lstm", SMALL_LSTM)])
def test_beam_search_checks_the_eval_cache_once_per_decoding(tiny_bin, arch, extra, monkeypatch):
    """In fairseq's beam search the output layer's eval cache is checked against the weights at a decoding's first
    step only (a probe of E, U and b_u each), not at every step; the hypotheses are those without the cache, and an
    in-place edit of E between two decodings is seen by the second."""
    from fairseq.sequence_generator import SequenceGenerator

    import fairseq_joint.modules.output_layers as output_layers

    task, model = build(tiny_bin, arch, "--output-layer", "joint", "--joint-dim", 12, *extra)
    model.eval()
    src, lengths, _ = random_batch(task)
    sample = {"net_input": {"src_tokens": src, "src_lengths": lengths}}
    steps = 6
    generator = SequenceGenerator([model], task.tgt_dict, beam_size=3, max_len_a=0, max_len_b=steps, min_len=steps)
    layer = model.decoder.output_projection
    probes = []
    probe = output_layers._probe
    monkeypatch.setattr(output_layers, "_probe", lambda t: probes.append(t.shape) or probe(t))

    def decode(cache=True):
        layer.use_eval_cache = cache
        try:
            with torch.no_grad():
                return [[h["tokens"].tolist() for h in hyps] for hyps in generator.generate([model], sample)]
        finally:
            layer.use_eval_cache = True

    first = decode()
    assert len(probes) == 3  # the first step fills the cache (a probe of E, U, b_u each); the later steps: none
    assert first == decode(cache=False)
    probes.clear()
    with torch.no_grad():
        model.decoder.embed_tokens.weight.mul_(-1.0)  # by hand, between two decodings
    edited = decode()
    assert len(probes) == 1 + 3  # the first step's check finds E changed (1 probe) and fills the cache again (3)
    assert edited == decode(cache=False) and edited != first
