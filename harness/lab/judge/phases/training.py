"""A training lab's steps ([lab] task = "training"): the submission is a harness.base.Trainer (one
SGD step: forward, backward, update), graded as `verify-train` checks every level and timed as
inference is.

  import    the module's one Trainer subclass built from the shared initial weights
            (weights/lenet5_init.weights.h5)                 import-error, timeout
  gate      [gate] steps SGD steps of [gate] batch images, the first training images in order (as
            verify-train), at harness.base.LEARNING_RATE: after each step the loss within
            max_rel_loss (relative), then every weight within max_abs_diff of the oracle's
            (harness.lab.judge.rules.oracle, float64; or of its steps with ReLU's gradient at 0
            taken as 1); a wrong step is named by its kind (harness.lab.judge.rules.sgd): the forward
            pass (its layer, where the submission has `stage`: .forward_verdicts), a layer's
            gradient in backpropagation's order (fc3 ... conv1), a step off by a known factor
                                                             wrong, crashed, timeout
  stages    (a lab with [stages]) each layer's backward on its own, handed the oracle's activation,
            upstream gradient and weights (harness.lab.judge.rules.backprop), whatever ended the
            gate: an error, a shape, a wrong step, a worker that died or timed out (then asked of a
            fresh worker under the same limits: .fresh_worker; only if that fails too are they
            "not graded", by name); one wrong layer fails only its own stage
  warm-up   `warmup` steps beside rank_by's                   too-slow
  rounds    per round the same fresh batches (unseen images, random labels) for every participant,
            in a rotated order; each round's losses and the submission's weights after it replayed
            by the oracle from its weights before it (sgd.off_the_steps)   wrong, timeout
  clocks, ok   harness.lab.judge.phases.verdict, as inference (per step; per image = / batch)

The Grader's methods for them (harness.lab.judge.grade.Grader): .training_steps (a training lab's
.steps, harness.lab.judge.rules.kinds), .backward_verdicts (the stages), .forward_verdicts (where the
loss is wrong), .fresh_worker (a new worker for the stages), .training_gate, .training_rounds.

    NOT_GRADED                       a stage's verdict when no worker could answer it
"""


from harness.data import weights

COUNT = weights.N_PARAMETERS


NOT_GRADED = "not graded"
