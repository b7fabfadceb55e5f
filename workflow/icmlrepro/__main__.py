import sys

from icmlrepro.core.cli import main

sys.exit(main())
