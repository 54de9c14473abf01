import sys

try:
    from lirun.cli import start
except KeyboardInterrupt:  # SIGINT while ``python -m lirun`` imports its entry point
    sys.stderr.write("li: interrupted while starting; nothing was started\n")
    sys.exit(2)

sys.exit(start())
