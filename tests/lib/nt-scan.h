/* A small structural reader of NetTrace V4/V5 files for the tests of `collect`, independent of
 * the product's parser: it walks the FastSerialization objects, decodes the compressed event
 * headers, and counts events per provider and per thread. */
#ifndef DNT_TEST_NT_SCAN_H
#define DNT_TEST_NT_SCAN_H

#include <stddef.h>
#include <stdint.h>

#define NT_SCAN_MAX 256

struct nt_scan {
  char needle[64];        /* input: an ASCII word looked for, as UTF-16, in every event payload */
  uint64_t window_lo, window_hi; /* input: a span of timestamps (ticks) whose events are counted
                                    apart (in_window); none when window_hi is 0 */
  int magic_ok;           /* starts with Nettrace + !FastSerialization.1 */
  int complete;           /* every object whole and the final NullReference tag present */
  size_t stopped_at;      /* offset where a structural problem or the end of data stopped it */
  char problem[128];      /* "" for a complete stream */
  int trace_objects, blocks;
  uint32_t pointer_size;
  uint32_t sampling_ns;    /* the Trace object's expected sampling interval */
  uint16_t start_time[8];  /* the Trace object's SYSTEMTIME (UTC): y, month, weekday, day, h, m, s, ms */
  uint64_t qpc_frequency;  /* the Trace object's clock: ticks per second */
  /* metadata id -> provider name */
  struct { uint32_t id; char provider[128]; uint32_t event_id; } meta[NT_SCAN_MAX];
  int nmeta;
  /* events per (provider, event id, thread) */
  struct {
    char provider[128];
    uint32_t event_id;
    uint64_t thread, count, needle_hits, in_window;
    uint64_t first_ts, last_ts; /* the earliest and latest timestamps (ticks) */
  } counts[NT_SCAN_MAX * 4];
  int ncounts;
  uint64_t events;
};

/* Scans a whole file in memory. Never reads past len. Only out->needle and out->window_* are read
 * on entry. */
void nt_scan(const uint8_t *p, size_t len, struct nt_scan *out);
/* Reads a file and scans it; -1 if the file cannot be read. */
int nt_scan_file(const char *path, struct nt_scan *out);
/* The sum over threads of the span from the first to the last event of provider and event_id on
 * each, in milliseconds. */
double nt_scan_spans_ms(const struct nt_scan *s, const char *provider, uint32_t event_id);
/* Events of provider (event id, or any when < 0) whose payload holds the needle. */
uint64_t nt_scan_needle_hits(const struct nt_scan *s, const char *provider, long event_id);
/* Events of provider (and event id, or any when event_id < 0) on thread (any when thread == 0). */
uint64_t nt_scan_count(const struct nt_scan *s, const char *provider, long event_id, uint64_t thread);
/* The same, of the events stamped inside [window_lo, window_hi]. */
uint64_t nt_scan_count_in_window(const struct nt_scan *s, const char *provider, long event_id, uint64_t thread);

/* The events TraceEvent's thread time counts as a thread's samples: the SampleProfiler's and the
 * runtime's allocation events (GCAllocationTick 10, GCSampledObjectAllocationHigh/Low 20, 32).
 * Per thread, into out (cap entries at most): its count, its first and last timestamps. Returns
 * how many threads. */
struct nt_scan_thread {
  uint64_t thread, count, first_ts, last_ts;
};
size_t nt_scan_sample_threads(const struct nt_scan *s, struct nt_scan_thread *out, size_t cap);

#endif
