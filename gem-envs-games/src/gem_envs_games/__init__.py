"""GEM's text games, registered under ``game:`` ids."""
