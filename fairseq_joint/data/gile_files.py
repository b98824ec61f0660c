"""The files of a GILE data directory (written by ``fairseq-joint-preprocess-gile``) and their readers.

* ``dict.txt`` — one fairseq Dictionary shared by the input words and the label-description words (GILE Sec. 2.2);
* ``{split}.input.{bin,idx}`` — the tokenized texts; ``{split}.labels`` — their labels, one line per text,
  whitespace-separated;
* ``labels.train.txt`` (:data:`TRAIN_LABELS`) — the labels that training examples carry, in the row order of the
  ``linear`` head's W;
* ``labels.tsv`` (:data:`LABEL_FILE`) — ``label<TAB>description`` for every label (optional for ``--head linear``);
* ``{split}.text`` (:data:`RAW_TEXTS`) — the raw texts, one JSON string per line, for a pretrained sentence encoder;
* ``language.txt`` (:data:`LANGUAGE_FILE`) — with ``--lang``, the language of the directory's documents.
* ``lexical.json`` (:data:`LEXICAL_FILE`) — with ``--lexical-features``, the TF-IDF model fitted on the training texts
  (:class:`~fairseq_joint.modules.lexical_encoder.LexicalModel`), for ``--encoder hybrid``.

:func:`read_corpus` reads what a task needs of one directory, or of one directory per language (GILE-MHAN,
Sec. 3.3: ``DATA/LANG``), into a :class:`GileCorpus`.
"""

import json
import logging
import os
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Tuple

import torch
from fairseq.data import Dictionary
from fairseq.data.indexed_dataset import make_dataset

from fairseq_joint.data.inputs import load_dictionary
from fairseq_joint.errors import InputError, OptionError
from fairseq_joint.modules.tokenizer import tokenize
from fairseq_joint.options import NON_NEGATIVE, as_number, check_number, named_values
from fairseq_joint.text_files import check_exists, content_lines, read_text, text_lines

logger = logging.getLogger(__name__)

TRAIN_LABELS = "labels.train.txt"
LABEL_FILE = "labels.tsv"
LANGUAGE_FILE = "language.txt"
LEXICAL_FILE = "lexical.json"
RAW_TEXTS = "{split}.text"
#: the end of a refusal of a data directory that is not there: where it is (a checkpoint records the directory it was
#: trained on, which may have moved)
ELSEWHERE = (", or give the directory it wrote (fairseq-train's DATA; --data of the fairseq-joint-* commands that read "
             "a checkpoint, which records the directory it was trained on)")
#: the fix of a binarized file that does not match the others
REBINARIZE = "binarize again with fairseq-joint-preprocess-gile"


def check_label(label, description, where: str) -> str:
    """One ``label -> description`` entry of a label set (a label file's line, or a dict given to the Python API): the
    label a string without whitespace, the description a non-empty string; returns the description stripped.
    ``where`` prefixes the refusal (``FILE:LINE``, or ``labels``)."""
    if not isinstance(label, str) or not label or any(c.isspace() for c in label):
        raise InputError(f"{where}: label {label!r} is empty, not a string or contains whitespace")
    if not isinstance(description, str):
        raise InputError(f"{where}: the description of label {label!r} is {description!r}, not a string: describe it "
                         "in words")
    if not description.strip():
        raise InputError(f"{where}: label {label!r} has an empty description: describe it")
    return description.strip()


def read_label_file(path: str) -> Dict[str, str]:
    """``label<TAB>description`` lines -> {label: description}, in file order; bad lines fail by line (a missing
    or empty file in :func:`~fairseq_joint.text_files.content_lines`)."""
    labels: Dict[str, str] = {}
    for lineno, line in content_lines(path, "label file", "labels", "give a label<TAB>description file"):
        fields = line.split("\t")  # a third field: a column of another format, or a description that lost its quoting
        if len(fields) != 2:
            raise InputError(f"{path}:{lineno}: expected 'label<TAB>description', found {len(fields)} tab-separated "
                             "field(s): put one tab between the label and its description (spaces inside it)")
        label, desc = fields[0].strip(), fields[1]
        desc = check_label(label, desc, f"{path}:{lineno}")
        if label in labels:
            raise InputError(f"{path}:{lineno}: duplicate label {label!r}: each label must appear once")
        labels[label] = desc
    return labels


