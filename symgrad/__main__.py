import sys

from symgrad.cli import main

sys.exit(main())
