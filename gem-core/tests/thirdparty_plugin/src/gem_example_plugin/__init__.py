"""An example third-party GEM plugin."""
