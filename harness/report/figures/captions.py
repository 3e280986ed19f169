"""The figures' captions in REPORT.md: (file, title, what to look at), in reading order, one per
figures.FIGURES entry. Each says what the figure draws as it draws it now (which floor, which
GPU measure, which machines, what each line style means); the caption under each PNG says the
same with its runs named.

REPORT.md reads them (harness/report/markdown.py).

    FIGURES   [(file, title, look)]
"""

FIGURES = [
    ("fig01_cost_vs_code.png", "Cost against code",
     "Each level is a marker (circle CPU, square GPU) at its lines of code for inference and its batch-1 "
     "median, the black whisker its 95% interval (of one run: its rounds and processes, not the drift "
     "between runs). Down and to the right is fast but long; up and to the left, "
     "short but slow."),  # REPORT.md adds the lines drawn, named (figures.cost.lines_caption)
    ("fig02_loc.png", "Lines of code per level",
     "Each level's inference lines by part: the forward pass, kernel source, converting the shared "
     "weights, declaring a C API to Python (the raw levels' ffi binding); their total on top is Fig. 1's x. "
     "Beside it, hatched, the training step's lines, counted apart."),
    ("fig03_latency.png", "Per-image latency of every implementation",
     "Every variant `api_levels` measured at batch 1. Filled: the machine of the newest run on each device; "
     "hollow: other machines' older runs, for scale, not as peers. Whiskers are 95% intervals of one run "
     "(its rounds and processes, not the machine's drift between runs, which `make reproduce` measures); "
     "`noisy` marks "
     "a median whose interval spans more than 20% of it."),
    ("fig04_distributions.png", "Spread of every timed call",
     "Boxes are quartiles of all timed calls, whiskers p1–p99: a long right whisker is a slow tail (the "
     "p99 a user sees now and then), not an unstable median; `noisy` marks a median that moved between "
     "rounds."),
    ("fig05_cold_start.png", "Cold start against steady state",
     "The first call (hollow) against the steady state (filled), for variants whose worker started for "
     "them: the distance between the two is the price of tracing, compiling and setting up."),
    ("fig06_time_split.png", "Where a call's time goes",
     "Green, CPU: the floor (the fastest measured CPU implementation, as harness.measure.floor reads it from "
     "the newest api_levels run) as a share of each call's median; green, GPU: the GPU's busy time per call "
     "from the kernel trace, the one GPU measure drawn (CUDA events would also count the host's enqueueing); "
     "vermillion: everything else, Python, dispatch, data handling. A CPU machine where the floor was not "
     "measured is left out, and named."),
    ("fig07_explain.png", "Why the high levels are slow, stage by stage",
     "Each bar is one call peeled down an ablation ladder of public calls; a colour is a kind of stage in "
     "every row, a lighter shade the next stage of the same kind; the longest segment of a bar is the stage "
     "to remove first. Narrow segments are unlabelled: DETAILS.md names every stage."),
    ("fig08_backends.png", "One Keras model, three backends",
     "The same Keras model on TensorFlow, JAX and PyTorch (Keras on each, not the frameworks' own ops), "
     "called four ways: compare the spread along a panel (how the model is called) with the spread at one "
     "call (the backend); each backend keeps its colour."),
    ("fig09_throughput.png", "Throughput against batch size",
     "Images per second as batches grow, the same y scale in every panel, the levels below Keras and Keras "
     "in separate rows, each cell's 95% interval shaded. Every GPU panel draws the best CPU line again, "
     "dashed: the batch at which a GPU line passes it is where the GPU starts to pay."),
    ("fig10_training.png", "What one training step costs",
     "Time per SGD step against batch size, a row per machine: raw, framework-ops and reference levels on "
     "the left, Keras on the right. Dashed is Keras' `fit` and nothing else; solid is `train_on_batch` and "
     "every other level's own step; bands are 95% intervals."),
    ("fig11_precision.png", "float64 against float32",
     "float64 time over float32 time within rounds (both cells of one run), with its 95% interval: right of "
     "1x double precision is slower, left of it faster (PyTorch on the CPU); a whisker across 1x: no "
     "measurable difference at batch 1."),
    ("fig12_bill.png", "The full bill of each level",
     "Five currencies side by side on the CPU, one row per level in the ladder's order: time per image, "
     "lines of code, peak resident memory in calls, start-up to the first answer, and what must be "
     "installed beyond the harness itself: what a pip install of the level requires, the system libraries "
     "and tools (the C compiler) it needs; what it imported only because it was installed is left out "
     "(DETAILS lists it, and has every stage)."),
]
