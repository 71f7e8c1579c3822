"""``python -m dedupd`` runs the command line."""

from dedupd.cli import main

main()
