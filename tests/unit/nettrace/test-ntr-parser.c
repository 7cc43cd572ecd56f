/* test-ntr-parser.c: the nettrace parser against synthetic streams from tests/lib/ntr-writer.c.
 * Expected values come from what each test wrote, never from the parser's own output. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../lib/ntr-transcript.h"
#include "../../lib/ntr-writer.h"
#include "ntr.h"

/* ---- a synthetic trace ---- */

#define NEV 40

static const ntrw_field point_fields[] = {{"X", 9, NULL, NULL, 0, 0}, {"Y", 14, NULL, NULL, 0, 0}};
static const ntrw_field nested_fields[] = {
    {"Name", 18, NULL, NULL, 0, 0},
    {"Where", 1, NULL, point_fields, 2, 0},
    {"Count", 12, NULL, NULL, 0, 0},
};
static const ntrw_field int_el = {"", 9, NULL, NULL, 0, 0};
static const ntrw_field obj_el = {"", 1, NULL, point_fields, 2, 0};
static const ntrw_field array_fields[] = {
    {"Values", 19, &int_el, NULL, 0, 0},
    {"Points", 19, &obj_el, NULL, 0, 0},
    {"Tag", 18, NULL, NULL, 0, 0},
};
static const ntrw_field u8_el = {"", 6, NULL, NULL, 0, 0};
static const ntrw_field v6_fields[] = {
    {"Id", 21, NULL, NULL, 0, 0},
    {"Raw", 22, &u8_el, NULL, 0, 4},
    {"Where", 1, NULL, point_fields, 2, 0},
};

static ntrw_md mds[] = {
    {1, "Demo-Provider", 7, "Nested", 0xf0, 1, 4, -1, nested_fields, 3, 0, 0},
    {2, "Demo-Provider", 8, "Arrays", 0x1, 0, 5, 11, array_fields, 3, 1, 0},
    {3, "Microsoft-Windows-DotNETRuntime", 80, "", 0x8000, 1, 4, -1, NULL, 0, 0, 1},
};

static uint64_t f1[] = {0x7f0000001000ULL, 0x7f0000002000ULL, 0x7f0000003000ULL};
static uint64_t f2[] = {0x7f00000a0000ULL};
static uint64_t f3[] = {0};
static const uint64_t *frames[] = {f1, f2, f3};
static const uint32_t nframes[] = {3, 1, 0};

static uint8_t payloads[NEV][24];
static uint64_t ip_mask = ~0ULL; /* 32-bit traces keep the low half of each IP */
static ntrw_ev evs[NEV];

/* Fills evs: two capture threads interleaved in runs, varied fields, a gap-free sequence. */
static void make_events(int v6) {
  uint32_t seq[2] = {0, 0};
  int i;
  for (i = 0; i < NEV; i++) {
    ntrw_ev *e = &evs[i];
    int th = (i / 5) % 2;
    memset(e, 0, sizeof(*e));
    e->metadata_id = (uint32_t)(1 + i % 3);
    e->seq = ++seq[th];
    e->capture_thread = v6 ? (uint64_t)(th + 1) : (uint64_t)(1000 + th);
    e->thread = (i % 7 == 3) ? e->capture_thread + 5 : e->capture_thread;
    e->proc = (uint32_t)(i % 4);
    e->stack_id = (uint32_t)(i % 4); /* 0 = none, 1..3 */
    e->ts = 1000000 + (uint64_t)i * 37 + (uint64_t)(i % 3);
    if (!v6 && i % 6 == 1) {
      e->activity[0] = (uint8_t)i;
      e->activity[15] = 0xaa;
    }
    if (!v6 && i % 9 == 2)
      e->related[3] = (uint8_t)i;
    if (v6 && i % 5 == 2)
      e->label_list = 1;
    e->sorted = i % 8 == 0;
    e->payload_size = (uint32_t)(i % 24);
    memset(payloads[i], 0x30 + i, sizeof(payloads[i]));
    e->payload = payloads[i];
  }
}

/* V4/V5 stream: header, metadata, stacks, events in two blocks (compressed and not) split by a
 * sequence point after which stack ids restart, then the end tag. */
static void build_v4(ntrw *w, uint32_t ptr, int with_end) {
  ntrw_trace t = {123456789, 1000000000, ptr, 4321, 8, 1000000, NULL, 0};
  uint64_t sp_th[2] = {1000, 1001};
  uint32_t sp_seq[2];
  int i;
  make_events(0);
  ntrw_init(w, 0);
  ntrw_trace_hdr(w, &t);
  ntrw_md_begin(w);
  for (i = 0; i < 3; i++)
    ntrw_metadata(w, &mds[i]);
  ntrw_block_end(w);
  ntrw_stacks(w, 1, 3, frames, nframes);
  ntrw_ev_begin(w, 1);
  for (i = 0; i < NEV / 2; i++)
    ntrw_event(w, &evs[i]);
  ntrw_block_end(w);
  sp_seq[0] = 0;
  sp_seq[1] = 0;
  for (i = 0; i < NEV / 2; i++)
    sp_seq[evs[i].capture_thread - 1000] = evs[i].seq;
  ntrw_sp(w, 2000000, 0, 2, sp_th, sp_seq);
  ntrw_stacks(w, 1, 3, frames, nframes);
  ntrw_ev_begin(w, 0);
  for (i = NEV / 2; i < NEV; i++)
    ntrw_event(w, &evs[i]);
  ntrw_block_end(w);
  if (with_end)
    ntrw_end(w);
}

