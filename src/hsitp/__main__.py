import sys

from hsitp.cli import main

sys.exit(main())
