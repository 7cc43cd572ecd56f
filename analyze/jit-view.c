/* The JIT analysis written out: a text table (one row per method compiled, then the totals, the
 * slowest methods and the timeline) or one JSON object with the same data. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "dnt-analyze.h"

/* The indices of the `top` completed rows that took longest, longest first (ties: the earlier
 * row); returns how many. idx is caller-owned, `top` entries. */
static size_t slowest(const dnt_jit_method *rows, size_t n, size_t top, size_t *idx) {
  size_t k = 0;
  for (size_t i = 0; i < n; i++) {
    if (!rows[i].completed) continue;
    size_t at;
    if (k < top)
      at = k++;
    else if (rows[i].jit_ms > rows[idx[top - 1]].jit_ms)
      at = top - 1;
    else
      continue;
    while (at > 0 && rows[idx[at - 1]].jit_ms < rows[i].jit_ms) {
      idx[at] = idx[at - 1];
      at--;
    }
    idx[at] = i;
  }
  return k;
}

/* A method's name for a terminal (names come from the trace); "" is a MethodLoad's, which carries
 * no name. */
static void put_name(FILE *fp, const char *name) { dnt_text_put(fp, name[0] ? name : "(unnamed: MethodLoad)"); }

void dnt_jit_write_text(FILE *fp, const struct dnt_jit_analysis *a, size_t top) {
  size_t n;
  const dnt_jit_method *rows = dnt_jit_list(a, &n);
  const dnt_jit_summary *s = dnt_jit_get_summary(a);
  fprintf(fp, "%10s %9s %-26s %7s %7s %9s  %s\n", "Start ms", "JIT ms", "Tier", "IL", "Native", "Thread", "Method");
  for (size_t i = 0; i < n; i++) {
    const dnt_jit_method *m = &rows[i];
    if (m->completed)
      fprintf(fp, "%10.3f %9.3f %-26s %7u %7u %9lld  ", m->start_ms, m->jit_ms, dnt_jit_tier_name(m->tier), m->il_size,
              m->native_size, (long long)m->tid);
    else
      fprintf(fp, "%10.3f %9s %-26s %7u %7s %9lld  ", m->start_ms, "-", "(not finished)", m->il_size, "-",
              (long long)m->tid);
    put_name(fp, m->name);
    fputs(m->r2r_rejected ? "  [R2R rejected]\n" : "\n", fp);
  }
  fprintf(fp, "\nSummary: %zu methods compiled in %.3f s of trace, %.3f ms of JIT time", s->methods, s->trace_ms / 1000.0,
          s->total_jit_ms);
  if (s->methods) fprintf(fp, " (first at %.3f ms, last at %.3f ms)", s->first_ms, s->last_ms);
  fprintf(fp, "\n  %zu in the foreground, %zu in tiering's background; IL %llu bytes, native code %llu bytes\n",
          s->foreground, s->background, (unsigned long long)s->il_bytes, (unsigned long long)s->native_bytes);
  if (s->incomplete) fprintf(fp, "  %zu more began but did not finish within the trace\n", s->incomplete);
  if (s->completions != s->methods - s->incomplete)
    fprintf(fp, "  %zu load events ended them (some methods ended more than once)\n", s->completions);
  fprintf(fp, "  ReadyToRun: %zu methods jitted though precompiled code existed (rejected)", s->r2r_rejected);
  if (s->r2r_entry_points) fprintf(fp, "; %zu precompiled methods used (R2RGetEntryPoint)", s->r2r_entry_points);
  fputc('\n', fp);
  fprintf(fp, "%-28s %8s %12s\n", "Tier", "Methods", "JIT ms");
  for (int t = 0; t < DNT_JIT_TIERS; t++)
    if (s->tier_count[t]) fprintf(fp, "%-28s %8zu %12.3f\n", dnt_jit_tier_name(t), s->tier_count[t], s->tier_ms[t]);
  size_t *idx = top ? malloc(top * sizeof *idx) : NULL;
  size_t k = idx ? slowest(rows, n, top, idx) : 0;
  if (k) {
    fprintf(fp, "Slowest methods:\n");
    for (size_t i = 0; i < k; i++) {
      const dnt_jit_method *m = &rows[idx[i]];
      fprintf(fp, "  %9.3f ms  ", m->jit_ms);
      put_name(fp, m->name);
      fprintf(fp, " (%s, IL %u bytes, at %.3f ms)\n", dnt_jit_tier_name(m->tier), m->il_size, m->start_ms);
    }
  }
  free(idx);
  if (s->n_timeline) {
    size_t most = 0;
    for (size_t i = 0; i < s->n_timeline; i++) most = s->timeline[i].methods > most ? s->timeline[i].methods : most;
    fprintf(fp, "Timeline (methods whose compilation began in each 100 ms since the trace's start; empty ones left out):\n");
    for (size_t i = 0; i < s->n_timeline; i++) {
      const dnt_jit_bucket *b = &s->timeline[i];
      int bar = (int)((b->methods * 40 + most - 1) / most);
      fprintf(fp, "  %10.1f s %6zu %10.3f ms  %.*s\n", b->start_ms / 1000.0, b->methods, b->jit_ms, bar,
              "########################################");
    }
  }
}

