"""The one tokenizer of GILE's input texts and label descriptions (both are embedded with one E, GILE Sec. 2.2), and of
the lexical channel's TF-IDF features when they span languages written without spaces."""

import re
import unicodedata
from typing import List

_moses = None

#: characters of scripts written without spaces between words: hiragana, katakana, CJK ideographs, Thai
UNSPACED = frozenset(chr(c) for lo, hi in ((0x3040, 0x30FF), (0x4E00, 0x9FFF), (0x0E00, 0x0E7F)) for c in range(lo, hi + 1))
UNSPACED_CLASS = "\u3040-\u30ff\u4e00-\u9fff\u0e00-\u0e7f"


def tokenize(text: str) -> List[str]:
    """Lower-cased Moses tokens (sacremoses) of the text in Unicode's composed form (NFC: "café" typed as "cafe" and a
    combining accent is the same word): the one tokenizer of inputs and label descriptions. Characters of scripts
    written without spaces (Japanese, Chinese, Thai: :data:`UNSPACED`) are tokens of their own, so such a text is not
    one 'word' per clause; other tokens are Moses'."""
    global _moses
    if _moses is None:
        from sacremoses import MosesTokenizer

        _moses = MosesTokenizer(lang="en")
    tokens = _moses.tokenize(unicodedata.normalize("NFC", text.lower()), escape=False)
    if not any(c in UNSPACED for t in tokens for c in t):
        return tokens
    out: List[str] = []
    for token in tokens:
        if not any(c in UNSPACED for c in token):
            out.append(token)
            continue
        # each unspaced-script character alone; runs of other characters (Latin, digits) stay together
        out += [piece for piece in re.findall(r"[%s]|[^%s]+" % (UNSPACED_CLASS, UNSPACED_CLASS), token) if piece]
    return out
