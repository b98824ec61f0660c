"""fairseq-joint: structure-aware output layers (NMT-joint, sampled softmax, label embeddings, GILE) for fairseq.

fairseq itself is not listed in install_requires: on Python >= 3.11 install ``fairseq-fixed==0.12.3.1``
(``pip install --no-build-isolation`` after torch), elsewhere ``fairseq``; both provide the ``fairseq``
package and depending on either would pull the other's conflicting copy. ``make install`` does all of it.
"""

from setuptools import find_packages, setup

setup(
    name="fairseq-joint",
    version="0.1.0",
    description="Structure-aware output layers and their losses as a fairseq plugin",
    long_description=open("README.md", encoding="utf-8").read(),
    long_description_content_type="text/markdown",
    license="MIT",
    python_requires=">=3.9",
    packages=find_packages(include=["fairseq_joint", "fairseq_joint.*"]),
    install_requires=[
        "torch>=2.0",
        "numpy",
        "sacrebleu>=2.0",
        "sacremoses",
        "sentencepiece",
        "subword-nmt",
        "scikit-learn",
        "matplotlib",
        "gensim",
    ],
    extras_require={"test": ["pytest", "pytest-xdist"]},
)