/* A finite number for JSON (NaN and infinities have no JSON form). */
static void jnum(FILE *fp, double v) { fprintf(fp, "%.10g", isfinite(v) ? v : 0.0); }

void dnt_jit_write_json(FILE *fp, const struct dnt_jit_analysis *a, size_t top) {
  size_t n;
  const dnt_jit_method *rows = dnt_jit_list(a, &n);
  const dnt_jit_summary *s = dnt_jit_get_summary(a);
  fputs("{\"methods\":[", fp);
  for (size_t i = 0; i < n; i++) {
    const dnt_jit_method *m = &rows[i];
    fprintf(fp, "%s{\"name\":", i ? "," : "");
    dnt_json_string(fp, m->name);
    fputs(",\"startMSec\":", fp);
    jnum(fp, m->start_ms);
    fputs(",\"jitMSec\":", fp);
    jnum(fp, m->completed ? m->jit_ms : 0);
    fputs(",\"tier\":", fp);
    dnt_json_string(fp, dnt_jit_tier_name(m->tier));
    fprintf(fp,
            ",\"ilSize\":%u,\"nativeSize\":%u,\"threadId\":%lld,\"methodId\":%llu,\"moduleId\":%llu,\"rejitId\":%llu,"
            "\"methodFlags\":%u,\"completed\":%d,\"background\":%s,\"r2rRejected\":%s}",
            m->il_size, m->native_size, (long long)m->tid, (unsigned long long)m->method_id,
            (unsigned long long)m->module_id, (unsigned long long)m->rejit_id, m->flags, m->completed,
            m->background ? "true" : "false", m->r2r_rejected ? "true" : "false");
  }
  fprintf(fp, "],\"summary\":{\"methods\":%zu,\"completions\":%zu,\"incomplete\":%zu,\"foreground\":%zu,"
              "\"background\":%zu,\"r2rRejected\":%zu,\"r2rEntryPoints\":%zu,\"ilBytes\":%llu,\"nativeBytes\":%llu,"
              "\"totalJitMSec\":",
          s->methods, s->completions, s->incomplete, s->foreground, s->background, s->r2r_rejected,
          s->r2r_entry_points, (unsigned long long)s->il_bytes, (unsigned long long)s->native_bytes);
  jnum(fp, s->total_jit_ms);
  fputs(",\"traceMSec\":", fp);
  jnum(fp, s->trace_ms);
  fputs(",\"byTier\":{", fp);
  int first = 1;
  for (int t = 0; t < DNT_JIT_TIERS; t++) {
    if (!s->tier_count[t]) continue;
    fprintf(fp, "%s\"%s\":{\"methods\":%zu,\"jitMSec\":", first ? "" : ",", dnt_jit_tier_name(t), s->tier_count[t]);
    jnum(fp, s->tier_ms[t]);
    fputc('}', fp);
    first = 0;
  }
  fputs("},\"slowest\":[", fp);
  size_t *idx = top ? malloc(top * sizeof *idx) : NULL;
  size_t k = idx ? slowest(rows, n, top, idx) : 0;
  for (size_t i = 0; i < k; i++) {
    fprintf(fp, "%s{\"name\":", i ? "," : "");
    dnt_json_string(fp, rows[idx[i]].name);
    fputs(",\"jitMSec\":", fp);
    jnum(fp, rows[idx[i]].jit_ms);
    fputc('}', fp);
  }
  free(idx);
  fputs("],\"timeline\":[", fp);
  for (size_t i = 0; i < s->n_timeline; i++) {
    fprintf(fp, "%s{\"startMSec\":", i ? "," : "");
    jnum(fp, s->timeline[i].start_ms);
    fprintf(fp, ",\"methods\":%zu,\"jitMSec\":", s->timeline[i].methods);
    jnum(fp, s->timeline[i].jit_ms);
    fputc('}', fp);
  }
  fputs("]}}\n", fp);
}
