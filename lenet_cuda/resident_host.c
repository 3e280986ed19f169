// cuda/resident's host side of one call (lenet_cuda/resident.py; the wire is resident.cu's): the
// images' 32-bit words written as {word, sequence} pairs, the answer's pairs spun on and copied out.
// Python makes one call (resident_call); ctypes lets go of the GIL for it. Built by the system's C
// compiler (harness.frameworks.cbuild), loaded through ctypes.
//
// Each pair is one aligned 8-byte store on the way out and one 8-byte load on the way back: single-
// copy atomic on x86-64 and Armv8, so the kernel sees a pair whole, old or new, and the sequence
// says which; no store needs ordering before another. The answer is taken from the same loads that
// showed its sequences (each pair read once per pass), never from a second read.
//
//   resident_write(wire)               the image's pairs, nothing waited for
//   resident_wait(wire, stamps)        spin on the answer's pairs, then copy its values out
//   resident_call(wire, stamps)        both: the call of a live kernel
// wire: struct resident_wire, one per batch size (resident.py's Wire, field for field), the call's
// sequence and deadline set in it by the host before each call. resident_wait and resident_call
// answer RESIDENT_ANSWERED, RESIDENT_ENDED (the kernel's alive word is 0 and the answer has not
// come: the host launches it again and waits again) or RESIDENT_TIMED_OUT. stamps (4 int64, or
// null): CLOCK_MONOTONIC ns (the clock of Python's time.perf_counter_ns) at resident_call's entry,
// the pairs written, the answer's last pair seen and the answer copied: measure_resident attributes
// a call's time with them.
#define _POSIX_C_SOURCE 199309L
#include <stdint.h>
#include <time.h>

#define RESIDENT_ALIVE 1  // ctl's word the kernel sets to 0 as it ends (kernels.RESIDENT_ALIVE)
#define POLL_CHECK 1024   // polls between reads of the clock and of the alive word

enum { RESIDENT_ANSWERED = 0, RESIDENT_ENDED = 1, RESIDENT_TIMED_OUT = 2 };

struct resident_wire {
    const uint32_t* words;           // (N * 784 * W) the images' 32-bit words (the host's staging)
    uint64_t* x;                     // (N * 784 * W) pairs, mapped: the kernel polls them
    int64_t x_count;
    const volatile uint64_t* out;    // (N * 10 * W) pairs, mapped: the kernel's answer
    int64_t out_count;
    uint32_t* answer;                // (N * 10 * W) the answer's words, for the host
    const volatile uint32_t* ctl;    // (4) mapped: resident.cu's RESIDENT_* words
    int64_t deadline_ns;             // CLOCK_MONOTONIC: past it, RESIDENT_TIMED_OUT
    uint32_t seq;                    // the call's sequence number (never 0)
};

static int64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

void resident_write(const struct resident_wire* w) {
    const uint64_t high = (uint64_t)w->seq << 32;
    for (int64_t i = 0; i < w->x_count; ++i) w->x[i] = high | w->words[i];
    __atomic_signal_fence(__ATOMIC_SEQ_CST);  // every store emitted before any poll that follows
}

int resident_wait(const struct resident_wire* w, int64_t* stamps) {
    const volatile uint64_t* out = w->out;
    const int64_t count = w->out_count;
    const uint32_t seq = w->seq;
    uint64_t polls = 0;
    for (;;) {
        while ((uint32_t)(out[count - 1] >> 32) != seq) {  // one of the last pairs the kernel stores
            if (++polls % POLL_CHECK == 0) {
                if (now_ns() > w->deadline_ns) return RESIDENT_TIMED_OUT;
                if (w->ctl[RESIDENT_ALIVE] == 0 && (uint32_t)(out[count - 1] >> 32) != seq) return RESIDENT_ENDED;
            }
        }
        if (stamps) stamps[2] = now_ns();
        int64_t i = 0;
        for (; i < count; ++i) {  // one read of each pair: its sequence and its value together
            const uint64_t v = out[i];
            if ((uint32_t)(v >> 32) != seq) break;  // came before another pair: read again
            w->answer[i] = (uint32_t)v;
        }
        if (i == count) break;
        ++polls;
    }
    if (stamps) stamps[3] = now_ns();
    return RESIDENT_ANSWERED;
}

int resident_call(const struct resident_wire* w, int64_t* stamps) {
    if (stamps) stamps[0] = now_ns();
    resident_write(w);
    if (stamps) stamps[1] = now_ns();
    return resident_wait(w, stamps);
}