static void build_v6(ntrw *w) {
  static const char *kv[] = {"ProcessId", "777", "HardwareThreadCount", "16",
                             "ExpectedCPUSamplingRate", "1000000", "Custom", "x"};
  ntrw_trace t = {5555, 10000000, 8, 0, 0, 0, kv, 4};
  static ntrw_md m6[] = {
      {1, "V6-Provider", 1, "Ev1", 0x10, 2, 4, 3, v6_fields, 3, 0, 0},
      {2, "V6-Provider", 2, "Ev2", 0x20, 0, 5, -1, point_fields, 2, 0, 0},
      {3, "V6-Provider", 3, "Ev3", 0, 0, 1, -1, NULL, 0, 0, 0},
  };
  uint8_t act[16] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16};
  uint64_t sp_th[2] = {1, 2};
  uint32_t sp_seq[2] = {0, 0};
  const uint8_t unknown[5] = {1, 2, 3, 4, 5};
  int i;
  make_events(1);
  ntrw_init(w, 1);
  ntrw_trace_hdr(w, &t);
  ntrw_thread(w, 1, 9001, "main");
  ntrw_thread(w, 2, 9002, NULL);
  ntrw_thread(w, 6, 9006, "worker");
  ntrw_thread(w, 7, 9007, "other");
  ntrw_md_begin(w);
  for (i = 0; i < 3; i++)
    ntrw_metadata(w, &m6[i]);
  ntrw_block_end(w);
  ntrw_raw_v6_block(w, 77, unknown, sizeof(unknown));
  ntrw_label_list(w, 1, act, "k", "v");
  ntrw_stacks(w, 1, 3, frames, nframes);
  ntrw_ev_begin(w, 1);
  for (i = 0; i < NEV / 2; i++)
    ntrw_event(w, &evs[i]);
  ntrw_block_end(w);
  for (i = 0; i < NEV / 2; i++)
    sp_seq[evs[i].capture_thread - 1] = evs[i].seq;
  ntrw_sp(w, 2000000, 0, 2, sp_th, sp_seq);
  ntrw_label_list(w, 1, NULL, "after", "sp");
  ntrw_stacks(w, 1, 3, frames, nframes);
  ntrw_ev_begin(w, 0);
  for (i = NEV / 2; i < NEV; i++)
    ntrw_event(w, &evs[i]);
  ntrw_block_end(w);
  ntrw_remove_thread(w, 7, 0);
  ntrw_end(w);
}

/* ---- helpers ---- */

static char *run_text(const uint8_t *b, size_t n, long chunk, unsigned seed, int *rc) {
  ntr_transcript t;
  char *s;
  ntr_transcript_init(&t, 1);
  *rc = ntr_transcript_run(&t, b, n, chunk, seed, NULL, NULL, 0);
  s = strdup(t.text ? t.text : "");
  ntr_transcript_release(&t);
  return s;
}

static void split_invariance(const uint8_t *b, size_t n) {
  static const long chunks[] = {1, 2, 3, 7, 64, 4096, -5, -100, -3000};
  int rc0, rc;
  char *whole = run_text(b, n, 0, 0, &rc0);
  size_t i;
  cr_assert_eq(rc0, 0, "whole-buffer parse failed: %s", whole);
  for (i = 0; i < sizeof(chunks) / sizeof(chunks[0]); i++) {
    unsigned seed;
    for (seed = 1; seed <= (chunks[i] < 0 ? 3u : 1u); seed++) {
      char *s = run_text(b, n, chunks[i], seed, &rc);
      cr_assert_eq(rc, rc0, "chunk %ld", chunks[i]);
      cr_assert_str_eq(s, whole, "chunk %ld seed %u differs", chunks[i], seed);
      free(s);
    }
  }
  free(whole);
}

/* ---- what the parser reports equals what was written ---- */

struct seen {
  ntr_trace trace;
  int ntrace, nmd, nstack, nev, nsp, nend;
  uint32_t md_ids[8];
  char md_names[8][64];
  ntrw_ev ev[NEV];
  uint32_t ev_stack_frames[NEV];
  uint64_t ev_leaf[NEV];
  uint8_t ev_payload[NEV][24];
  int field_checks;
};

