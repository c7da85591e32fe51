"""A progress display for long fits (``verbose=True``), shared by the ref and fast engines."""
from __future__ import annotations

import math


class Progress:
    """tqdm bar counting core-set updates, with |S| and R in its postfix; silent when not verbose.

    The engines call ``update`` once per outer iteration; the bar is refreshed every
    ``every`` iterations so that display cost stays negligible against the fit.
    """

    def __init__(self, verbose, desc, every=25):
        self.bar = None
        self.every = every
        self.shown = 0
        if verbose:
            from tqdm.auto import tqdm
            self.bar = tqdm(desc=desc, unit="it", leave=True)

    def update(self, n_iter, core_size, radius2):
        if self.bar is not None and n_iter - self.shown >= self.every:
            self.bar.update(n_iter - self.shown)
            self.shown = n_iter
            self.bar.set_postfix(core_set=core_size, R=f"{math.sqrt(max(radius2, 0.0)):.8g}", refresh=False)

    def close(self, n_iter, core_size, radius2):
        if self.bar is not None:
            self.bar.update(n_iter - self.shown)
            self.bar.set_postfix(core_set=core_size, R=f"{math.sqrt(max(radius2, 0.0)):.8g}", refresh=False)
            self.bar.close()
