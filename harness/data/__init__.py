"""Inputs every level shares: MNIST, the weights file in every format, training the shared weights."""