static int s_trace(void *ud, const ntr_trace *t) {
  struct seen *s = ud;
  s->trace = *t;
  s->ntrace++;
  return 0;
}
static int s_md(void *ud, const ntr_metadata *m) {
  struct seen *s = ud;
  if (s->nmd < 8) {
    s->md_ids[s->nmd] = m->id;
    snprintf(s->md_names[s->nmd], 64, "%s/%s", m->provider, m->event_name);
  }
  s->nmd++;
  if (m->id == 1) {
    /* Nested: Name:String, Where:Object{X:Int32,Y:Double}, Count:UInt64 */
    cr_assert_eq(m->nfields, 3);
    cr_assert_str_eq(m->fields[0].name, "Name");
    cr_assert_eq(m->fields[0].type, NTR_TYPE_STRING);
    cr_assert_eq(m->fields[1].type, NTR_TYPE_OBJECT);
    cr_assert_eq(m->fields[1].nfields, 2);
    cr_assert_str_eq(m->fields[1].fields[1].name, "Y");
    cr_assert_eq(m->fields[1].fields[1].type, NTR_TYPE_DOUBLE);
    cr_assert_eq(m->keywords, 0xf0);
    cr_assert_eq(m->level, 4);
    s->field_checks++;
  } else if (m->id == 2) {
    cr_assert_eq(m->fields_from_v2params, 1);
    cr_assert_eq(m->nfields, 3);
    cr_assert_eq(m->fields[0].type, NTR_TYPE_ARRAY);
    cr_assert_not_null(m->fields[0].element);
    cr_assert_eq(m->fields[0].element->type, NTR_TYPE_INT32);
    cr_assert_eq(m->fields[1].element->type, NTR_TYPE_OBJECT);
    cr_assert_eq(m->fields[1].element->nfields, 2);
    cr_assert_str_eq(m->fields[1].element->fields[0].name, "X");
    cr_assert_eq(m->has_opcode, 1);
    cr_assert_eq(m->opcode, 11);
    s->field_checks++;
  } else if (m->id == 3) {
    cr_assert_eq(m->nfields, 0);
    cr_assert_str_eq(m->event_name, "");
    cr_assert_eq(m->event_id, 80);
    s->field_checks++;
  }
  return 0;
}
static int s_stack(void *ud, const ntr_stack *st) {
  struct seen *s = ud;
  uint32_t k, i = st->id - 1;
  cr_assert_lt(i, 3);
  cr_assert_eq(st->nframes, nframes[i]);
  for (k = 0; k < st->nframes; k++)
    cr_assert_eq(st->frames[k], frames[i][k] & ip_mask);
  s->nstack++;
  return 0;
}
static int s_event(void *ud, const ntr_event *e) {
  struct seen *s = ud;
  ntrw_ev *o;
  cr_assert_lt(s->nev, NEV);
  o = &s->ev[s->nev];
  o->metadata_id = e->metadata_id;
  o->seq = e->sequence;
  o->thread = e->thread_index;
  o->capture_thread = e->capture_thread_index;
  o->proc = e->processor;
  o->stack_id = e->stack_id;
  o->ts = e->timestamp;
  memcpy(o->activity, e->activity_id, 16);
  memcpy(o->related, e->related_activity_id, 16);
  o->label_list = e->label_list_id;
  o->sorted = e->sorted;
  o->payload_size = e->payload_size;
  memcpy(s->ev_payload[s->nev], e->payload, e->payload_size);
  s->ev_stack_frames[s->nev] = e->stack ? e->stack->nframes : 0;
  s->ev_leaf[s->nev] = e->stack && e->stack->nframes ? e->stack->frames[0] : 0;
  cr_assert_not_null(e->metadata);
  cr_assert_eq(e->metadata->id, e->metadata_id);
  s->nev++;
  return 0;
}
static int s_sp(void *ud, const ntr_sequence_point *sp) {
  struct seen *s = ud;
  cr_assert_eq(sp->timestamp, 2000000);
  cr_assert_eq(sp->nthreads, 2);
  s->nsp++;
  return 0;
}
static int s_end(void *ud) {
  ((struct seen *)ud)->nend++;
  return 0;
}
static const ntr_callbacks seen_cb = {s_trace, s_md, s_stack, s_event, s_sp, NULL, s_end, NULL};

static void check_seen(struct seen *s, int v6) {
  int i;
  cr_assert_eq(s->ntrace, 1);
  cr_assert_eq(s->nmd, 3);
  cr_assert_eq(s->nstack, 6);
  cr_assert_eq(s->nev, NEV);
  cr_assert_eq(s->nsp, 1);
  cr_assert_eq(s->nend, 1);
  for (i = 0; i < NEV; i++) {
    const ntrw_ev *w = &evs[i], *g = &s->ev[i];
    cr_assert_eq(g->metadata_id, w->metadata_id, "event %d", i);
    cr_assert_eq(g->seq, w->seq, "event %d seq", i);
    cr_assert_eq(g->thread, w->thread, "event %d", i);
    cr_assert_eq(g->capture_thread, w->capture_thread, "event %d", i);
    cr_assert_eq(g->proc, w->proc, "event %d", i);
    cr_assert_eq(g->stack_id, w->stack_id, "event %d", i);
    cr_assert_eq(g->ts, w->ts, "event %d ts", i);
    cr_assert_eq(g->sorted, w->sorted, "event %d sorted", i);
    cr_assert_eq(g->payload_size, w->payload_size, "event %d", i);
    cr_assert_eq(memcmp(s->ev_payload[i], w->payload, w->payload_size), 0);
    if (!v6) {
      cr_assert_eq(memcmp(g->activity, w->activity, 16), 0, "event %d activity", i);
      cr_assert_eq(memcmp(g->related, w->related, 16), 0, "event %d related", i);
    } else {
      cr_assert_eq(g->label_list, w->label_list);
    }
    if (w->stack_id) {
      cr_assert_eq(s->ev_stack_frames[i], nframes[w->stack_id - 1], "event %d", i);
      if (nframes[w->stack_id - 1])
        cr_assert_eq(s->ev_leaf[i], frames[w->stack_id - 1][0] & ip_mask);
    }
  }
}

Test(ntr_values, v4_matches_what_was_written) {
  ntrw w;
  struct seen s;
  ntr_parser *p;
  ntr_stats st;
  memset(&s, 0, sizeof(s));
  build_v4(&w, 8, 1);
  cr_assert_eq(ntr_parser_new(&p, &seen_cb, &s, NULL), 0);
  cr_assert_eq(ntr_parser_feed(p, w.buf, w.len), NTR_EOF);
  cr_assert_eq(ntr_parser_finish(p), 0);
  check_seen(&s, 0);
  cr_assert_eq(s.trace.format, NTR_FORMAT_V4);
  cr_assert_eq(s.trace.pointer_size, 8);
  cr_assert_eq(s.trace.process_id, 4321);
  cr_assert_eq(s.trace.cpu_count, 8);
  cr_assert_eq(s.trace.qpc_frequency, 1000000000);
  cr_assert_eq(s.trace.sync_time_qpc, 123456789);
  cr_assert_eq(s.trace.start_time[0], 2024);
  cr_assert_eq(s.field_checks, 3);
  ntr_parser_stats(p, &st);
  cr_assert_eq(st.events, NEV);
  cr_assert_eq(st.dropped_events, 0);
  cr_assert_eq(st.bytes, w.len);
  cr_assert_eq(st.metadata, 3);
  cr_assert_eq(st.stacks, 6);
  cr_assert_eq(st.sequence_points, 1);
  cr_assert_eq(st.blocks, 7); /* Trace, md, stack, events, sp, stack, events */
  cr_assert_eq(st.carry_peak, 0, "a whole buffer needs no carry");
  ntr_parser_free(p);
  ntrw_release(&w);
}

