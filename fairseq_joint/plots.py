"""matplotlib for the plugin's figures (its commands', benchmarks' and studies'): file-only, without its font-search
debug lines."""

import contextlib
import logging
import os

from fairseq_joint.errors import OptionError


def pyplot():
    """matplotlib's pyplot on the file-only Agg backend, without its font-search debug lines."""
    import matplotlib

    matplotlib.use("Agg")
    logging.getLogger("matplotlib").setLevel(logging.WARNING)
    import matplotlib.pyplot as plt

    return plt


def check_figure_path(path: str, option: str) -> str:
    """``path`` (given by ``option``) if matplotlib writes the format its extension names (.png, .pdf, .svg, ...; none:
    PNG): checked before a command's work, not when its figure is saved at the end."""
    from matplotlib.backend_bases import FigureCanvasBase

    formats = FigureCanvasBase.get_supported_filetypes()
    extension = os.path.splitext(path)[1][1:].lower()
    if extension and extension not in formats:
        raise OptionError(f"{option} {path}: matplotlib writes no .{extension} file: give a name ending in "
                          f"{', '.join('.' + f for f in sorted(formats))}")
    return path


@contextlib.contextmanager
def figure(path: str, *args, dpi: int = 110, **kwargs):
    """``with figure("out.png", figsize=...) as (fig, ax):`` draws and saves a PNG (tight layout); ``args`` and
    ``kwargs`` go to ``plt.subplots``."""
    plt = pyplot()
    fig, ax = plt.subplots(*args, **kwargs)
    try:
        yield fig, ax
        fig.tight_layout()
        fig.savefig(path, dpi=dpi)
    finally:
        plt.close(fig)
