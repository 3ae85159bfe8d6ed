"""``python -m tfseqrec``: the ``tfseqrec`` command, the console script's ``tfseqrec.cli:main``."""

import sys

from tfseqrec.cli import main

if __name__ == "__main__":
    sys.exit(main())
