"""Tool servers over MCP: a ticket class's remote tools, their declarations, calls outside transactions."""
