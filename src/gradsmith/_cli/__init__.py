"""Argument parsing and terminal output for each ``gradsmith`` subcommand (one module each)."""
