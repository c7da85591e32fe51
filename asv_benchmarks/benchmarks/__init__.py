"""asv benchmarks of corevector (see ../asv.conf.json and common.py)."""
