"""``python -m scix_core`` is the ``scix`` command."""

import os
import sys

from scix_core.cli.main import main

code = main()
# interrupted and cleaned up: exit now, or a Ctrl-C caught mid-import (torch) ends us by SIGINT (-2)
if code == 130:
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
sys.exit(code)
