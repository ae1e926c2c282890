"""`python -m readie_executor ...`: a template or a cold start (see zygote.py)."""

import sys

from .zygote import main

main(sys.argv[1:])
