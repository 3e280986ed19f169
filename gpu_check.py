"""Temporary device check (not committed): cudnn/graph vs cudnn/frontend, batch 1 and 512."""
import sys, time, traceback
import numpy as np
from harness import DEFAULT_WEIGHTS, registry
from harness.data import mnist
from lenet_numpy.model import NumpyLeNet

x = mnist.to_input(mnist.load("test")[0][:512])
ref = NumpyLeNet(DEFAULT_WEIGHTS).predict(x)
impls = {}
for v in ("graph", "frontend"):
    try:
        t0 = time.perf_counter()
        impls[v] = registry.create("cudnn", DEFAULT_WEIGHTS, device="gpu", variant=v)
        p = impls[v].predict(x[:1]); p = impls[v].predict(x[:1])
        print(v, "build+2 calls s", round(time.perf_counter() - t0, 2), "err", float(np.abs(p - ref[:1]).max()))
    except Exception:
        traceback.print_exc()
fe = impls.get("frontend")
if fe is not None:
    for k, n in fe.fe.stage_notes.items():
        print("  stage", k, ":", n)
    print("  capture:", fe.fe.capture_note)
for b in (1, 512):
    times = {v: [] for v in impls}
    for v, impl in impls.items():
        for _ in range(50):
            impl.predict(x[:b])
    for r in range(5):
        for v, impl in impls.items():
            for _ in range(400 if b == 1 else 40):
                t = time.perf_counter_ns(); out = impl.predict(x[:b]); times[v].append(time.perf_counter_ns() - t)
    for v, ts in times.items():
        out = impls[v].predict(x[:b])
        err = float(np.abs(out - ref[:b]).max()); agree = bool((out.argmax(1) == ref[:b].argmax(1)).all())
        print(f"batch {b} {v}: median {np.median(ts)/1e3:.1f} us, p10 {np.percentile(ts,10)/1e3:.1f}, "
              f"device {impls[v].last_device_time_ns()/1e3:.1f} us, max err {err:.2e}, argmax agree {agree}")
for impl in impls.values():
    impl.close()
