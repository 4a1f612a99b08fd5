"""The `fedanon` command line: thin layers over the library."""
