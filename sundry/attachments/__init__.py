"""Files customers and staff attach to a message: checked, re-encoded, stored, served only to who may see them."""