def read_label_lines(path: str) -> List[List[str]]:
    """The ``{split}.labels`` file: whitespace-separated labels per example (at least one each)."""
    rows = []
    for lineno, line in text_lines(path):
        names = line.split()
        if not names:
            raise InputError(f"{path}:{lineno}: example without labels: every example needs one")
        rows.append(names)
    return rows


def label_positions(path: str, position: Dict[str, int], source: str, fix: str) -> List[List[int]]:
    """The ``{split}.labels`` file ``path``: every example's labels as their positions in ``position``; a label not
    there is refused with file:line, ``source`` (the file that lists the labels) and ``fix``."""
    rows = []
    for lineno, names in enumerate(read_label_lines(path), 1):
        unknown = [n for n in names if n not in position]
        if unknown:
            raise InputError(f"{path}:{lineno}: label {unknown[0]!r} is not in {source}: {fix}")
        rows.append([position[n] for n in names])
    return rows


def read_train_labels(path: str) -> List[str]:
    """``labels.train.txt``: the training labels in order."""
    return [line.strip() for line in read_text(path) if line.strip()]


def json_string(line: str) -> Optional[str]:
    """The text of a ``{split}.text`` line (a JSON string), or None when it is none."""
    try:
        text = json.loads(line)
    except ValueError:
        return None
    return text if isinstance(text, str) else None


def read_raw_texts(data: str, split: str, count: int) -> List[str]:
    """The raw texts of ``split`` (``{split}.text``: one JSON string per line), checked against the binarized count;
    a missing file is refused by :func:`~fairseq_joint.text_files.text_lines`."""
    path = os.path.join(data, RAW_TEXTS.format(split=split))
    texts = []
    for lineno, line in text_lines(path, fix=f"a pretrained encoder reads the raw texts; {REBINARIZE}"):
        text = json_string(line)
        if text is None:
            raise InputError(f"{path}:{lineno}: not a JSON string: {REBINARIZE}")
        texts.append(text)
    if len(texts) != count:
        raise InputError(f"{path} has {len(texts)} texts but {split}.input.bin {count}: {REBINARIZE}")
    return texts


def check_described(label_file: Optional[str], descriptions: Optional[Dict[str, str]], train_labels) -> None:
    """Every training label has a line in the label file (when there is one)."""
    missing = [n for n in train_labels if n not in descriptions] if descriptions is not None else []
    if missing:
        raise InputError(f"{label_file}: {len(missing)} training label(s) have no description (first: {missing[0]!r}); "
                         "add a 'label<TAB>description' line for each")


def check_dictionary(directory: str, dictionary: Dictionary, rebinarize: str) -> None:
    """``DIRECTORY/dict.txt`` is the dictionary its documents were binarized with: the first training text
    (``train.text``, tokenized as ``fairseq-joint-preprocess-gile`` does) encodes to the word ids of the first document
    of ``train.input.bin``. A directory without the raw texts (binarized by an earlier version) is not checked.
    ``rebinarize``: the command that writes the directory again."""
    raw = os.path.join(directory, RAW_TEXTS.format(split="train"))
    binarized = make_dataset(os.path.join(directory, "train.input"), impl="mmap")
    if binarized is None or not os.path.isfile(raw) or len(binarized) == 0:
        return
    text = json_string(next((line for _, line in text_lines(raw)), ""))
    if text is None:
        return  # read_raw_texts refuses a malformed file where the texts are read
    if [dictionary.index(w) for w in tokenize(text)] != binarized[0].tolist():
        path = os.path.join(directory, "dict.txt")
        raise InputError(f"{path} is not the dictionary {directory}'s documents were binarized with: put back the "
                         f"dict.txt {rebinarize} wrote there, or binarize the documents again with it")


def is_language_name(name: str) -> bool:
    """Whether ``name`` can name a language (``--lang``, ``--languages``): a directory name, not empty, without
    whitespace or , = / \\ (``pt_BR`` is one)."""
    return bool(name) and not any(c.isspace() or c in ",=/\\" for c in name)


