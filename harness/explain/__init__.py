"""Why one call costs what it does: an ablation ladder, its child process, Keras' own steps."""
