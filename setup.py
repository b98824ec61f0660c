"""fairseq-joint: structure-aware output layers (NMT-joint, sampled softmax, label embeddings, GILE) for fairseq.

fairseq itself is not listed in install_requires: install ``fairseq-fixed==0.12.3.1`` (``pip install
--no-build-isolation`` after torch; fairseq 0.12.2 does not import on Python >= 3.11, the Python the plugin is built
and tested on and requires: it uses 3.11's ``hashlib.file_digest``); both provide the ``fairseq`` package and
depending on either would pull the other's conflicting copy. ``make install`` does all of it.
"""

from setuptools import find_packages, setup

setup(
    name="fairseq-joint",
    version="0.1.0",
    description="Structure-aware output layers and their losses as a fairseq plugin",
    long_description=open("README.md", encoding="utf-8").read(),
    long_description_content_type="text/markdown",
    license="MIT",
    python_requires=">=3.11",
    # fairseq_joint_studies: what only the studies (examples/) use, kept in the studies' folder, never imported by
    # fairseq_joint
    packages=find_packages(include=["fairseq_joint", "fairseq_joint.*"]) + ["fairseq_joint_studies"],
    package_dir={"fairseq_joint_studies": "studies/fairseq_joint_studies"},
    install_requires=[
        "torch>=2.0",
        "numpy",
        "sacrebleu>=2.0",
        "sacremoses",
        "sentencepiece",
        "subword-nmt",
        "scikit-learn",
        "scipy",
        "matplotlib",
        "gensim",
        "sentence-transformers",
        # without it fairseq prints "Please install tensorboardX" to stderr on import, before any error of ours
        "tensorboardX",
    ],
    extras_require={"test": ["pytest", "pytest-xdist"]},
    # the user commands (fairseq_joint/cli/); each is also `python -m fairseq_joint.cli.<module>`
    entry_points={
        "console_scripts": [
            "fairseq-joint-count-params = fairseq_joint.cli.count_params:command",
            "fairseq-joint-preprocess-gile = fairseq_joint.cli.preprocess_gile:command",
            "fairseq-joint-predict-labels = fairseq_joint.cli.predict_labels:command",
            "fairseq-joint-export-label-embedding = fairseq_joint.cli.export_label_embedding:command",
            "fairseq-joint-score = fairseq_joint.cli.score:command",
            "fairseq-joint-word-vectors = fairseq_joint.cli.word_vectors:command",
            "fairseq-joint-distill-encoder = fairseq_joint.cli.distill_encoder:command",
            "fairseq-joint-label-text = fairseq_joint.cli.label_text:command",
            "fairseq-joint-average-checkpoints = fairseq_joint.cli.average_checkpoints:command",
        ]
    },
)
