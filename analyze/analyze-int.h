/* analyze/: what its files share beyond the public header (dnt-analyze.h). */
#ifndef DNT_ANALYZE_INT_H
#define DNT_ANALYZE_INT_H

#include "dnt-analyze.h"
#include "dnt-profile.h"

#define DNT__RUNTIME_PROVIDER "Microsoft-Windows-DotNETRuntime"

/* ms since the trace's sync time, from a timestamp in the trace's ticks (0 without a clock). */
double dnt__ms_of(uint64_t ts, uint64_t sync_qpc, uint64_t qpc_freq);

/* An integer field of a decoded payload, all 64 bits of it (a double holds 53: pointers and ids
 * would merge); 0 when absent or not an integer. */
uint64_t dnt__record_u64(const dnt_record *r, const char *name);

/* The schema's layout of a runtime event, remembered: a schema lookup costs more than decoding
 * the payload, and an analysis reads a few kinds of events many times. Caller-provided storage,
 * zeroed. NULL when the schema does not know the event. */
#define DNT__LAYOUTS 16
struct dnt__layouts {
  struct {
    uint32_t id, version, nfields;
    const ntr_field *fields;
  } v[DNT__LAYOUTS];
  size_t n;
};
const ntr_field *dnt__layout(struct dnt__layouts *c, const struct dnt_schema *schema, const ntr_metadata *md,
                             uint32_t *nfields);

/* event-stacks.c: the stacks of the events an analysis counts (exceptions thrown, waits for a
 * lock), kept in a profile (profile/: named through the trace's method table and rundown at the
 * end, written by its flame graph, folded, speedscope and pprof writers). Each stack gets one
 * more frame at its leaf that names what the analysis counts it under, its key (the exception
 * type and message, the lock): PerfView's "Throw(Type) message" frame. The frame is a made-up
 * address the trace's methods cannot cover, named by label(). Caller-provided storage, zeroed;
 * release with dnt__event_stacks_release. */
typedef void (*dnt__stack_label_fn)(void *ud, size_t key, char *buf, size_t cap);

struct dnt__key_stacks {
  dnt_analysis_stack *v; /* the key's stacks, heaviest first */
  size_t n;
  uint64_t other_count;  /* what did not fit in the `top` kept */
  double other_weight;
};

struct dnt__event_stacks {
  struct dnt_profile *prof;
  dnt__stack_label_fn label;
  void *ud;
  uint64_t *buf; /* a stack with its leaf frame, built for dnt_profile_add_stack */
  size_t cap;
  int oom;
  /* after finish: per key (nkeys), and all keys together (the leaf frame left out) */
  struct dnt__key_stacks *by_key, all;
  size_t nkeys;
};

/* 0, or -ENOMEM. by_time: the profile's writers weigh the stacks by their ms (else by counts);
 * what: what its samples are (dnt_profile_describe; static). */
int dnt__event_stacks_init(struct dnt__event_stacks *s, dnt__stack_label_fn label, void *ud, int by_time,
                           const char *what);
/* Every event goes through here: the method, module and thread events name the frames. 0, or
 * nonzero when out of memory. */
int dnt__event_stacks_on_trace(struct dnt__event_stacks *s, const ntr_trace *t);
int dnt__event_stacks_on_event(struct dnt__event_stacks *s, const ntr_event *ev);
int dnt__event_stacks_on_thread(struct dnt__event_stacks *s, const ntr_thread *t);
/* One event's stack (frames leaf first, borrowed; n may be 0: the leaf frame alone) counted under
 * key with weight ms. */
void dnt__event_stacks_add(struct dnt__event_stacks *s, size_t key, uint64_t thread, uint64_t time,
                           const uint64_t *frames, size_t n, double ms);
/* Names the frames and gathers each key's `top` heaviest stacks (by ms when by_time, else by
 * count), merged across threads, and the `top` heaviest of all. 0, or -ENOMEM. */
int dnt__event_stacks_finish(struct dnt__event_stacks *s, size_t nkeys, size_t top, int by_time);
void dnt__event_stacks_release(struct dnt__event_stacks *s);

/* The views' common part: one stack as text lines (a head line of lead and its count, then its
 * frames leaf first, under indent) or as a JSON object; with_ms: its weight is a wait. */
void dnt__write_stack_text(FILE *fp, const dnt_analysis_stack *st, const char *indent, const char *lead, int with_ms);
void dnt__write_stack_json(FILE *fp, const dnt_analysis_stack *st, int with_ms);

#endif
