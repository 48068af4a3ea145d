"""`python -m transformer_zoo.cli`: the same as `transformer-zoo`."""

import sys

from transformer_zoo.cli import main

sys.exit(main())
