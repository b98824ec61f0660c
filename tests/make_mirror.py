#!/usr/bin/env python
"""A tiny local mirror of the raw corpora the examples/wmt17 recipes read, in the real archives' names and
layouts, built from the bundled MPL-2.0 corpus ``data/demo-en-de`` (so nothing is downloaded in tests).

    python tests/make_mirror.py DEST [--lines 150]

Real layouts mirrored (WMT17 translation task, fairseq's IWSLT14 mirror, Stanford's IWSLT15 release):
  training-parallel-europarl-v7.tgz   training/europarl-v7.de-en.{de,en}
  training-parallel-commoncrawl.tgz   commoncrawl.de-en.{de,en}
  training-parallel-nc-v12.tgz        training/news-commentary-v12.de-en.{de,en}
  training-parallel-ep-v8.tgz         training/europarl-v8.fi-en.{fi,en}
  rapid2016.tgz                       rapid2016.de-en.{de,en}, rapid2016.en-fi.{en,fi}
  dev.tgz                             dev/newstest201[456]-{deen,ende,enfi,fien}-{src,ref}.L.sgm
  de-en.tgz                           de-en/train.tags.de-en.{de,en}, de-en/IWSLT14.TED{,X}.*.de-en.L.xml
  train.{en,vi} tst2012.{en,vi} tst2013.{en,vi}   (IWSLT15 en-vi, plain files)
The corpus has only English and German: the German side stands in for Finnish and Vietnamese text.
"""

import argparse
import html
import io
import sys
import tarfile
from pathlib import Path
from typing import Dict, List, Tuple

DEMO = Path(__file__).resolve().parents[1] / "data" / "demo-en-de"


class Lines:
    """Consecutive, non-overlapping slices of the demo corpus (train split), as (en, de) pairs."""

    def __init__(self):
        self.en = (DEMO / "train.en").read_text(encoding="utf-8").splitlines()
        self.de = (DEMO / "train.de").read_text(encoding="utf-8").splitlines()
        self.pos = 0

    def take(self, n: int) -> Tuple[List[str], List[str]]:
        if self.pos + n > len(self.en):
            raise SystemExit(f"error: the demo corpus has {len(self.en)} lines; ask for fewer (--lines)")
        en, de = self.en[self.pos:self.pos + n], self.de[self.pos:self.pos + n]
        self.pos += n
        return en, de


def text(lines: List[str]) -> str:
    return "".join(line + "\n" for line in lines)


def write_tgz(path: Path, members: Dict[str, str]) -> None:
    with tarfile.open(path, "w:gz") as tar:
        for name, content in sorted(members.items()):
            data = content.encode("utf-8")
            info = tarfile.TarInfo(name)
            info.size, info.mtime, info.mode = len(data), 1500000000, 0o644
            tar.addfile(info, io.BytesIO(data))


def sgm(setid: str, lang: str, lines: List[str], kind: str) -> str:
    head = f'<{kind} setid="{setid}" srclang="any" trglang="{lang}">\n' if kind == "refset" else \
        f'<srcset setid="{setid}" srclang="{lang}">\n'
    out = [head, f'<doc sysid="ref" docid="demo-{setid}" genre="news" origlang="en">\n<p>\n']
    out += [f'<seg id="{i}">{html.escape(s, quote=False)}</seg>\n' for i, s in enumerate(lines, 1)]
    out.append(f"</p>\n</doc>\n</{kind}>\n")
    return "".join(out)


def iwslt_xml(setid: str, lang: str, lines: List[str]) -> str:
    out = ['<?xml version="1.0" encoding="UTF-8"?>\n<mteval>\n', f'<srcset setid="{setid}" srclang="{lang}">\n',
           '<doc docid="1" genre="lectures">\n<url>http://www.ted.com/talks/demo.html</url>\n',
           "<keywords>talks, demo</keywords>\n<talkid>1</talkid>\n<title>Demo talk</title>\n"]
    out += [f'<seg id="{i}"> {html.escape(s, quote=False)} </seg>\n' for i, s in enumerate(lines, 1)]
    out.append("</doc>\n</srcset>\n</mteval>\n")
    return "".join(out)


