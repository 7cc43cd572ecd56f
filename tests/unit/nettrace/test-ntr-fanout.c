/* One parse, several consumers: every consumer sees every callback in order, a consumer's NULL
 * members are skipped, and the first to say stop stops the rest and the parse. */
#include <criterion/criterion.h>
#include <stdint.h>
#include <string.h>

#include "../../lib/ntr-writer.h"
#include "ntr.h"

#define NEVENTS 10

/* A trace of NEVENTS events of one provider on one thread, with a stack block, built here. */
static void build(ntrw *w) {
  static const ntrw_md md = {.id = 1, .provider = "Fan-Test", .event_id = 7, .name = "Tick", .opcode = -1,
                             .no_fields = 1};
  static const uint64_t f1[] = {0x1000, 0x2000};
  static const uint64_t *const frames[] = {f1};
  static const uint32_t nframes[] = {2};
  ntrw_trace t = {1000, 1000000000, 8, 42, 2, 1000000, NULL, 0};
  ntrw_init(w, 0);
  ntrw_trace_hdr(w, &t);
  ntrw_md_begin(w);
  ntrw_metadata(w, &md);
  ntrw_block_end(w);
  ntrw_stacks(w, 1, 1, frames, nframes);
  ntrw_ev_begin(w, 0);
  for (uint32_t i = 0; i < NEVENTS; i++) {
    ntrw_ev ev = {.metadata_id = 1, .seq = i + 1, .thread = 77, .capture_thread = 77, .stack_id = 1,
                  .ts = 2000 + i};
    ntrw_event(w, &ev);
  }
  ntrw_block_end(w);
  ntrw_end(w);
}

struct consumer {
  int traces, metadata, events, ends;
  int stop_after; /* stop on this event (0: never) */
  char order[64]; /* which consumer saw each event first, as letters */
  char name;
  char *log;      /* shared: the order in which consumers saw the events */
};

static int on_trace(void *ud, const ntr_trace *t) {
  (void)t;
  ((struct consumer *)ud)->traces++;
  return 0;
}
static int on_metadata(void *ud, const ntr_metadata *md) {
  (void)md;
  ((struct consumer *)ud)->metadata++;
  return 0;
}
static int on_event(void *ud, const ntr_event *ev) {
  struct consumer *c = ud;
  (void)ev;
  c->events++;
  size_t n = strlen(c->log);
  if (n < 63) c->log[n] = c->name;
  return c->stop_after && c->events == c->stop_after ? 1 : 0;
}
static int on_end(void *ud) {
  ((struct consumer *)ud)->ends++;
  return 0;
}

static int parse(ntr_fanout *f, const ntrw *w) {
  ntr_callbacks cb;
  ntr_fanout_callbacks(f, &cb);
  ntr_parser *p;
  cr_assert_eq(ntr_parser_new(&p, &cb, f, NULL), 0);
  int rc = ntr_parser_feed(p, w->buf, w->len);
  ntr_parser_free(p);
  return rc;
}

Test(fanout, every_consumer_sees_every_callback_in_order) {
  ntrw w;
  build(&w);
  char log[64] = "";
  struct consumer a = {.name = 'a', .log = log}, b = {.name = 'b', .log = log};
  ntr_callbacks all = {.on_trace = on_trace, .on_metadata = on_metadata, .on_event = on_event, .on_end = on_end};
  ntr_callbacks events_only = {.on_event = on_event}; /* the other members NULL: skipped */
  ntr_fanout f;
  ntr_fanout_init(&f);
  cr_assert_eq(ntr_fanout_add(&f, &all, &a), 0);
  cr_assert_eq(ntr_fanout_add(&f, &events_only, &b), 0);
  int rc = parse(&f, &w);
  cr_expect(rc == 0 || rc == NTR_EOF, "parse: %d", rc);
  cr_expect_eq(a.traces, 1);
  cr_expect_eq(a.metadata, 1);
  cr_expect_eq(a.events, NEVENTS);
  cr_expect_eq(a.ends, 1);
  cr_expect_eq(b.events, NEVENTS);
  cr_expect_eq(b.traces + b.metadata + b.ends, 0);
  /* per event: the first consumer added, then the second */
  cr_expect_str_eq(log, "abababababababababab");
  ntrw_release(&w);
}

Test(fanout, the_first_stop_stops_the_rest_and_the_parse) {
  ntrw w;
  build(&w);
  char log[64] = "";
  struct consumer a = {.name = 'a', .log = log, .stop_after = 3}, b = {.name = 'b', .log = log};
  ntr_callbacks cb = {.on_event = on_event, .on_end = on_end};
  ntr_fanout f;
  ntr_fanout_init(&f);
  cr_assert_eq(ntr_fanout_add(&f, &cb, &a), 0);
  cr_assert_eq(ntr_fanout_add(&f, &cb, &b), 0);
  cr_expect_eq(parse(&f, &w), NTR_ESTOPPED);
  cr_expect_eq(a.events, 3);
  cr_expect_eq(b.events, 2, "b never sees the event a stopped on");
  cr_expect_eq(a.ends + b.ends, 0);
  ntrw_release(&w);
}

Test(fanout, forwards_only_what_some_consumer_takes) {
  ntr_fanout f;
  ntr_fanout_init(&f);
  ntr_callbacks events = {.on_event = on_event}, ends = {.on_end = on_end}, cb;
  struct consumer c = {0};
  cr_assert_eq(ntr_fanout_add(&f, &events, &c), 0);
  cr_assert_eq(ntr_fanout_add(&f, &ends, &c), 0);
  ntr_fanout_callbacks(&f, &cb);
  cr_expect(cb.on_event && cb.on_end, "what a consumer takes is forwarded");
  cr_expect(!cb.on_stack && !cb.on_metadata && !cb.on_trace && !cb.on_sequence_point && !cb.on_thread,
            "what none takes stays NULL, so the parser can skip it");
}

Test(fanout, refuses_more_than_it_holds) {
  ntr_fanout f;
  ntr_fanout_init(&f);
  ntr_callbacks cb = {0};
  struct consumer c = {0};
  for (int i = 0; i < NTR_FANOUT_MAX; i++) cr_assert_eq(ntr_fanout_add(&f, &cb, &c), 0);
  cr_expect_eq(ntr_fanout_add(&f, &cb, &c), NTR_EINVAL);
  cr_expect_eq(f.n, NTR_FANOUT_MAX);
}
