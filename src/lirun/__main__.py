import sys

from lirun.cli import start

sys.exit(start())
