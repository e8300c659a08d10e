"""GEM multi-agent games (the ``multi:`` suite): board, bargaining, signalling and social-dilemma games
with scripted opponents, on gem-core's :mod:`gem.multiagent` API."""
