// LeNet-5 at batch 1 on one resident thread-block cluster (sm_90) that talks to the host in LL
// packets (NCCL's "low latency" protocol, src/device/prims_ll.h): every 8 bytes that cross the bus
// carry their own sequence number. The stages are cluster.cu's (common.cuh's cluster stages: 8 blocks
// of 256 threads, the work of each layer split in eighths), with the weights loaded once a launch.
//
// The wire (mapped page-locked host memory, W = sizeof(T) / 4 words per value):
//   x      (N, 784 * W) uint64 pairs: low word a 32-bit word of the image's value (float: the value,
//          double: its low then its high word), high word the call's sequence number (never 0)
//   probs  (N, 10 * W) uint64 pairs, the same for the answer
//   ctl    (4) uint32: RESIDENT_NEXT (host, before a launch: the sequence the kernel waits for
//          first), RESIDENT_ALIVE (host 1 before a launch, the kernel 0 as it ends), RESIDENT_QUIT
//          (host: end now), RESIDENT_SERVED (the kernel, as it ends: the calls it served)
// Each pair is written with one aligned 64-bit store and read with one 64-bit load, which are
// single-copy atomic on the GPU and on the host (x86-64 and Armv8 alike, vector stores per 8-byte
// element): a reader that sees the sequence sees the value stored with it, so there is no go word,
// no ended word, no fence and no ordering between pairs to rely on. Thread t < 98 of block r polls
// its own pairs (image element 98r + t) and sends the value into all 8 blocks' img; the cluster
// barrier that follows is the one the image needs anyway. The answer goes back the same way (block
// 0's threads 0..9: 10 W pairs), and the host polls the answer itself.
//
// Ending: a polling thread that waits idle_ns for its pair (the clock read every poll, a register
// read; the quit word every RESIDENT_QUIT_POLLS polls, a bus read) votes to end by storing the
// round's number into every block's `command`; after the barrier every block sees the vote and the
// whole cluster ends together (a block never ends while another may write into its memory). A
// pair the kernel did not serve stays in host memory: the host relaunches and the new kernel
// (told the sequence in RESIDENT_NEXT) serves it.
//
// Barriers per image: 4 cluster barriers (cluster.cu's 0|1 .. 3|4); the persistent kernel's
// command broadcast and its trailing barrier are gone: the next image's writes into img, p1, p2 and
// h1 all follow the next 0|1 barrier, which no block passes before every block has left the current
// image's reads of them (img is read before 1|2, p1 before 2|3, p2 before 3|4, h1 by block 0 only).

template <typename T>
__global__ void __cluster_dims__(LENET_CLUSTER, 1, 1) __launch_bounds__(LENET_CLUSTER_THREADS)
lenet_resident(const unsigned long long* x,                                    // (N, 784 W) pairs, mapped
               const T* __restrict__ conv1_w, const T* __restrict__ conv1_b,  // (5, 5, 1, 6), (6)
               const T* __restrict__ conv2_w, const T* __restrict__ conv2_b,  // (5, 5, 6, 16), (16)
               const T* __restrict__ fc1_w, const T* __restrict__ fc1_b,      // (400, 120), (120)
               const T* __restrict__ fc2_w, const T* __restrict__ fc2_b,      // (120, 84), (84)
               const T* __restrict__ fc3_w, const T* __restrict__ fc3_b,      // (84, 10), (10)
               unsigned long long* probs, unsigned* ctl, int n, int idle_ns) {  // (N, 10 W) pairs, (4): mapped
    constexpr int W = sizeof(T) / 4;
    ClusterShared<T>& s = block_shared<ClusterShared<T>>();
    const int t = threadIdx.x;
    const unsigned r = cluster_rank();
    STAMP(0);
    cluster_clear(s, t);
    cluster_arrive();  // "this block runs, its img and command cleared" (release)
    DenseRegisters<T> d;
    cluster_load(s, d, r, t, conv1_w, conv1_b, conv2_w, conv2_b, fc1_w, fc1_b, fc2_w, fc2_b, fc3_w, fc3_b);
    unsigned seq = load_acquire_sys(ctl + RESIDENT_NEXT);  // the call the host launched this kernel for
    unsigned served = 0, round = 0;
    unsigned long long since = globaltimer_ns();  // idle since: the launch, then each image's end
    STAMP(1);
    cluster_wait();  // every block runs, its img and command cleared: they may be written
    STAMP(2);
    for (;;) {
        for (int b = 0; b < n; ++b) {
            ++round;
            if (t < 98) {  // element 98r + t of image b -> every block's img
                T pixel;
                if (resident_receive(x + (b * 784 + 98 * r + t) * W, seq, pixel, since,
                                     (unsigned long long)idle_ns, ctl + RESIDENT_QUIT)) {
                    cluster_scatter(s, r, t, pixel);
                } else {  // idle (or told to quit): a vote every block sees after the barrier
                    for (unsigned q = 0; q < LENET_CLUSTER; ++q) cluster_peer(&s.command, q)[0] = round;
                }
            }
            cluster_sync();  // 0|1: the whole image in every block, or a vote to end
            STAMP(3);
            if (s.command == round) goto end;
            cluster_stages(s, r, t, d);
            if (r == 0) {
                const T prob = cluster_head(s, t, d);  // stamps 7 before the answer's stores
#ifdef LENET_STAGE_CLOCKS
                __threadfence();  // the host reads the stamps once it has the answer
#endif
                if (t < 10) resident_send(probs + (b * 10 + t) * W, seq, prob);
            }
            since = globaltimer_ns();  // a batch's next image is waited for as long as a call
        }
        ++served;
        seq = seq == 0xFFFFFFFFu ? 1u : seq + 1u;  // 0 is never a call's (the wire starts zeroed)
    }
end:
    if (r == 0 && t == 0) {
        store_volatile(ctl + RESIDENT_SERVED, served);
        __threadfence_system();
        store_volatile(ctl + RESIDENT_ALIVE, 0u);
    }
}
