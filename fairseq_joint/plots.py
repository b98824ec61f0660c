"""matplotlib for the plugin's figures (its commands', benchmarks' and studies'): file-only, without its font-search
debug lines."""

import contextlib
import logging


def pyplot():
    """matplotlib's pyplot on the file-only Agg backend, without its font-search debug lines."""
    import matplotlib

    matplotlib.use("Agg")
    logging.getLogger("matplotlib").setLevel(logging.WARNING)
    import matplotlib.pyplot as plt

    return plt


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
