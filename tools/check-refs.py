#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""References into the docs, checked: every

    docs/FILE.md                     the file must exist
    docs/FILE.md, "Heading"          and so must a heading of that text
    docs/FILE.md ("Heading")
    docs/notes/FILE                  (the same forms)

in docs/ (Markdown and the page template), README.md, lib/, hook/,
include/, bench/ and scripts/ names a file that exists and, where it quotes one, a heading of
that file.  A heading matches when its text is the quoted one, or is it
followed by a parenthetical ("The budget (2026-12-06)" matches "The
budget"); case and line breaks (a comment's " * " leaders included) do not
matter.  A reference may break across lines.

usage: tools/check-refs.py [--self-test]
Exit status 1, with a line per bad reference, when any is broken;
--self-test seeds a bad file and a bad heading into a copy and checks that
both are caught and that a good reference passes.
"""
import re
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SCANNED = ["docs", "README.md", "lib", "hook", "include", "bench", "scripts"]
SUFFIXES = {".md", ".in", ".c", ".h", ".S", ".py", ""}
# a path, then optionally ', "Heading"' or ' ("Heading"'
REF = re.compile(r'(docs/(?:notes/)?[A-Za-z0-9_.-]+\.md)\b'
                 r'(?:,\s*|\s*\(\s*)?(?:"([^"]+)")?')
LEADER = re.compile(r'\n[ \t]*(?:\*(?!\*)|//|#(?!#))?[ \t]*')


def files(root: Path):
    for name in SCANNED:
        p = root / name
        if p.is_file():
            yield p
        elif p.is_dir():
            for f in sorted(p.rglob("*")):
                if f.is_file() and f.suffix in SUFFIXES:
                    yield f


def headings(md: Path):
    out = set()
    in_code = False
    for line in md.read_text(errors="replace").splitlines():
        if line.startswith("```"):
            in_code = not in_code
        if in_code or not line.startswith("#"):
            continue
        text = line.lstrip("#").strip().lower()
        out.add(text)
        out.add(re.sub(r"\s*\([^()]*\)$", "", text))
    return out


def line_of(text: str, pos: int) -> int:
    return text.count("\n", 0, pos) + 1


def check(root: Path):
    """The broken references under root: (file, line, reference, why)."""
    bad, cache = [], {}
    for f in files(root):
        text = f.read_text(errors="replace")
        # join a reference broken over lines, dropping comment leaders
        flat = LEADER.sub(lambda m: " " * len(m.group(0)), text)
        for m in REF.finditer(flat):
            path, head = m.group(1), m.group(2)
            target = root / path
            where = (f.relative_to(root), line_of(text, m.start()))
            if not target.is_file():
                bad.append((*where, path, "no such file"))
                continue
            if head is None:
                continue
            if target not in cache:
                cache[target] = headings(target)
            want = re.sub(r"\s+", " ", head).strip().lower()
            if want not in cache[target]:
                bad.append((*where, f'{path}, "{want}"', "no such heading"))
    return bad


def self_test() -> int:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        (root / "docs" / "notes").mkdir(parents=True)
        (root / "lib").mkdir()
        (root / "docs" / "a.md").write_text(
            "# A\n\n## The budget (2026-12-06)\n\n```\n# not a heading\n```\n")
        (root / "docs" / "notes" / "2026-01-01-x.md").write_text("# X\n")
        (root / "README.md").write_text(
            'See docs/a.md, "The budget" and docs/notes/2026-01-01-x.md '
            '("X").\n')
        (root / "lib" / "good.c").write_text(
            '/* as measured (docs/a.md, "The\n * budget"). */\n')
        if check(root):
            print("check-refs self-test: good references reported bad:",
                  check(root), file=sys.stderr)
            return 1
        (root / "lib" / "bad.c").write_text(
            '/* docs/a.md ("idle spin"), docs/gone.md, docs/a.md, '
            '"not a heading" */\n')
        got = sorted((str(f), why) for f, _, _, why in check(root))
        want = [("lib/bad.c", "no such file"), ("lib/bad.c", "no such heading"),
                ("lib/bad.c", "no such heading")]
        if got != want:
            print(f"check-refs self-test: seeded bad references: got {got}, "
                  f"want {want}", file=sys.stderr)
            return 1
    print("check-refs self-test: the seeded bad file and headings are "
          "caught, the good references pass")
    return 0


def main(argv) -> int:
    if argv[1:] == ["--self-test"]:
        return self_test()
    if argv[1:]:
        print(__doc__.split("usage:")[1].split("\n")[0].strip(),
              file=sys.stderr)
        return 2
    bad = check(ROOT)
    for f, line, ref, why in bad:
        print(f"{f}:{line}: {ref}: {why}")
    if bad:
        print(f"check-refs: {len(bad)} broken reference(s)", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
