"""A grading's references (the Grader's second phase): each reference a trusted worker in the same
sandbox as the submissions (the same overhead for all), started once and kept across submissions;
a chunk of calls streamed to any participant and its answers checked against the oracle; and the
pace the deadlines come from (harness.lab.judge.rules.deadlines), rank_by timed before each
submission's worker starts.

The Grader's methods for them (harness.lab.judge.grade.Grader):
      .reference(label) -> Sandbox  started and loaded on first use; one that cannot run stops
                                    the grading, its log in OUT/references.log
      .chunk(who, worker, images, oracle, wait) -> Chunk   one chunk of timed calls, its answers
                                    checked; a reference that fails is restarted once
      .retire(worker)               a reference's worker stopped, its log kept
      .measure_pace() -> Pace       rank_by's times on the grader's clock (deadlines.Pace)
      .reference_gate_s(label, images)   a reference's gate exchange, in seconds
    PROBE_GATE, REFERENCE_TIMEOUT_S
"""




PROBE_GATE = 100  # the gate's first images, checked before the probe (and the pace's gate exchange)
REFERENCE_TIMEOUT_S = 300
