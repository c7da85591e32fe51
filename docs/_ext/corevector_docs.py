"""The local Sphinx extension of corevector's documentation: what the pages show from outside ``docs/``.

A page whose source holds a line ``% corevector-generated: NAME`` (a MyST comment) gets that line replaced,
when Sphinx reads the page, by the Markdown that ``GENERATORS[NAME]`` returns:

* ``cli``: the ``--help`` of ``corevector`` and of each of its subcommands, from
  :func:`corevector.cli.build_parser` (a new subcommand appears by itself);
* ``report``: the latest report in the folder ``corevector_report_dir`` (default ``reports/output``, which
  ``bash run.sh report`` writes before it builds these pages): its header, then experiment by experiment
  (every experiment :func:`reports.run.load_experiments` registers) the figures, tables and files.  An
  experiment, a figure or the whole report that has not been generated yet is said so on the page; the
  build does not fail on it;
* ``references``: the papers, from :data:`refimpl.references.REFERENCES`;
* ``estimators``: the table of estimators, from :data:`corevector.registry.ESTIMATORS`.

Those pages are read again on every build (their sources live outside ``docs/``).  Members that
scikit-learn attaches to the estimator classes (``set_fit_request`` and the like, documented by scikit-learn
with references into its own user guide) are left out of the autodoc pages.
"""
from __future__ import annotations

import os
import re
from contextlib import contextmanager
from pathlib import Path

MARK = re.compile(r"^% corevector-generated: ([\w-]+)[ \t]*$", re.M)
#: the width of the captured --help (argparse reads it from $COLUMNS)
HELP_COLUMNS = 88
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
REGENERATE = "`bash run.sh report` (or `python -m reports.run --quick --only {name}`)"


# ------------------------------------------------------------------------------------------------------
# the command line
# ------------------------------------------------------------------------------------------------------
@contextmanager
def _columns(n):
    old = os.environ.get("COLUMNS")
    os.environ["COLUMNS"] = str(n)
    try:
        yield
    finally:
        if old is None:
            del os.environ["COLUMNS"]
        else:
            os.environ["COLUMNS"] = old


def cli_helps():
    """[(command line, its --help text)]: ``corevector`` and each subcommand, in the parser's order."""
    import argparse

    from corevector.cli import build_parser

    parser = build_parser()
    out = []
    with _columns(HELP_COLUMNS):
        out.append((parser.prog, parser.format_help()))
        for action in parser._actions:  # argparse keeps its subcommands in a _SubParsersAction
            if isinstance(action, argparse._SubParsersAction):
                out += [(sub.prog, sub.format_help()) for sub in action.choices.values()]
    return out


def cli_markdown(app, docname):
    lines = []
    for prog, text in cli_helps():
        label = "cli-" + "-".join(prog.split()[1:]) if " " in prog else "cli-main"
        lines += [f"({label})=", f"## `{prog}`", "", "```text", text.rstrip(), "```", ""]
    return "\n".join(lines)


# ------------------------------------------------------------------------------------------------------
# the report
# ------------------------------------------------------------------------------------------------------
CONTENTS_LINE = re.compile(r"^- \[(?P<title>.*)\]\(#(?P<name>[\w-]+)\) \((?P<elapsed>[\d.]+) s\): ?(?P<files>.*)$")
LINK = re.compile(r"(!?)\[([^\]]*)\]\(([^)#\s]+)\)")
SECTION = re.compile(r'^<a id="([\w-]+)"></a>\s*$', re.M)


def parse_report(text):
    """(header lines, {name: (elapsed s, [output files])}, {name: section body}) of a REPORT.md written by
    ``reports.run.write_report``."""
    head, _, rest = text.partition("## Contents")
    # the opening summary table of the papers' claims (its heading, then its rows), then the header's items
    header = [line for line in head.splitlines() if line.startswith(("- ", "|"))]
    if any(line.startswith("|") for line in header):
        # the links to the experiments' sections become references to their labels on the page
        rows = [re.sub(r"\[([\w-]+)\]\(#([\w-]+)\)", r"{ref}`\1 <report-\2>`", line)
                for line in header if line.startswith("|")]
        items = [line for line in header if line.startswith("- ")]
        header = ["**The papers' claims, re-measured:**", ""] + rows + [""] + items
    contents = {}
    for line in rest.splitlines():
        m = CONTENTS_LINE.match(line)
        if m:
            contents[m["name"]] = (m["elapsed"], [f for _, _, f in LINK.findall(m["files"])])
    parts = SECTION.split(rest)
    bodies = {}
    for name, body in zip(parts[1::2], parts[2::2]):
        # the body starts with the experiment's "## title" line, which the page writes itself
        bodies[name] = body.strip().split("\n", 1)[1] if body.strip().startswith("## ") else body.strip()
    return header, contents, bodies


def is_png(path):
    try:
        with open(path, "rb") as f:
            return f.read(8) == PNG_SIGNATURE
    except OSError:
        return False


def _body_markdown(body, out, rel):
    """An experiment's section of REPORT.md for the page: its figure lines dropped (the page shows the
    figures itself), headings at level 3 or below, links to the report's files made downloads."""
    lines = []
    for line in body.splitlines():
        if re.fullmatch(r"\s*!\[[^\]]*\]\([^)]*\)\s*", line):
            continue
        m = re.match(r"^(#{1,6}) (.*)", line)
        if m:
            line = "#" * max(3, len(m[1])) + " " + m[2]

        def link(mm):
            bang, text, target = mm.groups()
            if bang or not (out / target).is_file():
                return f"`{text}`"
            return f"{{download}}`{text} <{rel(out / target)}>`"

        lines.append(LINK.sub(link, line))
    return "\n".join(lines).strip()