def parse_languages(value: str) -> List[str]:
    """``--languages en,pl`` -> ["en", "pl"]; empty names, repeats and path characters fail."""
    languages = [x.strip() for x in value.split(",")]
    if not all(map(is_language_name, languages)) or len(set(languages)) != len(languages):
        raise OptionError(f"--languages {value!r}: give distinct language names, comma-separated (e.g. en,pl)")
    return languages


def parse_language_weights(value: str, languages: List[str]) -> Dict[str, float]:
    """``--language-weights en=0.5,pl=1`` -> λ_l of every language in Eq. 16 (1 where not given); the one check of
    the option: LANG one of ``languages``, W a finite number >= 0, not every λ_l 0 (the loss, and every update, was 0)."""
    weights = {lang: 1.0 for lang in languages}
    given = named_values("--language-weights", filter(None, (x.strip() for x in value.split(","))), "LANG=W", languages)
    for lang, number in given.items():
        weights[lang] = check_number(f"--language-weights {lang}={number} (LANG=W): W", as_number(number), NON_NEGATIVE)
    if weights and not any(weights.values()):
        raise OptionError(f"--language-weights {value}: every language's weight is 0, so training would change nothing: "
                          "give one language a weight above 0")
    return weights


def language_dir(data: str, lang: str) -> str:
    """``DATA/LANG``: where --languages finds a language's binarized data."""
    return os.path.join(data, lang)


def label_counts(rows, num_labels: int) -> torch.Tensor:
    """(num_labels,) float64: how many training examples carry each label (``rows``: each example's label positions),
    for the label priors (``--seen-label-bias``) and the unigram label sampler."""
    counts = torch.zeros(num_labels, dtype=torch.float64)
    for row in rows:
        counts[row] += 1
    return counts


@dataclass(frozen=True)
class GileCorpus:
    """What a GILE task reads from its data directory before any split: dictionaries, labels, descriptions."""

    #: DATA
    data: str
    #: the dictionary of the texts; with --languages, the label language's (it binarizes the descriptions)
    dictionary: Dictionary
    #: the training labels (of any language), in the order of the linear head's rows
    train_labels: Tuple[str, ...]
    #: {label: description} of the training label file (None without one: --head linear only)
    descriptions: Optional[Dict[str, str]]
    #: {label: description} scored at validation/test (--eval-label-file, default the training label file)
    eval_descriptions: Optional[Dict[str, str]]
    #: --languages: the languages trained on, in order (empty for one directory)
    languages: Tuple[str, ...] = ()
    #: --languages: the language whose word embedding embeds the label descriptions
    label_language: str = ""
    #: --languages: the dictionary of every language (and of the label language)
    dictionaries: Dict[str, Dictionary] = field(default_factory=dict)

    def data_dir(self, lang: str = "") -> str:
        """The binarized directory of ``lang`` (``DATA/LANG`` with --languages), or DATA."""
        return language_dir(self.data, lang) if lang else self.data

    def dictionary_of(self, lang: str = "") -> Dictionary:
        """The dictionary of ``lang``'s texts (the one dictionary without --languages)."""
        return self.dictionaries[lang] if lang else self.dictionary

    def train_label_rows(self) -> List[List[int]]:
        """Every training example's labels (of every language) as positions in :attr:`train_labels` (for the label
        priors and Kurata's patterns)."""
        position = {n: i for i, n in enumerate(self.train_labels)}
        return [row for lang in self.languages or ("",) for row in label_positions(
            os.path.join(self.data_dir(lang), "train.labels"), position, TRAIN_LABELS, REBINARIZE)]