def train_tags(lines: List[str], lang: str) -> str:
    """train.tags.de-en.L: talk headers (tag lines, kept title/description) around the sentences."""
    out, half = [], len(lines) // 2
    for talk, chunk in enumerate((lines[:half], lines[half:]), 1):
        out += [f"<url>http://www.ted.com/talks/demo_{talk}.html</url>", "<keywords>talks, demo</keywords>",
                "<speaker>Demo Speaker</speaker>", f"<talkid>{talk}</talkid>",
                f"<title>{chunk[0]}</title>", f"<description>TED Talk Subtitles and Transcript: {chunk[1]}</description>"]
        out += chunk[2:]
        out += ["<reviewer></reviewer>", "<translator></translator>"]
    return text(out)


def build(dest: Path, n: int = 150, n_eval: int = 40) -> Path:
    dest.mkdir(parents=True, exist_ok=True)
    pool = Lines()
    ende = {}
    for member in ("training/europarl-v7.de-en", "commoncrawl.de-en", "training/news-commentary-v12.de-en"):
        en, de = pool.take(n)
        ende[member] = {f"{member}.en": text(en), f"{member}.de": text(de)}
    write_tgz(dest / "training-parallel-europarl-v7.tgz", ende["training/europarl-v7.de-en"])
    write_tgz(dest / "training-parallel-commoncrawl.tgz", ende["commoncrawl.de-en"])
    write_tgz(dest / "training-parallel-nc-v12.tgz", ende["training/news-commentary-v12.de-en"])
    en, de = pool.take(n)
    en2, fi = pool.take(n)
    write_tgz(dest / "rapid2016.tgz", {"rapid2016.de-en.en": text(en), "rapid2016.de-en.de": text(de),
                                       "rapid2016.en-fi.en": text(en2), "rapid2016.en-fi.fi": text(fi)})
    en, fi = pool.take(n)
    write_tgz(dest / "training-parallel-ep-v8.tgz", {"training/europarl-v8.fi-en.en": text(en),
                                                     "training/europarl-v8.fi-en.fi": text(fi)})
    dev = {}
    for year, pairs in ((2014, ("deen",)), (2015, ("deen", "ende", "enfi", "fien")), (2016, ("enfi", "fien"))):
        for code in pairs:
            s, t = code[:2], code[2:]
            en, other = pool.take(n_eval)
            side = {"en": en, s if s != "en" else t: other}
            dev[f"dev/newstest{year}-{code}-src.{s}.sgm"] = sgm(f"newstest{year}", s, side[s], "srcset")
            dev[f"dev/newstest{year}-{code}-ref.{t}.sgm"] = sgm(f"newstest{year}", t, side[t], "refset")
    write_tgz(dest / "dev.tgz", dev)
    en, de = pool.take(2 * n)
    iwslt = {"de-en/train.tags.de-en.en": train_tags(en, "en"), "de-en/train.tags.de-en.de": train_tags(de, "de")}
    for s in ("TED.dev2010", "TED.tst2010", "TED.tst2011", "TED.tst2012", "TEDX.dev2012"):
        en, de = pool.take(n_eval // 4)
        iwslt[f"de-en/IWSLT14.{s}.de-en.en.xml"] = iwslt_xml(f"iwslt2014_{s}", "english", en)
        iwslt[f"de-en/IWSLT14.{s}.de-en.de.xml"] = iwslt_xml(f"iwslt2014_{s}", "german", de)
    write_tgz(dest / "de-en.tgz", iwslt)
    for name, k in (("train", n), ("tst2012", n_eval), ("tst2013", n_eval)):
        en, vi = pool.take(k)
        (dest / f"{name}.en").write_text(text(en), encoding="utf-8")
        (dest / f"{name}.vi").write_text(text(vi), encoding="utf-8")
    return dest


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("dest", help="directory to write the mirror into")
    p.add_argument("--lines", type=int, default=150, help="sentence pairs per training file")
    a = p.parse_args(argv)
    build(Path(a.dest), a.lines)
    print(a.dest)
    return 0


if __name__ == "__main__":
    sys.exit(main())
