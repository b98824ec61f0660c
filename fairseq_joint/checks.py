"""The plugin's checks of a whole fairseq configuration, run before fairseq starts any work.

fairseq-train, fairseq-validate and fairseq-interactive parse their arguments (importing the plugin through
``--user-dir``), then hand the configuration to ``fairseq.distributed.utils.call_main``.
``fairseq_joint.fairseq_patches`` wraps that function so that :func:`before_main` runs first: a refusal comes before any data is loaded or model built.
(fairseq-generate calls its main directly; the models' own checks cover it.)
"""

from fairseq_joint import errors
from fairseq_joint.precision import check_precision


def check_configuration(cfg, training: bool = True) -> None:
    """Everything the plugin can check from fairseq's configuration alone; ``training``: for fairseq-train (whose
    trainer needs the hardware of a precision flag; validate/interactive/generate run a half model on the CPU)."""
    common = getattr(cfg, "common", None)
    if common is not None and training:
        check_precision(common)
    criterion = getattr(cfg, "criterion", None)
    if criterion is not None and training:
        check_criterion_options(criterion)


def check_criterion_options(c) -> None:
    """The options of fairseq-joint's criteria, with the checks the criteria run themselves (fairseq builds a
    criterion only after loading the validation data and building the model)."""
    from fairseq_joint.modules.chunked_softmax import check_chunk_size
    from fairseq_joint.modules.label_embedding import check_label_embedding_options
    from fairseq_joint.modules.sampling import sampling_requested

    name = getattr(c, "_name", None)
    if name in ("sampled_cross_entropy", "label_embedding_cross_entropy", "gile_label_embedding_cross_entropy"):
        sampling_requested(c.sample_rate, c.num_samples)
        if name == "sampled_cross_entropy" and c.vocab_chunk_size is not None:  # the only one with chunks
            check_chunk_size(c.vocab_chunk_size)
    if name in ("label_embedding_cross_entropy", "gile_label_embedding_cross_entropy"):
        check_label_embedding_options(tau=c.label_embedding_tau, p=c.label_embedding_hinge_p,
                                      beta=c.label_embedding_beta, warmup_updates=c.label_embedding_warmup_updates,
                                      dim=c.label_embedding_dim)
    if name == "multilabel_classification":
        from fairseq_joint.criterions.multilabel_classification import check_classification_options

        check_classification_options(c.label_sample_rate, c.threshold)


def before_main(cfg, main) -> None:
    """What runs before fairseq's ``call_main(cfg, main)`` starts ``main``: :func:`check_configuration`, and for
    fairseq-train the SIGTERM handler and resume note of :func:`fairseq_joint.errors.training_started`."""
    training = getattr(main, "__module__", "") == "fairseq_cli.train"
    check_configuration(cfg, training=training)
    if training:
        checkpoint = getattr(cfg, "checkpoint", None)
        errors.training_started(None if checkpoint is None or checkpoint.no_save else checkpoint.save_dir)
