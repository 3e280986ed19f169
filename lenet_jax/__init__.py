"""The JAX ops level: LeNet-5 written with jax.lax on arrays made from the shared weights."""
