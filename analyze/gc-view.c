/* The GC analysis written out: a text table (one row per GC, then PerfView-like summary lines) or
 * one JSON object with the same data. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "dnt-analyze.h"

static const char *const reasons[] = {"AllocSmall", "Induced", "LowMemory", "Empty", "AllocLarge",
                                      "OutOfSpaceSOH", "OutOfSpaceLOH", "InducedNotForced", "Internal",
                                      "InducedLowMemory", "InducedCompacting", "LowMemoryHost", "PMFullGC",
                                      "LowMemoryHostBlocking"};

const char *dnt_gc_reason_name(uint32_t reason, char buf[24]) {
  if (reason < sizeof reasons / sizeof reasons[0]) return reasons[reason];
  snprintf(buf, 24, "Reason(%u)", reason);
  return buf;
}

const char *dnt_gc_type_name(int type, char buf[24]) {
  switch (type) {
  case DNT_GC_NONCONCURRENT: return "NonConcurrent";
  case DNT_GC_BACKGROUND: return "Background";
  case DNT_GC_FOREGROUND: return "Foreground";
  default: snprintf(buf, 24, "Type(%d)", type); return buf;
  }
}

/* The indices of the `top` longest pauses among the complete GCs, longest first (ties: earlier
 * GC first); returns how many (at most top). idx is caller-owned, `top` entries. */
static size_t longest(const dnt_gc *gcs, size_t n, size_t top, size_t *idx) {
  size_t k = 0;
  for (size_t i = 0; i < n; i++) {
    if (!gcs[i].complete) continue;
    size_t at;
    if (k < top)
      at = k++;
    else if (gcs[i].pause_ms > gcs[idx[top - 1]].pause_ms)
      at = top - 1;
    else
      continue;
    while (at > 0 && gcs[idx[at - 1]].pause_ms < gcs[i].pause_ms) {
      idx[at] = idx[at - 1];
      at--;
    }
    idx[at] = i;
  }
  return k;
}

static double mb(uint64_t bytes) { return (double)bytes / 1000000.0; }

static void write_summary(FILE *fp, const struct dnt_gc_analysis *a, size_t top);

void dnt_gc_write_text(FILE *fp, const struct dnt_gc_analysis *a, size_t top, int parts) {
  if (parts == DNT_GC_SUMMARY_ONLY) {
    write_summary(fp, a, top);
    return;
  }
  if (parts == DNT_GC_SUMMARY_FIRST) {
    write_summary(fp, a, top);
    fputc('\n', fp);
  }
  size_t n;
  const dnt_gc *gcs = dnt_gc_list(a, &n);
  char b1[24], b2[24];
  fprintf(fp, "%6s %3s %-13s %-17s %10s %9s %9s %10s %10s %10s %9s %9s %9s %9s %9s %7s\n", "GC", "Gen", "Type",
          "Reason", "Start ms", "Pause ms", "Susp ms", "Before MB", "After MB", "Promo MB", "Gen0 MB", "Gen1 MB",
          "Gen2 MB", "LOH MB", "POH MB", "Pinned");
  for (size_t i = 0; i < n; i++) {
    const dnt_gc *g = &gcs[i];
    if (!g->complete) continue;
    fprintf(fp, "%6u %3d %-13s %-17s %10.3f %9.3f %9.3f %10.3f %10.3f %10.3f %9.3f %9.3f %9.3f %9.3f %9.3f %7u\n",
            g->number, g->generation, dnt_gc_type_name(g->type, b1), dnt_gc_reason_name(g->reason, b2), g->start_ms,
            g->pause_ms, g->suspend_ms, g->heap_before_mb, g->heap_after_mb, g->promoted_mb,
            mb(g->size_after[DNT_GC_GEN0]), mb(g->size_after[DNT_GC_GEN1]), mb(g->size_after[DNT_GC_GEN2]),
            mb(g->size_after[DNT_GC_LOH]), mb(g->size_after[DNT_GC_POH]), g->pinned_objects);
  }
  if (parts == DNT_GC_SUMMARY_FIRST) {
    fprintf(fp, "\n(the summary is above the %zu GCs)\n", n);
    return;
  }
  fputc('\n', fp);
  write_summary(fp, a, top);
}

static void write_summary(FILE *fp, const struct dnt_gc_analysis *a, size_t top) {
  size_t n;
  const dnt_gc *gcs = dnt_gc_list(a, &n);
  const dnt_gc_summary *s = dnt_gc_get_summary(a);
  char b1[24], b2[24];
  fprintf(fp, "Summary: %zu GCs in %.3f s of trace", s->all.count, s->trace_ms / 1000.0);
  if (s->heaps) fprintf(fp, ", %u heap%s", s->heaps, s->heaps == 1 ? "" : "s");
  if (s->incomplete) fprintf(fp, " (%zu more not finished within the trace, not counted)", s->incomplete);
  fprintf(fp, "\n%-5s %6s %8s %13s %12s %12s %14s %12s\n", "Gen", "Count", "Induced", "Mean pause ms", "Max pause ms",
          "P99 pause ms", "Total pause ms", "Promoted MB");
  for (int g = -1; g < 3; g++) {
    const dnt_gc_gen_stats *gs = g < 0 ? &s->all : &s->gen[g];
    char name[12];
    snprintf(name, sizeof name, "%d", g);
    fprintf(fp, "%-5s %6zu %8zu %13.3f %12.3f %12.3f %14.3f %12.3f\n", g < 0 ? "All" : name, gs->count, gs->induced,
            gs->mean_pause_ms, gs->max_pause_ms, gs->p99_pause_ms, gs->total_pause_ms, gs->total_promoted_mb);
  }
  fprintf(fp, "Time paused: %.3f ms of %.3f ms (%.2f%%), each pause from the runtime's suspension start to its "
              "restart end (PerfView's GCStats; the runtime's time-in-gc counter is another measure)\n",
          s->all.total_pause_ms, s->trace_ms, s->paused_pct);
  if (strcmp(s->alloc_source, "none") == 0)
    fprintf(fp, "Allocation rate: unknown (no GCAllocationTick events and fewer than two GCs)\n");
  else
    fprintf(fp, "Allocation rate: %.3f MB/s (%.3f MB, from %s)\n", s->alloc_rate_mb_s, s->allocated_mb,
            s->alloc_source);
  size_t *idx = top ? malloc(top * sizeof *idx) : NULL;
  size_t k = idx ? longest(gcs, n, top, idx) : 0;
  if (k) {
    fprintf(fp, "Longest pauses:\n");
    for (size_t i = 0; i < k; i++) {
      const dnt_gc *g = &gcs[idx[i]];
      fprintf(fp, "  %9.3f ms  GC %u, gen%d %s, %s, at %.3f ms\n", g->pause_ms, g->number, g->generation,
              dnt_gc_type_name(g->type, b1), dnt_gc_reason_name(g->reason, b2), g->start_ms);
    }
  }
  free(idx);
}

