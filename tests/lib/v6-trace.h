/* A small NetTrace V6 file whose every value is known by construction, for the tests of what
 * dntrace shows of a trace (info, the timelines): a header (pid 4321, 6 CPUs, 2 ms expected
 * sampling), three threads (OS ids 4001 "cpu-work", 4002 "blocking-work", 4003 unnamed) and ten
 * events 2 ms apart (event k at 2000 + k * 2 000 000 ns, on a 1 GHz clock):
 *   k 0-4: cpu-work's samples, stacks A B A A B, written to the file out of time order (2 0 4 1 3)
 *   k 5-7: blocking-work's samples, stack B
 *   k 8-9: thread 4003, My-Provider event 7 "Tick" (no stack)
 * Stacks, root first: A = 0x9000 -> 0x1100, B = 0x9000 -> 0x2200 (no method events: the frames
 * are named by address). */
#ifndef DNT_TEST_V6_TRACE_H
#define DNT_TEST_V6_TRACE_H

#define V6_PID 4321
#define V6_ROOT "?!0x9000"
#define V6_LEAF_A "?!0x1100"
#define V6_LEAF_B "?!0x2200"

/* Writes the trace to path: 0, or -1 when the file cannot be written. */
int dnt_write_v6_trace(const char *path);

#endif
