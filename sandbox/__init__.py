"""Fail-closed executor for untrusted, model-written tool code. Imports nothing from smith."""
