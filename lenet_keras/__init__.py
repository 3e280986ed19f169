"""The Keras level: keras.Sequential plus model.load_weights on the shared file."""
