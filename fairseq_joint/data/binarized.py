"""A binarized corpus whose ``.bin`` file holds exactly the tokens its ``.idx`` file indexes (the ``whole_binaries``
change of ``fairseq_joint.fairseq_patches``).

fairseq's ``MMapIndexedDataset`` maps the ``.bin`` file and reads sentence i at the offset the ``.idx`` file gives,
without comparing the two: a ``.bin`` cut short (an interrupted copy) failed at the first batch that reached past its
end, in a numpy ``ValueError`` that names no file, possibly hours into training; a ``.bin`` longer than indexed (the
``.idx`` of another binarization beside it) was read as other sentences without a word.
"""

import os

import numpy as np

from fairseq_joint.errors import InputError


def indexed_bytes(index) -> int:
    """The bytes of the ``.bin`` file a fairseq ``MMapIndexedDataset.Index`` indexes: its last sentence's offset plus
    that sentence's tokens (0 for no sentence)."""
    if len(index) == 0:
        return 0
    pointer, size = index[len(index) - 1]
    return int(pointer) + int(size) * np.dtype(index.dtype).itemsize


def checked_init(original, dataset, path: str) -> None:
    """fairseq's ``MMapIndexedDataset._do_init`` (``original``), then the size of ``PATH.bin`` compared with what
    ``PATH.idx`` indexes: another one is refused, naming both files."""
    from fairseq.data.indexed_dataset import data_file_path, index_file_path

    original(dataset, path)
    found, indexed = os.path.getsize(data_file_path(path)), indexed_bytes(dataset._index)
    if found != indexed:
        raise InputError(f"{data_file_path(path)} holds {found} bytes but {index_file_path(path)} indexes {indexed}: "
                         f"{'a copy cut short' if found < indexed else 'the two files are of two binarizations'}: "
                         "copy both again, or run fairseq-preprocess again")
