"""Development tools: checks the test command and `make check` run over the source tree."""
