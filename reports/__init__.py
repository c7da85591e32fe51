"""Report generator for corevector: ``python -m reports.run [--quick] [--out DIR]``.

Not part of the installed package; run it from a source checkout.  See ``reports/run.py`` and
``reports/common.py`` (the experiment registry).
"""
