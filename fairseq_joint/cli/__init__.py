"""The user commands of fairseq-joint, one module each, installed as ``fairseq-joint-<verb>`` console entry points
(``setup.py``) and runnable as ``python -m fairseq_joint.cli.<module>``. Shared helpers: :mod:`.common`."""
