/* One parse, several consumers (ntr.h): compare classifies a trace's samples into three views and
 * names perf's frames from the same pass; collect builds its conversion from the stream it writes. */
#include <string.h>

#include "ntr-int.h"

void ntr_fanout_init(ntr_fanout *f) { memset(f, 0, sizeof *f); }

int ntr_fanout_add(ntr_fanout *f, const ntr_callbacks *cb, void *ud) {
  if (!f || !cb || f->n == NTR_FANOUT_MAX) return NTR_EINVAL;
  f->to[f->n].cb = *cb;
  f->to[f->n].ud = ud;
  f->n++;
  return 0;
}

/* Each forwarder: every consumer with that member, in order, until one says stop. */
#define FORWARD(member, type)                                                                      \
  static int fan_##member(void *ud, type arg) {                                                    \
    ntr_fanout *f = ud;                                                                            \
    for (size_t i = 0; i < f->n; i++) {                                                            \
      if (!f->to[i].cb.member) continue;                                                           \
      int rc = f->to[i].cb.member(f->to[i].ud, arg);                                               \
      if (rc) return rc;                                                                           \
    }                                                                                              \
    return 0;                                                                                      \
  }

FORWARD(on_trace, const ntr_trace *)
FORWARD(on_metadata, const ntr_metadata *)
FORWARD(on_stack, const ntr_stack *)
FORWARD(on_event, const ntr_event *)
FORWARD(on_sequence_point, const ntr_sequence_point *)
FORWARD(on_thread, const ntr_thread *)

static int fan_on_block(void *ud, int kind, const uint8_t *body, size_t n) {
  ntr_fanout *f = ud;
  for (size_t i = 0; i < f->n; i++) {
    if (!f->to[i].cb.on_block) continue;
    int rc = f->to[i].cb.on_block(f->to[i].ud, kind, body, n);
    if (rc) return rc;
  }
  return 0;
}

static int fan_on_end(void *ud) {
  ntr_fanout *f = ud;
  for (size_t i = 0; i < f->n; i++) {
    if (!f->to[i].cb.on_end) continue;
    int rc = f->to[i].cb.on_end(f->to[i].ud);
    if (rc) return rc;
  }
  return 0;
}

void ntr_fanout_callbacks(const ntr_fanout *f, ntr_callbacks *cb) {
  memset(cb, 0, sizeof *cb);
  for (size_t i = 0; i < f->n; i++) {
    const ntr_callbacks *c = &f->to[i].cb;
    if (c->on_trace) cb->on_trace = fan_on_trace;
    if (c->on_metadata) cb->on_metadata = fan_on_metadata;
    if (c->on_stack) cb->on_stack = fan_on_stack;
    if (c->on_event) cb->on_event = fan_on_event;
    if (c->on_sequence_point) cb->on_sequence_point = fan_on_sequence_point;
    if (c->on_thread) cb->on_thread = fan_on_thread;
    if (c->on_end) cb->on_end = fan_on_end;
    if (c->on_block) cb->on_block = fan_on_block;
  }
}
