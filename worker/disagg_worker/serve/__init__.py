"""HTTP serving subsystem: the worker's OpenAI-style API, the P/D proxy and the local
process plumbing they share (``localrun``: serve until a signal, ready lines, process
groups).
"""
