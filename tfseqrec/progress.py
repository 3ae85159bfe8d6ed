"""Progress bars for long loops (evaluation, item encoding): tqdm when it is installed, else silent."""


def progress_bar(total, progress, desc="evaluate"):
    """A tqdm bar over ``total`` batches (on a terminal when ``progress`` is None), or a silent stand-in."""
    try:
        import tqdm  # optional: without it, no bar
    except ImportError:
        tqdm = None
    if progress is False or tqdm is None:
        return _NoBar()
    return tqdm.tqdm(total=total, desc=desc, unit="batch", disable=None if progress is None else False)


class _NoBar:
    def update(self, n):
        pass

    def close(self):
        pass
