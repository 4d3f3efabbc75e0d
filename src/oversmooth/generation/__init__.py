"""Sampling with the decoding methods, sample quality, a teacher's documents and their truth."""
