"""The agent's model path: the gateway to providers, their wire shapes, prices, strict JSON, calls
written as text, and the scripted model tests and the harness use."""
