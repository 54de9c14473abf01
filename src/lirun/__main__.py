import sys

from lirun.cli.main import main

sys.exit(main())
