"""The papers' own numbers beside ours.

``reports/paper_values.csv`` holds every number of the papers' tables that the report re-measures, one row a
value: ``paper`` (the file prefix in the papers folder: 000 CVR, 001 CVM, 002 SSVR, 004 MMDA), ``table``,
``row`` and ``column`` (where it stands; the rows and columns under the paper's own names), ``value``,
``unit``, ``quote`` (the exact line of the paper's text copy it comes from) and ``field`` (its tab-separated
cell in that line; empty for a number quoted from a sentence), and a ``note`` on what differs between the
paper's measurement and ours (a substituted data set, another machine, a Matlab implementation).  The test
suite checks every value against its quoted cell, and the quote against the paper's text where the papers are
reachable (:func:`papers_dir`).

:func:`comparison` builds an experiment's table: the paper's value, ours and ours / paper.
"""
from __future__ import annotations

import os
from functools import lru_cache
from pathlib import Path

import numpy as np
import pandas as pd

VALUES = Path(__file__).resolve().parent / "paper_values.csv"
#: the text copies of the papers, by prefix
PAPER_FILES = {"000": "000_88c8f8810bf6206d.txt", "001": "001_1b97d3ee98da12aa.txt",
               "002": "002_e1ad84299eaaf4ed.txt", "003": "003_4ff7aea8b6345b0f.txt",
               "004": "004_41bfd2b98060112a.txt"}
COLUMNS = ["source", "quantity", "paper", "ours", "ours / paper", "note"]


def papers_dir():
    """The folder of the papers' text copies: ``$COREVECTOR_PAPERS_DIR``, else ``../shared/papers`` beside the
    checkout; None when neither exists (e.g. a CI clone)."""
    env = os.environ.get("COREVECTOR_PAPERS_DIR")
    for d in ([Path(env)] if env else []) + [Path(__file__).resolve().parent.parent.parent / "shared" / "papers"]:
        if (d / PAPER_FILES["000"]).is_file():
            return d
    return None


@lru_cache(maxsize=1)
def load():
    return pd.read_csv(VALUES, dtype={"paper": str, "field": "Int64"}, keep_default_na=False,
                       na_values={"value": [""], "field": [""]})


def entry(paper, table, row, column):
    """The row of the paper's value (a dict); KeyError if the data file has no such value."""
    d = load()
    hit = d[(d["paper"] == paper) & (d["table"] == table) & (d["row"] == row) & (d["column"] == column)]
    if len(hit) != 1:
        raise KeyError((paper, table, row, column))
    return hit.iloc[0].to_dict()


def value(paper, table, row, column):
    return float(entry(paper, table, row, column)["value"])


def has(paper, table, row, column):
    try:
        entry(paper, table, row, column)
        return True
    except KeyError:
        return False


def row(paper, table, prow, column, ours, quantity=None, note="", paper_value=None):
    """One line of a comparison: the paper's value at (table, row, column) (or ``paper_value``, a number derived
    from its cells), ours, their ratio, the data file's note and ``note``."""
    if paper_value is None:
        e = entry(paper, table, prow, column)
        paper_value, base_note = float(e["value"]), e["note"]
    else:
        base_note = ""
    ours = float(ours) if ours is not None and ours == ours else np.nan
    return {"source": f"[{paper}] {table}, {prow}", "quantity": quantity or column, "paper": paper_value,
            "ours": ours, "ours / paper": ours / paper_value if paper_value else np.nan,
            "note": "; ".join(n for n in (base_note, note) if n)}


def comparison(rows):
    """DataFrame of :func:`row` lines (the ones of values the paper has)."""
    return pd.DataFrame(list(rows), columns=COLUMNS)


def number(v):
    """A value for a table: integers with thousands separators, else 4 significant digits; NaN empty."""
    if v is None or v != v:
        return ""
    v = float(v)
    if v == int(v) and abs(v) < 1e12:
        return f"{int(v):,}"
    return f"{v:.5g}"


def markdown(df):
    from .common import to_markdown
    if not len(df):
        return "(no value of the papers to compare with in this mode)"
    show = df.copy()
    show["paper"] = show["paper"].map(number)
    show["ours"] = show["ours"].map(number)
    show["ours / paper"] = [("" if r != r else f"{r:.3g}") for r in show["ours / paper"]]
    return to_markdown(show)


def cvr_headline(df):
    """000 Sec. 4.1's claim (its Fig. 2 has no numbers in the text): CVR comparable in accuracy to LIBSVM's SVR,
    much faster and with far fewer support vectors on large sets; judged on Friedman #1 at the largest m with
    both, from 10,000 points."""
    ok = df[df["error"].isna()] if "error" in df else df
    fr = ok[ok["dataset"] == "friedman1"]
    fast = fr[fr["method"] == "CVR (fast)"].set_index("m")
    svr = fr[fr["method"] == "sklearn SVR"].set_index("m")
    both = sorted(set(fast.index) & set(svr.index))
    if not both:
        return []
    m = both[-1]
    f, s = fast.loc[m], svr.loc[m]
    speed, sv, rmse = s["fit_time"] / f["fit_time"], f["n_sv"] / s["n_sv"], f["rmse"] / s["rmse"]
    return [dict(claim="000 Sec. 4.1 / Fig. 2: CVR about as accurate as LIBSVM's SVR (RMSE within 10% here), much "
                       "faster and with far fewer support vectors on large sets",
                 ours=f"Friedman #1, m = {m:,}: SVR / CVR time {speed:.3g}×, #SV CVR / SVR {sv:.2g}, RMSE CVR / SVR "
                      f"{rmse:.3g}",
                 holds=bool(speed > 1 and sv < 1 and rmse <= 1.1) if m >= 10_000 else None)]