def _experiment_markdown(exp, contents, bodies, out, rel):
    lines = [f"(report-{exp.name})=", f"## {exp.title}", ""]
    sizes = ", ".join(f"{mode} {exp.sizes[mode]}" for mode in ("quick", "full") if mode in exp.sizes)
    lines += [f"Experiment `{exp.name}`" + (f" (sizes: {sizes})" if sizes else "") + ".", ""]
    if exp.name not in contents:
        return lines + [":::{note}", f"This experiment has not been generated yet: run {REGENERATE.format(name=exp.name)}.",
                        ":::", ""]
    elapsed, files = contents[exp.name]
    lines += [f"Run time in the latest report: {float(elapsed):.1f} s.", ""]
    vector = {f for f in files if f.endswith((".pdf", ".svg")) and f[:-4] + ".png" in files}
    for f in (f for f in files if f.endswith(".png")):
        if is_png(out / f):
            links = [f"{{download}}`{v[-3:].upper()} <{rel(out / v)}>`" for v in (f[:-4] + ".pdf", f[:-4] + ".svg")
                     if v in vector and (out / v).is_file()]
            caption = f"`{f}`" + (f" (vector: {', '.join(links)})" if links else "")
            lines += [f"```{{figure}} {rel(out / f)}", f":alt: {f}", "", caption, "```", ""]
        else:
            why = "is not a valid PNG" if (out / f).exists() else "has not been generated yet"
            lines += [":::{warning}", f"The figure `{f}` {why}: run {REGENERATE.format(name=exp.name)}.", ":::", ""]
    body = _body_markdown(bodies.get(exp.name, ""), out, rel)
    if body:
        lines += [body, ""]
    data = [f for f in files if not f.endswith(".png") and f not in vector and (out / f).is_file()]
    if data:
        lines += ["Files: " + ", ".join(f"{{download}}`{f} <{rel(out / f)}>`" for f in data) + ".", ""]
    return lines


class _Exp:
    def __init__(self, name, title, sizes=None):
        self.name, self.title, self.sizes = name, title, sizes or {}


def report_markdown(app, docname):
    from reports.run import load_experiments

    out = Path(app.config.corevector_report_dir).resolve()
    page_dir = Path(app.srcdir, docname).parent

    def rel(path):  # a path from the page to a file of the report (Sphinx copies it into the site)
        return os.path.relpath(path, page_dir).replace(os.sep, "/")

    experiments = list(load_experiments().values())
    report = out / "REPORT.md"
    if not report.is_file():
        lines = [":::{note}", f"The report has not been generated yet (no `REPORT.md` in `{out}`): run "
                 "`bash run.sh report`, which writes it and then builds these pages.", ":::", ""]
        contents, bodies = {}, {}
    else:
        header, contents, bodies = parse_report(report.read_text(encoding="utf-8"))
        lines = ["The latest report, read from `REPORT.md` when these pages were built:", ""] + header + [""]
        known = {e.name for e in experiments}
        experiments += [_Exp(name, name) for name in contents if name not in known]  # renamed since
    for exp in experiments:
        lines += _experiment_markdown(exp, contents, bodies, out, rel)
    return "\n".join(lines)


# ------------------------------------------------------------------------------------------------------
# the papers and the estimators
# ------------------------------------------------------------------------------------------------------
def references_markdown(app, docname):
    from refimpl.references import REFERENCES

    lines = ["| key | reference | what corevector takes from it |", "|---|---|---|"]
    for r in REFERENCES.values():
        lines.append(f"| [{r.key}] | {r.authors}. *{r.title}.* {r.venue}, {r.year}. | {r.what} |")
    return "\n".join(lines) + "\n"


def estimators_markdown(app, docname):
    import inspect

    from corevector.registry import ESTIMATORS

    lines = ["| estimator | task | paper | what it is |", "|---|---|---|---|"]
    for e in ESTIMATORS:
        summary = inspect.getdoc(e.cls).split("\n", 1)[0]
        cli = f" (`corevector fit --estimator {e.cli_name}`)" if e.cli_name else ""
        lines.append(f"| {{py:class}}`~corevector.{e.cls.__name__}` | {e.task}{cli} | [{e.paper}] | {summary} |")
    return "\n".join(lines) + "\n"


GENERATORS = {"cli": cli_markdown, "report": report_markdown, "references": references_markdown,
              "estimators": estimators_markdown}


# ------------------------------------------------------------------------------------------------------
# Sphinx hooks
# ------------------------------------------------------------------------------------------------------
def on_source_read(app, docname, source):
    def expand(m):
        if m[1] not in GENERATORS:
            raise ValueError(f"{docname}: unknown generated block {m[1]!r} (known: {sorted(GENERATORS)})")
        return GENERATORS[m[1]](app, docname)

    source[0] = MARK.sub(expand, source[0])


def on_env_get_outdated(app, env, added, changed, removed):
    """The pages with generated blocks: always read again (their sources are outside docs/)."""
    again = []
    for docname in env.found_docs:
        path = env.doc2path(docname)
        try:
            if MARK.search(Path(path).read_text(encoding="utf-8")):
                again.append(docname)
        except OSError:
            continue
    return again


def skip_foreign_members(app, what, name, obj, skip, options):
    """Leave out the methods scikit-learn attaches to every estimator class (``set_fit_request``, ...)."""
    if what == "class" and callable(obj):
        module = getattr(obj, "__module__", "") or ""
        if not module.startswith("corevector"):
            return True
    return None


def setup(app):
    app.add_config_value("corevector_report_dir", "", "env")
    app.connect("source-read", on_source_read)
    app.connect("env-get-outdated", on_env_get_outdated)
    app.connect("autodoc-skip-member", skip_foreign_members)
    return {"version": "1", "parallel_read_safe": True, "parallel_write_safe": True}
