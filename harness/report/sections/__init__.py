"""The sections that write the report from the claims: the findings and each section of DETAILS.md.

    questions, device_tables         REPORT.md's six questions answered, and each device's compact table
    findings, machine_findings       DETAILS.md's findings of the answering runs; and machine by machine
    first_screen                     what the first screen says beside its numbers (computed sentences)
    cpu_targets, cpu_floor           the CPU ladder's targets; the CPU's arithmetic floor
    gpu_section                      the GPU half: the ladder, the targets, where a GPU call goes
    gpu_floor_section                the GPU's floor (gpu-floor probes) and the GPU targets against it
    gpu_static_section               the hand-written kernels before a GPU (gpu-explain rows)
    kernel_stages_section            inside the cluster kernel (kernel-stages rows)
    explain_section                  why Keras is slow, stage by stage (explain rows)
    training_section                 what training costs at each level, and verify-train
    machines                         the machines table
    machine_pages                    every machine but the answering ones, a page each (reports/machines/)

May import: harness.report.claims, harness.report.markup and the harness's wings below the report
(tests/test_layout.py); the two documents (markdown, details) sit above it, harness.figures above
the wing.
"""
