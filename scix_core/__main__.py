"""``python -m scix_core`` is the ``scix`` command."""

import sys

from scix_core.cli.main import main

sys.exit(main())
