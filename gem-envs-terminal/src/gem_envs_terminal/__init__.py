"""GEM terminal env (the ``terminal:`` suite): shell tasks in a bubblewrap-sandboxed workspace, each with a
trusted-side check and a solver."""
