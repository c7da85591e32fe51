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


class Steps:
    """tqdm bar over the ``total`` outer steps of a fit (MMDA's directions, SparseSVR's basis functions,
    ImplicitSurface's levels), labelled ``desc``; silent (no tqdm import) when not verbose.

    ``step(**postfix)`` counts one step and shows ``postfix`` (e.g. the last step's core-set size);
    ``close()`` ends the bar.  Usable as a context manager, which closes it even when the fit fails.
    """

    def __init__(self, verbose, desc, total, unit="step"):
        self.bar = None
        if verbose:
            from tqdm.auto import tqdm
            self.bar = tqdm(desc=desc, total=total, unit=unit, leave=True)

    def step(self, **postfix):
        if self.bar is not None:
            if postfix:
                self.bar.set_postfix(refresh=False, **postfix)
            self.bar.update(1)

    def close(self):
        if self.bar is not None:
            self.bar.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False
