"""The TensorFlow level: LeNet-5 written with tf.nn ops on tensors made from the shared weights."""
