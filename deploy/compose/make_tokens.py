"""Make the collector's ingest tokens for deploy/compose: one random token per reporter, kept across restarts.

    python make_tokens.py DIR NAME... [--owner UID]

Writes DIR/NAME for each NAME that does not exist yet (32 random bytes as hex, mode 0400), and
gives each file to UID (the lanewatch image runs as `nobody`, 65534) when run as root. A token
that exists is kept, so a restart does not cut off senders holding it. Prints the names, never
a token.
"""

from __future__ import annotations

import argparse
import os
import re
import secrets
import sys
from pathlib import Path

NAME = re.compile(r"^[A-Za-z0-9._-]{1,64}$")


def make_tokens(folder: Path, names: list[str], owner: int | None = None) -> list[str]:
    """Write each missing token file under `folder`; the names made now."""
    folder.mkdir(parents=True, exist_ok=True)
    made = []
    for name in names:
        if not NAME.match(name):
            raise ValueError(f"token name {name!r}: 1-64 characters of A-Z a-z 0-9 . _ -")
        path = folder / name
        if not path.exists():
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o400)
            with os.fdopen(fd, "w", encoding="ascii") as f:
                f.write(secrets.token_hex(32) + "\n")
            made.append(name)
        if owner is not None and os.geteuid() == 0:
            os.chown(path, owner, owner)
    return made


def main(argv: list[str]) -> int:
    """The command line: make the tokens, say which were made."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder", type=Path)
    parser.add_argument("names", nargs="+")
    parser.add_argument("--owner", type=int, default=None, help="give the files to this uid (as root)")
    args = parser.parse_args(argv)
    try:
        made = make_tokens(args.folder, args.names, args.owner)
    except (OSError, ValueError) as exc:
        print(f"make_tokens: {exc}", file=sys.stderr)
        return 1
    print(f"ingest tokens in {args.folder}: made {', '.join(made) or 'none'}; kept the rest")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
