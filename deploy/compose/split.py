"""Give one hospital of the compose demo its slice of a CSV table (horizontal partition).

    python split.py SOURCE OUTPUT INDEX COUNT

Data row r (0-based, header excluded) goes to slice r % COUNT; this writes slice INDEX,
with the header, to OUTPUT.  SOURCE may be gzip-compressed (.gz).  The output is replaced
atomically, so running it again gives the same file.  Standard library only: it runs in
the fedanon image before any party starts.
"""

from __future__ import annotations

import csv
import gzip
import os
import sys
import tempfile
from pathlib import Path


def main(argv: list[str]) -> int:
    if len(argv) != 4:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    source, output = Path(argv[0]), Path(argv[1])
    index, count = int(argv[2]), int(argv[3])
    if not 0 <= index < count:
        print(f"split: INDEX must be in 0..{count - 1}, not {index}", file=sys.stderr)
        return 2
    opener = gzip.open if source.suffix == ".gz" else open
    kept = total = 0
    fd, tmp = tempfile.mkstemp(dir=output.parent, prefix=f".{output.name}.")
    try:
        with (
            opener(source, "rt", newline="", encoding="utf-8") as src,
            os.fdopen(fd, "w", newline="", encoding="utf-8") as dst,
        ):
            reader = csv.reader(src)
            writer = csv.writer(dst, lineterminator="\n")
            writer.writerow(next(reader))
            for row in reader:
                if not row:
                    continue
                if total % count == index:
                    writer.writerow(row)
                    kept += 1
                total += 1
        os.chmod(tmp, 0o644)
        os.replace(tmp, output)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    print(f"split: {output}: {kept} of {total} rows (slice {index} of {count}) from {source}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
