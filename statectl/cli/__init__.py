"""The command line: thin typer commands, one module per command."""
