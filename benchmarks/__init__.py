"""Benchmarks of the duplex demo server (run `python -m benchmarks.bench_server`)."""
