"""Operator benchmarks and the ``disagg bench`` dispatcher."""
