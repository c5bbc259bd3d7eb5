#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
#
# tools/check-docs.py [FILE.rst...]: parse reStructuredText with docutils
# (Debian's python3-docutils) and print every message of level warning or
# above as "FILE:LINE: (LEVEL/N) text"; exit 1 if there was any, 0 if
# none.  Default: Documentation/*.rst.  make check runs it as one static
# check (tools/check.sh).
#
# Documentation/ is written for Sphinx as well: its :doc: role and its
# toctree directive are known here, and each document they name must
# exist beside the one naming it (a missing one is an error).  Nothing is
# written; file insertion and raw output are refused, as for untrusted
# input.
import glob
import io
import os
import re
import sys

try:
    import docutils.core
    import docutils.nodes
    import docutils.utils
    from docutils.parsers.rst import Directive, directives, roles
except ImportError:
    print("error: no docutils for %s (Debian: python3-docutils; tools/deps.sh)"
          % sys.executable)
    sys.exit(2)

MIN_LEVEL = docutils.utils.Reporter.WARNING_LEVEL


def doc_exists(source, name):
    """Does the document :doc: or toctree names, relative to source, exist?"""
    base = os.path.dirname(os.path.abspath(source))
    if name.startswith("/"):
        name = name.lstrip("/")
    return os.path.isfile(os.path.join(base, name + ".rst"))


def doc_role(name, rawtext, text, lineno, inliner, options=None, content=None):
    # :doc:`name` or :doc:`title <name>`
    m = re.fullmatch(r"(?s)(.*?)\s*<([^<>]+)>", text)
    title, target = (m.group(1), m.group(2)) if m else (text, text)
    source = inliner.document.current_source or ""
    if not doc_exists(source, target.strip()):
        msg = inliner.reporter.error(
            ':doc: names "%s", and there is no %s.rst' % (target, target), line=lineno)
        prb = inliner.problematic(rawtext, rawtext, msg)
        return [prb], [msg]
    return [docutils.nodes.inline(rawtext, title or target)], []


class TocTree(Directive):
    has_content = True
    option_spec = {
        "maxdepth": directives.nonnegative_int,
        "caption": directives.unchanged,
        "hidden": directives.flag,
        "numbered": directives.unchanged,
        "titlesonly": directives.flag,
        "glob": directives.flag,
    }

    def run(self):
        source = self.state.document.current_source or ""
        msgs = []
        for entry in self.content:
            entry = entry.strip()
            if not entry:
                continue
            m = re.fullmatch(r".*<([^<>]+)>", entry)
            target = m.group(1) if m else entry
            if not doc_exists(source, target):
                msgs.append(self.state.document.reporter.error(
                    'toctree names "%s", and there is no %s.rst' % (target, target),
                    line=self.lineno))
        return msgs


def check(path):
    """The messages of level warning and above for one file."""
    with open(path, encoding="utf-8") as f:
        text = f.read()
    stream = io.StringIO()
    settings = {
        "report_level": MIN_LEVEL,
        "halt_level": docutils.utils.Reporter.SEVERE_LEVEL + 1,
        "warning_stream": stream,
        "file_insertion_enabled": False,
        "raw_enabled": False,
        "input_encoding": "utf-8",
        "traceback": True,
    }
    doctree = docutils.core.publish_doctree(text, source_path=path,
                                            settings_overrides=settings)
    out = []
    for node in doctree.traverse(docutils.nodes.system_message):
        if node["level"] < MIN_LEVEL:
            continue
        line = node.get("line") or "?"
        what = node.children[0].astext() if node.children else ""
        out.append("%s:%s: (%s/%d) %s" % (path, line, node["type"], node["level"],
                                          what.replace("\n", " ")))
    return out


def main(argv):
    roles.register_local_role("doc", doc_role)
    directives.register_directive("toctree", TocTree)
    files = argv[1:] or sorted(glob.glob("Documentation/*.rst"))
    if not files:
        print("error: no .rst file to check")
        return 1
    bad = 0
    for path in files:
        msgs = check(path)
        for m in msgs:
            print(m)
        bad += len(msgs)
    print("%d files, %d messages" % (len(files), bad))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