Test(ntr_values, v4_32bit_pointers) {
  ntrw w;
  struct seen s;
  ntr_parser *p;
  memset(&s, 0, sizeof(s));
  build_v4(&w, 4, 1);
  ip_mask = 0xffffffffu;
  cr_assert_eq(ntr_parser_new(&p, &seen_cb, &s, NULL), 0);
  cr_assert_eq(ntr_parser_feed(p, w.buf, w.len), NTR_EOF);
  cr_assert_eq(ntr_parser_finish(p), 0);
  check_seen(&s, 0);
  cr_assert_eq(s.trace.pointer_size, 4);
  ntr_parser_free(p);
  ntrw_release(&w);
}

static int v6_event(void *ud, const ntr_event *e) {
  struct seen *s = ud;
  /* thread indexes resolve to the OS ids of the thread table */
  if (e->capture_thread_index == 1)
    cr_assert_eq(e->capture_thread_id, 9001);
  if (e->thread_index == 6)
    cr_assert_eq(e->thread_id, 9006);
  if (e->label_list_id == 1 && s->nev < NEV / 2) {
    cr_assert_eq(e->nlabels, 2);
    cr_assert_eq(e->activity_id[0], 1);
    cr_assert_eq(e->activity_id[15], 16);
    cr_assert_str_eq(e->labels[1].key, "k");
  } else if (e->label_list_id == 1) {
    cr_assert_eq(e->nlabels, 1, "the label list was redefined after the sequence point");
    cr_assert_str_eq(e->labels[0].value, "sp");
  }
  return s_event(ud, e);
}
static int v6_md(void *ud, const ntr_metadata *m) {
  struct seen *s = ud;
  s->nmd++;
  if (m->id == 1) {
    cr_assert_eq(m->nfields, 3);
    cr_assert_eq(m->fields[0].type, NTR_TYPE_VARUINT);
    cr_assert_eq(m->fields[1].type, NTR_TYPE_FIXED_ARRAY);
    cr_assert_eq(m->fields[1].fixed_count, 4);
    cr_assert_eq(m->fields[1].element->type, NTR_TYPE_BYTE);
    cr_assert_eq(ntr_field_fixed_size(&m->fields[1]), 4);
    cr_assert_eq(m->fields[2].nfields, 2);
    cr_assert_eq(ntr_field_fixed_size(&m->fields[2]), 12);
    cr_assert_eq(m->opcode, 3);
    cr_assert_eq(m->keywords, 0x10);
    cr_assert_eq(m->version, 2);
    cr_assert_str_eq(m->event_name, "Ev1");
    s->field_checks++;
  }
  return 0;
}

Test(ntr_values, v6_matches_what_was_written) {
  static const ntr_callbacks cb = {s_trace, v6_md, s_stack, v6_event, s_sp, NULL, s_end, NULL};
  ntrw w;
  struct seen s;
  ntr_parser *p;
  ntr_stats st;
  memset(&s, 0, sizeof(s));
  build_v6(&w);
  cr_assert_eq(ntr_parser_new(&p, &cb, &s, NULL), 0);
  cr_assert_eq(ntr_parser_feed(p, w.buf, w.len), NTR_EOF, "%s", ntr_parser_errmsg(p));
  cr_assert_eq(ntr_parser_finish(p), 0);
  check_seen(&s, 1);
  cr_assert_eq(s.trace.format, NTR_FORMAT_V6);
  cr_assert_eq(s.trace.process_id, 777);
  cr_assert_eq(s.trace.cpu_count, 16);
  cr_assert_eq(s.trace.sampling_interval_ns, 1000000);
  cr_assert_eq(s.trace.nkeyvalues, 4);
  cr_assert_eq(s.field_checks, 1);
  ntr_parser_stats(p, &st);
  cr_assert_eq(st.skipped_blocks, 1, "the unknown block kind 77 is skipped");
  cr_assert_eq(st.dropped_events, 0);
  ntr_parser_free(p);
  ntrw_release(&w);
}

/* ---- split invariance ---- */

Test(ntr_split, v4_any_split_same_transcript) {
  ntrw w;
  build_v4(&w, 8, 1);
  split_invariance(w.buf, w.len);
  ntrw_release(&w);
}

Test(ntr_split, v4_32bit_any_split) {
  ntrw w;
  build_v4(&w, 4, 1);
  split_invariance(w.buf, w.len);
  ntrw_release(&w);
}

Test(ntr_split, v6_any_split_same_transcript) {
  ntrw w;
  build_v6(&w);
  split_invariance(w.buf, w.len);
  ntrw_release(&w);
}

/* ---- truncation ---- */

