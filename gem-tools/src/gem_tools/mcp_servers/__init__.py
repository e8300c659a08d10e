"""Small MCP servers that ship with gem-tools, for examples and tests.

- :mod:`gem_tools.mcp_servers.time_server`: date and time tools (the reference package's
  ``gem.tools.mcp_server.time_mcp`` tools, same names and arguments).
"""
