"""Export the label embedding of a ``label_embedding_cross_entropy`` checkpoint (Sun et al. 2017), print the
labels most similar to given labels (the paper's Table 5) and draw a heatmap of a chosen set (Figure 3).

    fairseq-joint-export-label-embedding CHECKPOINT [--dict DATA_BIN/dict.de.txt] [--output emb.pt]
        [--query Haus rot ...] [--top-k 5] [--heatmap heat.png --heatmap-labels Haus rot blau ...]

The similarity of label y to label i is the i-th value of y's embedding e_y (Sec. 2.1), shown as the
softmax probability e'_i; the label itself and fairseq's special symbols are left out of the top k.
``--output`` saves ``{"labels": [...], "embedding": m x m}`` (full) or ``{"labels", "A", "B"}`` (compressed,
e = ReLU(A_y B), Eq. 16). Without ``--dict`` the target dictionary is read from the data directory recorded
in the checkpoint. An unknown label is an error naming it, not skipped.
"""

import os
import sys
from typing import Optional, Sequence

import torch

from fairseq_joint.cli.common import console_script, fail, parser, positive_int
from fairseq_joint.data.inputs import load_dictionary
from fairseq_joint.loaders import load_checkpoint
from fairseq_joint.plots import check_figure_path, figure
from fairseq_joint.text_files import check_exists, check_new_output

PROG = "fairseq-joint-export-label-embedding"


def target_dictionary_path(state, checkpoint: str) -> str:
    from fairseq.data import data_utils

    task = (state.get("cfg") or {}).get("task") or {}
    data, lang = task.get("data"), task.get("target_lang")
    if not data:
        raise fail(f"{checkpoint} records no data directory: pass --dict dict.TGT.txt")
    data = str(data).split(os.pathsep)[0]
    if not lang and os.path.isdir(data):
        lang = data_utils.infer_language_pair(data)[1]  # as fairseq's translation task does
    path = os.path.join(data, f"dict.{lang or 'TGT'}.txt")
    if not lang or not os.path.isfile(path):  # the data moved, or holds no dictionary of its target language
        raise fail(f"{checkpoint}'s target dictionary {path} is not here: pass --dict with where dict.TGT.txt is now")
    return path


def main(argv: Optional[Sequence[str]] = None) -> int:
    p = parser(__doc__.split("\n\n")[0], prog=PROG)
    p.add_argument("checkpoint", help="checkpoint of a run with --criterion label_embedding_cross_entropy")
    p.add_argument("--dict", help="the target dictionary (dict.TGT.txt); default: the one of the checkpoint's data")
    p.add_argument("--output", help="save the embedding and the label list here (torch.save)")
    p.add_argument("--query", nargs="+", default=[], help="labels (target tokens) to list the most similar labels of")
    p.add_argument("--top-k", type=positive_int, default=5, help="similar labels per query (Table 5: 5)")
    p.add_argument("--heatmap", help="write a heatmap PNG of the embeddings of --heatmap-labels (Figure 3)")
    p.add_argument("--heatmap-labels", nargs="+", default=[], help="the labels of the heatmap (rows and columns)")
    a = p.parse_args(argv)

    import fairseq_joint  # noqa: F401  (allowlists the checkpoint classes for weights_only loading)
    from fairseq_joint.criterions.label_embedding_cross_entropy import load_label_embedding

    if a.heatmap and len(a.heatmap_labels) < 2:
        raise fail(f"--heatmap needs at least two --heatmap-labels, got {len(a.heatmap_labels)}")
    if a.heatmap_labels and not a.heatmap:
        raise fail("--heatmap-labels are the rows of --heatmap: add --heatmap FILE.png, or drop them")
    if a.heatmap:
        check_figure_path(a.heatmap, "--heatmap")
    if a.output:
        check_new_output(a.output, "--output", [("the checkpoint", a.checkpoint), ("--dict", a.dict)])
    state = load_checkpoint(a.checkpoint, labels=False)  # refused if missing; a translation model's, safe to unpickle
    if a.dict:
        dict_path = check_exists(a.dict, "--dict", "give the target dictionary (dict.TGT.txt) of the data")
    else:
        dict_path = target_dictionary_path(state, a.checkpoint)
    dictionary = load_dictionary(dict_path, "--dict" if a.dict else "the target dictionary")
    emb = load_label_embedding(a.checkpoint, len(dictionary), dictionary.symbols, "checkpoint", state,
                               f"pass the --dict of the data the checkpoint was trained on (not {dict_path})")
    labels = list(dictionary.symbols)

    def index(word: str, flag: str) -> int:
        i = dictionary.index(word)
        if i == dictionary.unk() and word != dictionary.unk_word:
            raise fail(f"{flag}: {word!r} is not in {dict_path}; give dictionary entries (target tokens, e.g. BPE)")
        return i

    queries = [index(w, "--query") for w in a.query]
    heat = [index(w, "--heatmap-labels") for w in a.heatmap_labels]

    if a.output:
        out = {"labels": labels}
        if emb.compressed:
            out.update(A=emb.A.detach().clone(), B=emb.B.detach().clone())
        else:
            out["embedding"] = emb.weight.detach().clone()
        with open(a.output, "wb") as f:  # Python's open names a directory or a missing parent (errors.translate)
            torch.save(out, f)
        print(f"saved the {'compressed (h=%d)' % emb.dim if emb.compressed else 'full'} embedding of "
              f"{emb.num_labels} labels to {a.output}")

    if queries:
        rows = torch.softmax(emb.matrix(torch.tensor(queries)).float(), dim=-1)
        rows[:, : dictionary.nspecial] = -1.0
        rows[torch.arange(len(queries)), torch.tensor(queries)] = -1.0
        top = rows.topk(min(a.top_k, emb.num_labels - dictionary.nspecial - 1), dim=-1)
        print("label\tmost similar labels (e'_i)")
        for q, values, ids in zip(queries, top.values.tolist(), top.indices.tolist()):
            print(labels[q] + "\t" + "  ".join(f"{labels[j]} ({v:.4f})" for v, j in zip(values, ids)))

    if heat:
        idx = torch.tensor(heat)
        values = torch.softmax(emb.matrix(idx).float(), dim=-1)[:, idx].numpy()
        size = 1.0 + 0.45 * len(heat)
        with figure(a.heatmap, figsize=(size + 1.5, size), dpi=120) as (fig, ax):
            image = ax.imshow(values, cmap="viridis")
            ax.set_xticks(range(len(heat)), [labels[i] for i in heat], rotation=90)
            ax.set_yticks(range(len(heat)), [labels[i] for i in heat])
            ax.set_title("label embedding e'_y (row y, column i)")
            fig.colorbar(image, ax=ax)
        print(f"wrote {a.heatmap}")
    return 0


command = console_script(main, PROG)


if __name__ == "__main__":
    sys.exit(command())
