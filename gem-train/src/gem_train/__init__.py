"""GEM trainer."""