def read_binarized(directory: str, command: str, train_labels: bool = True) -> Tuple[Dictionary, List[str]]:
    """The dictionary (checked against the documents: :func:`check_dictionary`) and, with ``train_labels``, the
    training labels of a binarized ``directory``; a file of them missing is refused with ``command``, which writes
    them."""
    names = ("dict.txt", TRAIN_LABELS) if train_labels else ("dict.txt",)
    for name in names:
        check_exists(os.path.join(directory, name), "", f"binarize the data with {command}{ELSEWHERE}")
    dictionary = load_dictionary(os.path.join(directory, "dict.txt"), "the dictionary", f"binarize the data again "
                                 f"with {command}")
    check_dictionary(directory, dictionary, command)
    return dictionary, read_train_labels(os.path.join(directory, TRAIN_LABELS)) if train_labels else []


def read_corpus(data: str, label_file: Optional[str], eval_label_file: Optional[str], languages: str = "",
                label_language: str = "", language_weights: str = "") -> GileCorpus:
    """The :class:`GileCorpus` of DATA (one directory), or with ``languages`` of one directory per language."""
    if languages:
        return read_multilingual_corpus(data, label_file, eval_label_file, parse_languages(languages), label_language)
    for option, value in (("--label-language", label_language), ("--language-weights", language_weights)):
        if value:
            raise OptionError(f"{option} is for a multilingual model: give --languages too, or drop it")
    dictionary, train_labels = read_binarized(data, "fairseq-joint-preprocess-gile")
    if label_file is None and os.path.isfile(os.path.join(data, LABEL_FILE)):
        label_file = os.path.join(data, LABEL_FILE)
    descriptions = read_label_file(label_file) if label_file else None
    check_described(label_file, descriptions, train_labels)
    eval_descriptions = read_label_file(eval_label_file) if eval_label_file else descriptions
    logger.info(f"dictionary: {len(dictionary)} types; {len(train_labels)} training labels; "
                f"label file {label_file}; eval label file {eval_label_file or label_file}")
    return GileCorpus(data, dictionary, tuple(train_labels), descriptions, eval_descriptions)


def read_multilingual_corpus(data: str, label_file: Optional[str], eval_label_file: Optional[str],
                             languages: List[str], label_language: str) -> GileCorpus:
    """``--languages``: every language's directory, dictionary and training labels; one label file for all."""
    label_language = label_language or languages[0]
    dictionaries, train_seen = {}, set()
    label_files: Dict[str, str] = {}
    for lang in dict.fromkeys(languages + [label_language]):
        directory = language_dir(data, lang)
        recorded = os.path.join(directory, LANGUAGE_FILE)
        said = "".join(read_text(recorded)).strip() if os.path.isfile(recorded) else lang
        if said != lang:
            raise InputError(f"{recorded} says its documents are {said!r}, but --languages reads the directory as "
                             f"{lang!r}: move it to {language_dir(data, said)} or binarize {lang}'s documents there")
        dictionaries[lang], train = read_binarized(directory, f"fairseq-joint-preprocess-gile --lang {lang}",
                                                   lang in languages)
        train_seen.update(train)
        if os.path.isfile(os.path.join(directory, LABEL_FILE)):
            label_files[lang] = os.path.join(directory, LABEL_FILE)
    given = label_file
    label_file = label_file or label_files.get(label_language)
    descriptions = read_label_file(label_file) if label_file else None
    if given is None:
        for path in label_files.values():
            other = read_label_file(path)
            if other != descriptions:
                diff = next((n for n in list(descriptions or {}) + list(other)
                             if (descriptions or {}).get(n) != other.get(n)), None)
                raise InputError(f"{path} disagrees with {label_file} (label {diff!r}): the languages of one model "
                                 "share one label space; binarize every language with the same --labels file")
    check_described(label_file, descriptions, sorted(train_seen))
    train_labels = [n for n in descriptions if n in train_seen] if descriptions is not None else sorted(train_seen)
    eval_descriptions = read_label_file(eval_label_file) if eval_label_file else descriptions
    logger.info(f"languages {', '.join(languages)} (label descriptions embedded as {label_language}): "
                + ", ".join(f"{lang} {len(d)} types" for lang, d in dictionaries.items())
                + f"; {len(train_labels)} training labels of any language")
    return GileCorpus(data, dictionaries[label_language], tuple(train_labels), descriptions, eval_descriptions,
                      tuple(languages), label_language, dictionaries)
