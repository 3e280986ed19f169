"""The Keras level: one keras.Sequential, model.load_weights on the shared file, on the
TensorFlow, JAX or PyTorch backend (KERAS_BACKEND, set before keras is imported)."""