static void truncation_sweep(const uint8_t *b, size_t n) {
  ntr_transcript full;
  size_t cut;
  ntr_transcript_init(&full, 0);
  cr_assert_eq(ntr_transcript_run(&full, b, n, 0, 0, NULL, NULL, 0), 0);
  for (cut = 0; cut <= n; cut++) {
    ntr_transcript t;
    char msg[256];
    int rc;
    ntr_transcript_init(&t, 0);
    rc = ntr_transcript_run(&t, b, cut, cut % 2 ? 7 : 0, 0, NULL, msg, sizeof(msg));
    if (cut == n) {
      cr_assert_eq(rc, 0);
    } else {
      char want[64];
      cr_assert_eq(rc, NTR_ETRUNCATED, "cut at %zu: %s (%s)", cut, ntr_err_name(rc), msg);
      snprintf(want, sizeof(want), "truncated at byte %zu", cut);
      cr_assert(strstr(msg, want), "cut at %zu: message '%s'", cut, msg);
      cr_assert_eq(t.ends, 0);
    }
    /* Events before the cut are delivered, never more than the whole stream's. */
    cr_assert_leq(t.events, full.events);
    ntr_transcript_release(&t);
  }
  ntr_transcript_release(&full);
}

Test(ntr_truncation, v4_every_prefix) {
  ntrw w;
  build_v4(&w, 8, 1);
  truncation_sweep(w.buf, w.len);
  ntrw_release(&w);
}

Test(ntr_truncation, v6_every_prefix) {
  ntrw w;
  build_v6(&w);
  truncation_sweep(w.buf, w.len);
  ntrw_release(&w);
}

Test(ntr_truncation, events_before_the_cut_are_delivered) {
  ntrw w;
  ntr_transcript t;
  size_t first_block_end;
  build_v4(&w, 8, 0);
  /* Without the end tag: every event delivered, finish says truncated at the very end. */
  ntr_transcript_init(&t, 0);
  cr_assert_eq(ntr_transcript_run(&t, w.buf, w.len, 0, 0, NULL, NULL, 0), NTR_ETRUNCATED);
  cr_assert_eq(t.events, NEV);
  ntr_transcript_release(&t);
  /* Cut one byte short of the second event block's end: the first block's events are there. */
  first_block_end = w.len - 1;
  ntr_transcript_init(&t, 0);
  cr_assert_eq(ntr_transcript_run(&t, w.buf, first_block_end, 3, 0, NULL, NULL, 0),
               NTR_ETRUNCATED);
  cr_assert_eq(t.events, NEV / 2);
  ntr_transcript_release(&t);
  ntrw_release(&w);
}

/* ---- dropped events ---- */

Test(ntr_drops, sequence_gap_counts_exactly) {
  ntrw w;
  ntr_parser *p;
  ntr_stats st;
  ntrw_trace t = {0, 1000, 8, 1, 1, 0, NULL, 0};
  ntrw_md m = {1, "P", 1, "E", 0, 0, 4, -1, NULL, 0, 0, 1};
  ntrw_ev e;
  uint64_t th = 77;
  uint32_t seq;
  ntrw_init(&w, 0);
  ntrw_trace_hdr(&w, &t);
  ntrw_md_begin(&w);
  ntrw_metadata(&w, &m);
  ntrw_block_end(&w);
  memset(&e, 0, sizeof(e));
  e.metadata_id = 1;
  e.capture_thread = e.thread = th;
  ntrw_ev_begin(&w, 1);
  for (seq = 1; seq <= 10; seq++) {
    e.seq = seq < 5 ? seq : seq + 13; /* 13 events lost after seq 4 */
    e.ts += 10;
    ntrw_event(&w, &e);
  }
  ntrw_block_end(&w);
  /* The sequence point says the thread tried to write 7 more than we saw. */
  seq = e.seq + 7;
  ntrw_sp(&w, 100000, 0, 1, &th, &seq);
  /* After the SP the numbering continues from the SP's value: no extra drops. */
  ntrw_ev_begin(&w, 0);
  e.seq = seq + 1;
  ntrw_event(&w, &e);
  ntrw_block_end(&w);
  ntrw_end(&w);
  cr_assert_eq(ntr_parser_new(&p, NULL, NULL, NULL), 0);
  cr_assert_eq(ntr_parser_feed(p, w.buf, w.len), NTR_EOF);
  cr_assert_eq(ntr_parser_finish(p), 0);
  ntr_parser_stats(p, &st);
  cr_assert_eq(st.events, 11);
  cr_assert_eq(st.dropped_events, 13 + 7);
  ntr_parser_free(p);
  ntrw_release(&w);
}

Test(ntr_drops, wrap_at_2_pow_32_is_not_a_drop) {
  ntrw w;
  ntr_parser *p;
  ntr_stats st;
  ntrw_trace t = {0, 1000, 8, 1, 1, 0, NULL, 0};
  ntrw_md m = {1, "P", 1, "E", 0, 0, 4, -1, NULL, 0, 0, 1};
  ntrw_ev e;
  int i;
  ntrw_init(&w, 0);
  ntrw_trace_hdr(&w, &t);
  ntrw_md_begin(&w);
  ntrw_metadata(&w, &m);
  ntrw_block_end(&w);
  memset(&e, 0, sizeof(e));
  e.metadata_id = 1;
  e.capture_thread = e.thread = 5;
  ntrw_ev_begin(&w, 1);
  e.seq = 0xfffffffeu;
  for (i = 0; i < 4; i++) { /* fffffffe ffffffff 0 1 */
    ntrw_event(&w, &e);
    e.seq++;
  }
  e.seq += 2; /* skip 2 and 3 */
  ntrw_event(&w, &e);
  ntrw_block_end(&w);
  ntrw_end(&w);
  cr_assert_eq(ntr_parser_new(&p, NULL, NULL, NULL), 0);
  cr_assert_eq(ntr_parser_feed(p, w.buf, w.len), NTR_EOF);
  ntr_parser_stats(p, &st);
  cr_assert_eq(st.dropped_events, 2);
  ntr_parser_free(p);
  ntrw_release(&w);
}

/* ---- stack references ---- */

/* What the events saw of their stacks: id, frame count, first frame (0 when none), and
 * whether the frames pointer was NULL. The frames are also compared with memcmp, as a
 * consumer would: under UBSan that is the check that a NULL pointer never reaches it. */
