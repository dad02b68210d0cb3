"""The command line's tools besides run: the terminal chat, one job run, reindexing."""
