/* ntr-transcript.c: see ntr-transcript.h. */
#include "ntr-transcript.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void ntr_transcript_init(ntr_transcript *t, int keep_text) {
  memset(t, 0, sizeof(*t));
  t->keep_text = keep_text;
  t->digest = 0xcbf29ce484222325ULL;
}

void ntr_transcript_release(ntr_transcript *t) {
  free(t->text);
  memset(t, 0, sizeof(*t));
}

static void emit(ntr_transcript *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void emit(ntr_transcript *t, const char *fmt, ...) {
  char line[4096];
  va_list ap;
  int n;
  size_t i;
  va_start(ap, fmt);
  n = vsnprintf(line, sizeof(line), fmt, ap);
  va_end(ap);
  if (n < 0)
    return;
  if ((size_t)n >= sizeof(line))
    n = sizeof(line) - 1;
  for (i = 0; i < (size_t)n; i++) {
    t->digest ^= (uint8_t)line[i];
    t->digest *= 0x100000001b3ULL;
  }
  if (!t->keep_text)
    return;
  if (t->len + (size_t)n + 1 > t->cap) {
    while (t->len + (size_t)n + 1 > t->cap)
      t->cap = t->cap ? t->cap * 2 : 65536;
    t->text = realloc(t->text, t->cap);
    if (!t->text)
      abort();
  }
  memcpy(t->text + t->len, line, (size_t)n + 1);
  t->len += (size_t)n;
}

static uint64_t fnv(const uint8_t *p, size_t n) {
  uint64_t h = 0xcbf29ce484222325ULL;
  while (n--) {
    h ^= *p++;
    h *= 0x100000001b3ULL;
  }
  return h;
}

static void fields(char *out, size_t outsz, const ntr_field *f, uint32_t n) {
  size_t len = strlen(out);
  uint32_t i;
  for (i = 0; i < n && len + 8 < outsz; i++) {
    snprintf(out + len, outsz - len, "%s%s:%u", i ? "," : "", f[i].name, f[i].type);
    len = strlen(out);
    if (f[i].element && len + 8 < outsz) {
      snprintf(out + len, outsz - len, "<%u", f[i].element->type);
      fields(out, outsz, f[i].element->fields, f[i].element->nfields);
      len = strlen(out);
      snprintf(out + len, outsz - len, ">");
      len = strlen(out);
    }
    if (f[i].nfields && len + 8 < outsz) {
      snprintf(out + len, outsz - len, "{");
      fields(out, outsz, f[i].fields, f[i].nfields);
      len = strlen(out);
      snprintf(out + len, outsz - len, "}");
      len = strlen(out);
    }
  }
}

static int on_trace(void *ud, const ntr_trace *tr) {
  ntr_transcript *t = ud;
  size_t i;
  t->traces++;
  t->trace = *tr;
  t->trace.keyvalues = NULL;
  emit(t, "trace v%d.%u %u-%u-%u %u:%u:%u.%u sync=%llu freq=%llu ptr=%u pid=%u cpus=%u rate=%u\n",
       tr->format, tr->minor_version, tr->start_time[0], tr->start_time[1], tr->start_time[3],
       tr->start_time[4], tr->start_time[5], tr->start_time[6], tr->start_time[7],
       (unsigned long long)tr->sync_time_qpc, (unsigned long long)tr->qpc_frequency,
       tr->pointer_size, tr->process_id, tr->cpu_count, tr->sampling_interval_ns);
  for (i = 0; i < tr->nkeyvalues; i++)
    emit(t, "  kv %s=%s\n", tr->keyvalues[i].key, tr->keyvalues[i].value);
  return 0;
}

static int on_metadata(void *ud, const ntr_metadata *m) {
  ntr_transcript *t = ud;
  char f[2048] = "";
  t->metadata++;
  fields(f, sizeof(f), m->fields, m->nfields);
  emit(t, "md %u %s/%u '%s' kw=%llx v=%u l=%u op=%d%s [%s]\n", m->id, m->provider, m->event_id,
       m->event_name, (unsigned long long)m->keywords, m->version, m->level,
       m->has_opcode ? (int)m->opcode : -1, m->fields_from_v2params ? " v2" : "", f);
  return 0;
}

static int on_stack(void *ud, const ntr_stack *s) {
  ntr_transcript *t = ud;
  t->stacks++;
  emit(t, "stack %u n=%u %llx %llx\n", s->id, s->nframes,
       s->nframes ? (unsigned long long)s->frames[0] : 0ULL,
       (unsigned long long)fnv((const uint8_t *)s->frames, s->nframes * sizeof(uint64_t)));
  return 0;
}

static int on_event(void *ud, const ntr_event *e) {
  ntr_transcript *t = ud;
  char pl[80] = "";
  size_t i;
  t->events++;
  if (e->payload_size <= 16)
    for (i = 0; i < e->payload_size; i++)
      snprintf(pl + 2 * i, sizeof(pl) - 2 * i, "%02x", e->payload[i]);
  else
    snprintf(pl, sizeof(pl), "#%llx", (unsigned long long)fnv(e->payload, e->payload_size));
  emit(t, "ev md=%u%s seq=%u th=%llu/%llu cap=%llu/%llu cpu=%u stk=%u:%u ts=%llu s=%d "
          "act=%llx rel=%llx ll=%u/%zu pl=%u:%s\n",
       e->metadata_id, e->metadata ? "" : "?", e->sequence, (unsigned long long)e->thread_id,
       (unsigned long long)e->thread_index, (unsigned long long)e->capture_thread_id,
       (unsigned long long)e->capture_thread_index, e->processor, e->stack_id,
       e->stack ? e->stack->nframes : 0, (unsigned long long)e->timestamp, e->sorted,
       (unsigned long long)fnv(e->activity_id, 16),
       (unsigned long long)fnv(e->related_activity_id, 16), e->label_list_id, e->nlabels,
       e->payload_size, pl);
  if (t->stop_after_events > 0 && t->events >= (uint64_t)t->stop_after_events)
    return 1;
  return 0;
}

static int on_sp(void *ud, const ntr_sequence_point *sp) {
  ntr_transcript *t = ud;
  size_t i;
  t->sps++;
  emit(t, "sp ts=%llu flags=%u n=%zu\n", (unsigned long long)sp->timestamp, sp->flags,
       sp->nthreads);
  for (i = 0; i < sp->nthreads; i++)
    emit(t, "  %llu:%u\n", (unsigned long long)sp->threads[i].thread, sp->threads[i].sequence);
  return 0;
}

static int on_thread(void *ud, const ntr_thread *th) {
  ntr_transcript *t = ud;
  t->threads++;
  emit(t, "thread %llu '%s' tid=%llu\n", (unsigned long long)th->index,
       th->name ? th->name : "", (unsigned long long)th->os_thread_id);
  return 0;
}

static int on_end(void *ud) {
  ntr_transcript *t = ud;
  t->ends++;
  emit(t, "end\n");
  return 0;
}

static const ntr_callbacks cbs = {on_trace, on_metadata, on_stack, on_event, on_sp, on_thread,
                                  on_end, NULL};

const ntr_callbacks *ntr_transcript_callbacks(void) { return &cbs; }

int ntr_transcript_run(ntr_transcript *t, const uint8_t *buf, size_t len, long chunk,
                       unsigned seed, const ntr_limits *lim, char *errmsg, size_t errsz) {
  ntr_parser *p = NULL;
  size_t off = 0;
  int rc = 0, frc;
  ntr_stats st;

  if (ntr_parser_new(&p, &cbs, t, lim) < 0)
    return NTR_ENOMEM;
  while (off < len) {
    size_t n;
    if (chunk == 0)
      n = len;
    else if (chunk > 0)
      n = (size_t)chunk;
    else {
      seed = seed * 1103515245u + 12345u;
      n = 1 + (seed >> 8) % (size_t)(-chunk);
    }
    if (n > len - off)
      n = len - off;
    rc = ntr_parser_feed(p, buf + off, n);
    off += n;
    if (rc < 0 && rc != NTR_EOF)
      break;
  }
  frc = ntr_parser_finish(p);
  ntr_parser_stats(p, &st);
  emit(t, "result feed=%s finish=%s dropped=%llu events=%llu msg=%s\n", rc < 0 ? ntr_err_name(rc) : "0",
       frc ? ntr_err_name(frc) : "0", (unsigned long long)st.dropped_events, (unsigned long long)st.events,
       ntr_parser_errmsg(p));
  if (errmsg && errsz)
    snprintf(errmsg, errsz, "%s", ntr_parser_errmsg(p));
  ntr_parser_free(p);
  return frc;
}
