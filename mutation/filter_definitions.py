"""Skip the mutants of whole functions: a cosmic-ray filter for mutation/run.sh.

    python mutation/filter_definitions.py SESSION.sqlite MODULE.toml

reads ``exclude`` (a list of function, method or class names, as cosmic-ray records them in its
session: the innermost enclosing definition) from the session file's section

    [cosmic-ray.filters.definition-filter]
    exclude = ["validate_ssvr_params", ...]

and marks every pending mutant inside one of them as skipped.  Unlike a line range it survives
edits above the function.  Without the section it does nothing.
"""
import sys

from cosmic_ray.config import load_config
from cosmic_ray.work_db import use_db
from cosmic_ray.work_item import WorkerOutcome, WorkResult


def main(session, config_path):
    config = load_config(config_path)
    exclude = set(config.sub("filters", "definition-filter").get("exclude", []))
    if not exclude:
        return 0
    with use_db(session) as db:
        skip = [item.job_id for item in db.pending_work_items
                if any(m.definition_name in exclude for m in item.mutations)]
        if skip:
            db.set_multiple_results(skip, WorkResult(output="Filtered definition-filter",
                                                     worker_outcome=WorkerOutcome.SKIPPED))
    print(f"definition-filter: {len(skip)} mutants skipped in {sorted(exclude)}")
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:]))