/* A finite number for JSON (NaN and infinities have no JSON form). */
static void jnum(FILE *fp, double v) { fprintf(fp, "%.10g", isfinite(v) ? v : 0.0); }

static void json_gen_stats(FILE *fp, const dnt_gc_gen_stats *gs) {
  fprintf(fp, "{\"count\":%zu,\"induced\":%zu,\"meanPauseMSec\":", gs->count, gs->induced);
  jnum(fp, gs->mean_pause_ms);
  fputs(",\"maxPauseMSec\":", fp);
  jnum(fp, gs->max_pause_ms);
  fputs(",\"p99PauseMSec\":", fp);
  jnum(fp, gs->p99_pause_ms);
  fputs(",\"totalPauseMSec\":", fp);
  jnum(fp, gs->total_pause_ms);
  fputs(",\"promotedMB\":", fp);
  jnum(fp, gs->total_promoted_mb);
  fputc('}', fp);
}

void dnt_gc_write_json(FILE *fp, const struct dnt_gc_analysis *a, size_t top) {
  size_t n;
  const dnt_gc *gcs = dnt_gc_list(a, &n);
  const dnt_gc_summary *s = dnt_gc_get_summary(a);
  char b1[24], b2[24];
  static const char *const heaps[DNT_GC_HEAPS] = {"gen0", "gen1", "gen2", "loh", "poh"};
  fputs("{\"gcs\":[", fp);
  int first = 1;
  for (size_t i = 0; i < n; i++) {
    const dnt_gc *g = &gcs[i];
    if (!g->complete) continue;
    fprintf(fp, "%s{\"number\":%u,\"generation\":%d,\"type\":", first ? "" : ",", g->number, g->generation);
    dnt_json_string(fp, dnt_gc_type_name(g->type, b1));
    fputs(",\"reason\":", fp);
    dnt_json_string(fp, dnt_gc_reason_name(g->reason, b2));
    fputs(",\"startMSec\":", fp);
    jnum(fp, g->start_ms);
    fputs(",\"pauseMSec\":", fp);
    jnum(fp, g->pause_ms);
    fputs(",\"suspendMSec\":", fp);
    jnum(fp, g->suspend_ms);
    fputs(",\"heapSizeBeforeMB\":", fp);
    jnum(fp, g->heap_before_mb);
    fputs(",\"heapSizeAfterMB\":", fp);
    jnum(fp, g->heap_after_mb);
    fputs(",\"promotedMB\":", fp);
    jnum(fp, g->promoted_mb);
    fputs(",\"sizeAfterBytes\":{", fp);
    for (int h = 0; h < DNT_GC_HEAPS; h++)
      fprintf(fp, "%s\"%s\":%llu", h ? "," : "", heaps[h], (unsigned long long)g->size_after[h]);
    fprintf(fp, "},\"pinnedObjects\":%u}", g->pinned_objects);
    first = 0;
  }
  fputs("],\"summary\":{\"traceMSec\":", fp);
  jnum(fp, s->trace_ms);
  fprintf(fp, ",\"heaps\":%u,\"incomplete\":%zu,\"generations\":[", s->heaps, s->incomplete);
  for (int g = 0; g < 3; g++) {
    if (g) fputc(',', fp);
    json_gen_stats(fp, &s->gen[g]);
  }
  fputs("],\"all\":", fp);
  json_gen_stats(fp, &s->all);
  fputs(",\"pausedPercent\":", fp);
  jnum(fp, s->paused_pct);
  fputs(",\"allocatedMB\":", fp);
  jnum(fp, s->allocated_mb);
  fputs(",\"allocationRateMBPerSec\":", fp);
  jnum(fp, s->alloc_rate_mb_s);
  fputs(",\"allocationSource\":", fp);
  dnt_json_string(fp, s->alloc_source);
  fputs(",\"longestPauses\":[", fp);
  size_t *idx = top ? malloc(top * sizeof *idx) : NULL;
  size_t k = idx ? longest(gcs, n, top, idx) : 0;
  for (size_t i = 0; i < k; i++) {
    fprintf(fp, "%s{\"number\":%u,\"pauseMSec\":", i ? "," : "", gcs[idx[i]].number);
    jnum(fp, gcs[idx[i]].pause_ms);
    fputc('}', fp);
  }
  free(idx);
  fputs("]}}\n", fp);
}