struct seen_stacks {
  int n, null_frames, empty_on_stack;
  uint32_t stack_id[8], nframes[8];
  int have[8];
  uint64_t first[8];
};

static int seen_event(void *ud, const ntr_event *ev) {
  struct seen_stacks *s = ud;
  static const uint64_t none[1];
  if (s->n >= 8)
    return 1;
  s->stack_id[s->n] = ev->stack_id;
  s->have[s->n] = ev->stack != NULL;
  if (ev->stack) {
    s->nframes[s->n] = ev->stack->nframes;
    s->null_frames += ev->stack->frames == NULL;
    if (ev->stack->frames && ev->stack->nframes == 0)
      cr_assert_eq(memcmp(ev->stack->frames, none, 0), 0);
    s->first[s->n] = ev->stack->nframes ? ev->stack->frames[0] : 0;
  }
  s->n++;
  return 0;
}

static int seen_stack(void *ud, const ntr_stack *st) {
  struct seen_stacks *s = ud;
  s->null_frames += st->frames == NULL;
  s->empty_on_stack += st->nframes == 0;
  return 0;
}

static void stack_event(ntrw *w, uint32_t seq, uint32_t stack_id) {
  ntrw_ev e;
  memset(&e, 0, sizeof(e));
  e.metadata_id = 1;
  e.thread = e.capture_thread = 7;
  e.seq = seq;
  e.stack_id = stack_id;
  e.ts = 100 + seq;
  ntrw_event(w, &e);
}

static void parse_stacks(const ntrw *w, struct seen_stacks *s) {
  static const ntr_callbacks cb = {NULL, NULL, seen_stack, seen_event, NULL, NULL, NULL, NULL};
  ntr_parser *p;
  memset(s, 0, sizeof(*s));
  cr_assert_eq(ntr_parser_new(&p, &cb, s, NULL), 0);
  cr_assert_eq(ntr_parser_feed(p, w->buf, w->len), NTR_EOF, "%s", ntr_parser_errmsg(p));
  cr_assert_eq(ntr_parser_finish(p), 0);
  ntr_parser_free(p);
}

/* The runtime stores an event without a stack as an empty stack; a first stack block of only
 * those has no frames at all. Each event must still get its (empty) stack, with a usable
 * pointer. Run it under UBSan (build-clang/): the frames were NULL + 0 there. */
static void empty_stacks_case(int v6) {
  static const ntrw_field f[] = {{"X", 9, NULL, NULL, 0, 0}};
  ntrw_md md = {1, "P", 1, "E", 0, 0, 4, -1, f, 1, 0, 0};
  const ntrw_trace t4 = {0, 1000, 8, 1, 1, 0, NULL, 0};
  const uint64_t *fr[3] = {NULL, NULL, NULL};
  const uint32_t n[3] = {0, 0, 0};
  uint64_t ips[2] = {0x1000, 0x2000};
  const uint64_t *fr2[1] = {ips};
  const uint32_t n2[1] = {2};
  struct seen_stacks s;
  ntrw w;
  ntrw_init(&w, v6);
  ntrw_trace_hdr(&w, &t4);
  if (v6)
    ntrw_thread(&w, 7, 700, NULL);
  ntrw_md_begin(&w);
  ntrw_metadata(&w, &md);
  ntrw_block_end(&w);
  ntrw_stacks(&w, 1, 3, fr, n);
  ntrw_ev_begin(&w, 1);
  stack_event(&w, 1, 2);
  stack_event(&w, 2, 3);
  ntrw_block_end(&w);
  ntrw_stacks(&w, 4, 1, fr2, n2);
  ntrw_ev_begin(&w, 0);
  stack_event(&w, 3, 1);
  stack_event(&w, 4, 4);
  ntrw_block_end(&w);
  ntrw_end(&w);
  parse_stacks(&w, &s);
  cr_assert_eq(s.n, 4);
  cr_assert_eq(s.empty_on_stack, 3);
  cr_assert_eq(s.null_frames, 0, "an empty stack's frames must not be NULL");
  cr_assert(s.have[0] && s.have[1] && s.have[2] && s.have[3]);
  cr_assert_eq(s.stack_id[0], 2);
  cr_assert_eq(s.nframes[0], 0);
  cr_assert_eq(s.nframes[1], 0);
  cr_assert_eq(s.nframes[2], 0);
  cr_assert_eq(s.nframes[3], 2);
  cr_assert_eq(s.first[3], 0x1000);
  ntrw_release(&w);
}

Test(ntr_stacks, block_of_only_empty_stacks_v4) { empty_stacks_case(0); }
Test(ntr_stacks, block_of_only_empty_stacks_v6) { empty_stacks_case(1); }

/* Ids out of sequence (a writer that does not number densely, or a second block reusing ids)
 * resolve through the hash index; an id never written gives no stack. */
Test(ntr_stacks, ids_out_of_sequence_resolve) {
  static const ntrw_field f[] = {{"X", 9, NULL, NULL, 0, 0}};
  ntrw_md md = {1, "P", 1, "E", 0, 0, 4, -1, f, 1, 0, 0};
  const ntrw_trace t4 = {0, 1000, 8, 1, 1, 0, NULL, 0};
  uint64_t a[1] = {0xa0}, b[1] = {0xb0}, c[1] = {0xc0}, d[1] = {0xd0};
  const uint64_t *fa[2] = {a, b}, *fb[2] = {c, d};
  const uint32_t n[2] = {1, 1};
  struct seen_stacks s;
  ntrw w;
  ntrw_init(&w, 0);
  ntrw_trace_hdr(&w, &t4);
  ntrw_md_begin(&w);
  ntrw_metadata(&w, &md);
  ntrw_block_end(&w);
  ntrw_stacks(&w, 10, 2, fa, n); /* ids 10, 11 */
  ntrw_stacks(&w, 3, 2, fb, n);  /* ids 3, 4: behind the first */
  ntrw_ev_begin(&w, 1);
  stack_event(&w, 1, 11);
  stack_event(&w, 2, 3);
  stack_event(&w, 3, 4);
  stack_event(&w, 4, 10);
  stack_event(&w, 5, 12);
  ntrw_block_end(&w);
  ntrw_end(&w);
  parse_stacks(&w, &s);
  cr_assert_eq(s.n, 5);
  cr_assert_eq(s.first[0], 0xb0);
  cr_assert_eq(s.first[1], 0xc0);
  cr_assert_eq(s.first[2], 0xd0);
  cr_assert_eq(s.first[3], 0xa0);
  cr_assert_not(s.have[4], "stack 12 was never written");
  ntrw_release(&w);
}

/* ---- callbacks that stop, misuse ---- */

Test(ntr_api, callback_stops_parse) {
  ntrw w;
  ntr_transcript t;
  ntr_parser *p;
  build_v4(&w, 8, 1);
  ntr_transcript_init(&t, 0);
  t.stop_after_events = 3;
  cr_assert_eq(ntr_parser_new(&p, ntr_transcript_callbacks(), &t, NULL), 0);
  cr_assert_eq(ntr_parser_feed(p, w.buf, w.len), NTR_ESTOPPED);
  cr_assert_eq(t.events, 3);
  cr_assert(strstr(ntr_parser_errmsg(p), "on_event"));
  cr_assert_eq(ntr_parser_feed(p, w.buf, 1), NTR_ESTOPPED, "sticky");
  cr_assert_eq(ntr_parser_finish(p), NTR_ESTOPPED);
  ntr_parser_free(p);
  ntr_transcript_release(&t);
  ntrw_release(&w);
}

static ntr_parser *reenter_p;
static int reenter_rc;
static int reenter(void *ud, const ntr_trace *t) {
  (void)ud;
  (void)t;
  reenter_rc = ntr_parser_feed(reenter_p, (const uint8_t *)"x", 1);
  return 0;
}

Test(ntr_api, misuse_is_detected) {
  static const ntr_callbacks cb = {reenter, NULL, NULL, NULL, NULL, NULL, NULL, NULL};
  ntr_parser *p;
  uint64_t junk[64];
  ntrw w;
  memset(junk, 0, sizeof(junk));
  cr_assert_eq(ntr_parser_new(NULL, NULL, NULL, NULL), NTR_EINVAL);
  cr_assert_eq(ntr_parser_feed(NULL, (const uint8_t *)"x", 1), NTR_EINVAL);
  cr_assert_eq(ntr_parser_feed((ntr_parser *)junk, (const uint8_t *)"x", 1), NTR_EINVAL);
  cr_assert_eq(ntr_parser_finish(NULL), NTR_EINVAL);
  ntr_parser_free(NULL);
  cr_assert_eq(ntr_parser_new(&p, &cb, NULL, NULL), 0);
  cr_assert_eq(ntr_parser_feed(p, NULL, 1), NTR_EINVAL);
  cr_assert_eq(ntr_parser_feed(p, NULL, 0), 0);
  reenter_p = p;
  build_v4(&w, 8, 1);
  cr_assert_eq(ntr_parser_feed(p, w.buf, w.len), NTR_EOF);
  cr_assert_eq(reenter_rc, NTR_EINVAL, "feeding from inside a callback is refused");
  cr_assert_eq(ntr_parser_finish(p), 0);
  cr_assert_eq(ntr_parser_feed(p, w.buf, 1), NTR_EINVAL, "feed after finish");
  ntr_parser_free(p);
  ntrw_release(&w);
  cr_assert_str_eq(ntr_err_name(NTR_ETRUNCATED), "NTR_ETRUNCATED");
  cr_assert_str_eq(ntr_strerror(NTR_ENOMEM), "out of memory");
  cr_assert_str_eq(ntr_err_name(12345), "NTR_UNKNOWN");
}

Test(ntr_api, trailing_bytes_after_end_are_counted) {
  ntrw w;
  ntr_parser *p;
  ntr_stats st;
  build_v4(&w, 8, 1);
  ntrw_bytes(&w, "garbage", 7);
  cr_assert_eq(ntr_parser_new(&p, NULL, NULL, NULL), 0);
  cr_assert_eq(ntr_parser_feed(p, w.buf, w.len), NTR_EOF);
  cr_assert_eq(ntr_parser_finish(p), 0);
  ntr_parser_stats(p, &st);
  cr_assert_eq(st.trailing_bytes, 7);
  cr_assert_eq(st.bytes, w.len - 7);
  ntr_parser_free(p);
  ntrw_release(&w);
}

/* ---- payload helpers ---- */

Test(ntr_payload, cursor_reads_and_bounds) {
  static const uint8_t b[] = {'H', 0, 0xe9, 0, 0x3d, 0xd8, 0x00, 0xde, 0, 0, /* "Hé😀" */
                              1, 0, 0, 0, 0, 0, 0xf0, 0x3f, 0x96, 0x01};
  ntr_payload c;
  char s[16];
  size_t need;
  uint32_t u;
  double d;
  uint64_t v;
  ntr_payload_init(&c, b, sizeof(b));
  cr_assert_eq(ntr_payload_utf16z(&c, s, sizeof(s), &need), 0);
  cr_assert_str_eq(s, "H\xc3\xa9\xf0\x9f\x98\x80");
  cr_assert_eq(need, 7);
  cr_assert_eq(ntr_payload_u16(&c, (uint16_t *)&u), 0);
  cr_assert_eq(ntr_payload_skip(&c, 2), 0);
  cr_assert_eq(ntr_payload_f64(&c, &d), NTR_ETRUNCATED, "only 6 bytes left");
  cr_assert_eq(ntr_payload_skip(&c, 2), 0);
  cr_assert_eq(ntr_payload_u16(&c, (uint16_t *)&u), 0);
  cr_assert_eq(ntr_payload_varuint(&c, &v), 0);
  cr_assert_eq(v, 150);
  cr_assert_eq(ntr_payload_left(&c), 0);
  cr_assert_eq(ntr_payload_u8(&c, (uint8_t *)s), NTR_ETRUNCATED);
  /* A small output buffer is cut at a character boundary. */
  ntr_payload_init(&c, b, sizeof(b));
  cr_assert_eq(ntr_payload_utf16z(&c, s, 3, &need), 0);
  cr_assert_str_eq(s, "H");
}

/* ---- thread names written into a trace (ntr_names_tail) ---- */

struct named {
  int metadata_ok, events;
  uint64_t tids[8];
  char names[8][64];
  uint64_t ts;
};

static int names_md(void *ud, const ntr_metadata *md) {
  struct named *n = ud;
  if (strcmp(md->provider, NTR_NAMES_PROVIDER) == 0)
    n->metadata_ok = strcmp(md->event_name, NTR_NAMES_EVENT) == 0 && md->nfields == 2 &&
                     md->fields[0].type == NTR_TYPE_UINT64 && strcmp(md->fields[0].name, "ThreadId") == 0 &&
                     md->fields[1].type == NTR_TYPE_STRING && strcmp(md->fields[1].name, "Name") == 0;
  return 0;
}

static int names_ev(void *ud, const ntr_event *ev) {
  struct named *n = ud;
  if (strcmp(ev->metadata->provider, NTR_NAMES_PROVIDER) != 0 || n->events >= 8) return 0;
  ntr_payload c;
  ntr_payload_init(&c, ev->payload, ev->payload_size);
  cr_assert_eq(ntr_payload_u64(&c, &n->tids[n->events]), 0);
  cr_assert_eq(ntr_payload_utf16z(&c, n->names[n->events], sizeof n->names[0], NULL), 0);
  cr_assert_eq(ev->thread_id, n->tids[n->events], "the event is on the thread it names");
  n->ts = ev->timestamp;
  n->events++;
  return 0;
}

/* A V5 trace ending with its end tag, the tail written in place of that tag: the stream parses
 * whole, with the names as events of our provider (a name's invalid UTF-8 as U+FFFD, a
 * character beyond the BMP as its surrogate pair), no event counted lost, at every split. */
Test(ntr_names, tail_in_place_of_the_end_tag) {
  ntrw w;
  ntrw_trace t = {0, 1000, 8, 1, 1, 0, NULL, 0};
  ntrw_md m = {1, "P", 1, "E", 0, 0, 4, -1, NULL, 0, 0, 1};
  ntrw_ev e = {.metadata_id = 1, .seq = 1, .thread = 77, .capture_thread = 77, .ts = 500};
  ntrw_init(&w, 0);
  ntrw_trace_hdr(&w, &t);
  ntrw_md_begin(&w);
  ntrw_metadata(&w, &m);
  ntrw_block_end(&w);
  ntrw_ev_begin(&w, 1);
  ntrw_event(&w, &e);
  ntrw_block_end(&w);
  ntrw_end(&w);
  cr_assert_eq(w.buf[w.len - 1], 1, "a stream ends with NullReference");
  const uint64_t tids[] = {77, 78, 79};
  const char *const names[] = {"cpu-work", "bad\xff" "byte", "\xf0\x9f\x99\x82 smile"};
  uint8_t *tail;
  size_t len;
  cr_assert_eq(ntr_names_tail(w.len - 1, 900, tids, names, 3, &tail, &len), 0);
  size_t total = w.len - 1 + len;
  uint8_t *all = malloc(total);
  cr_assert(all);
  memcpy(all, w.buf, w.len - 1);
  memcpy(all + w.len - 1, tail, len);
  free(tail);
  for (size_t split = 1; split <= total; split += split < 64 ? 1 : 97) {
    struct named n = {0};
    ntr_callbacks cb = {.on_metadata = names_md, .on_event = names_ev};
    ntr_parser *p;
    ntr_stats st;
    cr_assert_eq(ntr_parser_new(&p, &cb, &n, NULL), 0);
    int rc = ntr_parser_feed(p, all, split < total ? split : total);
    if (split < total) rc = ntr_parser_feed(p, all + split, total - split);
    cr_assert_eq(rc, NTR_EOF, "split %zu", split);
    cr_assert_eq(ntr_parser_finish(p), 0);
    ntr_parser_stats(p, &st);
    cr_assert_eq(st.events, 4);
    cr_assert_eq(st.dropped_events, 0);
    cr_assert(n.metadata_ok);
    cr_assert_eq(n.events, 3);
    cr_assert_eq(n.ts, 900);
    cr_assert_eq(n.tids[0], 77);
    cr_assert_str_eq(n.names[0], "cpu-work");
    cr_assert_str_eq(n.names[1], "bad\xef\xbf\xbd" "byte");
    cr_assert_str_eq(n.names[2], "\xf0\x9f\x99\x82 smile");
    ntr_parser_free(p);
  }
  free(all);
  ntrw_release(&w);
  cr_assert_eq(ntr_names_tail(0, 0, NULL, NULL, 1, &tail, &len), NTR_EINVAL);
}
