/* The exceptions analysis written out: a text report (the summary, then each group with where it
 * was caught and its throw stacks) or one JSON object with the same data. */
#include <string.h>

#include "analyze-int.h"

#define TEXT_FRAMES 12   /* frames of a stack shown in the text report (JSON has them all) */
#define TEXT_SECONDS 60
#define INDENT "                                  " /* under the type and message */  /* seconds of the rate shown in the text report */

void dnt__write_stack_text(FILE *fp, const dnt_analysis_stack *st, const char *indent, const char *lead, int with_ms) {
  if (with_ms)
    fprintf(fp, "%s%s%llu waits, %.3f ms, in:\n", indent, lead, (unsigned long long)st->count, st->weight_ms);
  else
    fprintf(fp, "%s%sthrown %llu times from:\n", indent, lead, (unsigned long long)st->count);
  if (st->nframes == 0) fprintf(fp, "%s    (no stack: record with stacks)\n", indent);
  for (size_t f = 0; f < st->nframes && f < TEXT_FRAMES; f++) {
    fprintf(fp, "%s    ", indent);
    dnt_text_put(fp, st->frames[f]); /* the trace's words, as every string below */
    fputc('\n', fp);
  }
  if (st->nframes > TEXT_FRAMES) fprintf(fp, "%s    ... %zu more frames\n", indent, st->nframes - TEXT_FRAMES);
}

void dnt__write_stack_json(FILE *fp, const dnt_analysis_stack *st, int with_ms) {
  fprintf(fp, "{\"count\":%llu,", (unsigned long long)st->count);
  if (with_ms) fprintf(fp, "\"waitMSec\":%.6f,", st->weight_ms);
  fputs("\"frames\":[", fp);
  for (size_t f = 0; f < st->nframes; f++) {
    if (f) fputc(',', fp);
    dnt_json_string(fp, st->frames[f]);
  }
  fputs("]}", fp);
}

void dnt_exceptions_write_text(FILE *fp, const struct dnt_exceptions_analysis *a, size_t top) {
  size_t n;
  const dnt_exception_group *g = dnt_exceptions_list(a, &n);
  const dnt_exception_summary *s = dnt_exceptions_get_summary(a);
  fprintf(fp, "Exceptions: %llu thrown (first-chance) in %.3f s, %.1f a second (the busiest second: %.0f)\n",
          (unsigned long long)s->thrown, s->trace_ms / 1000.0, s->per_second, s->max_per_second);
  if (s->catch_events)
    fprintf(fp, "Handled: %llu, unhandled: %llu", (unsigned long long)s->handled, (unsigned long long)s->unhandled);
  else
    fprintf(fp, "Handled or not: unknown (no catch events in the trace: record the Exception keyword at the "
                "informational level)");
  if (s->catch_events && s->unknown) fprintf(fp, ", unknown: %llu", (unsigned long long)s->unknown);
  fprintf(fp, "; %zu %s", s->types, s->types == 1 ? "type" : "types");
  switch (s->grouping) {
  case DNT_EXC_BY_SITE: fprintf(fp, ", %zu throw %s\n", s->groups, s->groups == 1 ? "site" : "sites"); break;
  case DNT_EXC_BY_MESSAGE: fprintf(fp, ", %zu distinct type and message\n", s->groups); break;
  case DNT_EXC_BY_STACK: fprintf(fp, ", %zu distinct type and stack\n", s->groups); break;
  default: fputc('\n', fp);
  }
  if (s->seconds) {
    fprintf(fp, "Thrown per second:");
    for (size_t i = 0; i < s->seconds && i < TEXT_SECONDS; i++) fprintf(fp, " %llu", (unsigned long long)s->per_sec_counts[i]);
    if (s->seconds > TEXT_SECONDS) fprintf(fp, " ... (%zu seconds)", s->seconds);
    fputc('\n', fp);
  }
  size_t shown = top && top < n ? top : n;
  int by_message = s->grouping == DNT_EXC_BY_MESSAGE;
  if (shown)
    fprintf(fp, "\n%10s %10s %10s  %s\n", "Thrown", "Handled", "Unhandled",
            by_message ? "Type: message" : s->grouping == DNT_EXC_BY_SITE ? "Type at throw site" : "Type");
  for (size_t i = 0; i < shown; i++) {
    fprintf(fp, "%10llu %10llu %10llu  ", (unsigned long long)g[i].thrown, (unsigned long long)g[i].handled,
            (unsigned long long)g[i].unhandled);
    dnt_text_put(fp, g[i].type);
    if (by_message) {
      fputs(": ", fp);
      dnt_text_put(fp, g[i].message);
    } else if (g[i].site) {
      fputs(" at ", fp);
      dnt_text_put(fp, g[i].site);
    }
    fputc('\n', fp);
    for (int k = 0; !by_message && k < DNT_EXC_EXAMPLES && g[i].examples[k].message; k++) {
      fprintf(fp, "%34s%llu with message: ", "", (unsigned long long)g[i].examples[k].count);
      dnt_text_put(fp, g[i].examples[k].message);
      fputc('\n', fp);
    }
    if (!by_message && g[i].other_examples)
      fprintf(fp, "%34s%llu with other messages\n", "", (unsigned long long)g[i].other_examples);
    fprintf(fp, "%34sHRESULT 0x%08x, first at %.3f ms, last at %.3f ms", "", g[i].hresult, g[i].first_ms,
            g[i].last_ms);
    if (g[i].rethrown) fprintf(fp, ", rethrown %llu", (unsigned long long)g[i].rethrown);
    if (g[i].nested) fprintf(fp, ", nested %llu", (unsigned long long)g[i].nested);
    fputc('\n', fp);
    for (int k = 0; k < DNT_EXC_CATCHES && g[i].catches[k].method; k++) {
      fprintf(fp, "%34scaught in ", "");
      dnt_text_put(fp, g[i].catches[k].method);
      fprintf(fp, " (%llu)\n", (unsigned long long)g[i].catches[k].count);
    }
    if (g[i].other_catches)
      fprintf(fp, "%34scaught elsewhere (%llu)\n", "", (unsigned long long)g[i].other_catches);
    for (size_t k = 0; k < g[i].nstacks; k++)
      dnt__write_stack_text(fp, &g[i].stacks[k], INDENT, "", 0);
    if (g[i].other_stacks)
      fprintf(fp, "%34s(%llu more throws from other stacks)\n", "", (unsigned long long)g[i].other_stacks);
  }
  if (shown < n) fprintf(fp, "\n(%zu more groups: --top shows more)\n", n - shown);
}

void dnt_exceptions_write_json(FILE *fp, const struct dnt_exceptions_analysis *a, size_t top) {
  size_t n;
  const dnt_exception_group *g = dnt_exceptions_list(a, &n);
  const dnt_exception_summary *s = dnt_exceptions_get_summary(a);
  fprintf(fp,
          "{\"summary\":{\"thrown\":%llu,\"handled\":%llu,\"unhandled\":%llu,\"unknown\":%llu,\"catchEvents\":%s,"
          "\"types\":%zu,\"groups\":%zu,\"groupedBy\":\"%s\",\"traceMSec\":%.6f,\"perSecond\":%.6f,\"maxPerSecond\":%.0f,"
          "\"thrownPerSecond\":[",
          (unsigned long long)s->thrown, (unsigned long long)s->handled, (unsigned long long)s->unhandled,
          (unsigned long long)s->unknown, s->catch_events ? "true" : "false", s->types, s->groups,
          (const char *[]){"site", "type", "message", "stack"}[s->grouping], s->trace_ms,
          s->per_second, s->max_per_second);
  for (size_t i = 0; i < s->seconds; i++) fprintf(fp, "%s%llu", i ? "," : "", (unsigned long long)s->per_sec_counts[i]);
  fputs("]},\"exceptions\":[", fp);
  size_t shown = top && top < n ? top : n;
  for (size_t i = 0; i < shown; i++) {
    fputs(i ? ",{\"type\":" : "{\"type\":", fp);
    dnt_json_string(fp, g[i].type);
    fputs(",\"message\":", fp);
    dnt_json_string(fp, g[i].message);
    if (g[i].site) {
      fputs(",\"site\":", fp);
      dnt_json_string(fp, g[i].site);
    }
    fputs(",\"messages\":[", fp);
    for (int k = 0; k < DNT_EXC_EXAMPLES && g[i].examples[k].message; k++) {
      fputs(k ? ",{\"message\":" : "{\"message\":", fp);
      dnt_json_string(fp, g[i].examples[k].message);
      fprintf(fp, ",\"count\":%llu}", (unsigned long long)g[i].examples[k].count);
    }
    fprintf(fp, "],\"otherMessages\":%llu", (unsigned long long)g[i].other_examples);
    fprintf(fp,
            ",\"hresult\":%u,\"thrown\":%llu,\"handled\":%llu,\"unhandled\":%llu,\"unknown\":%llu,\"rethrown\":%llu,"
            "\"nested\":%llu,\"firstMSec\":%.6f,\"lastMSec\":%.6f,\"caughtIn\":[",
            g[i].hresult, (unsigned long long)g[i].thrown, (unsigned long long)g[i].handled,
            (unsigned long long)g[i].unhandled, (unsigned long long)g[i].unknown, (unsigned long long)g[i].rethrown,
            (unsigned long long)g[i].nested, g[i].first_ms, g[i].last_ms);
    for (int k = 0; k < DNT_EXC_CATCHES && g[i].catches[k].method; k++) {
      fputs(k ? ",{\"method\":" : "{\"method\":", fp);
      dnt_json_string(fp, g[i].catches[k].method);
      fprintf(fp, ",\"count\":%llu}", (unsigned long long)g[i].catches[k].count);
    }
    fprintf(fp, "],\"caughtElsewhere\":%llu,\"stacks\":[", (unsigned long long)g[i].other_catches);
    for (size_t k = 0; k < g[i].nstacks; k++) {
      if (k) fputc(',', fp);
      dnt__write_stack_json(fp, &g[i].stacks[k], 0);
    }
    fprintf(fp, "],\"otherStacks\":%llu}", (unsigned long long)g[i].other_stacks);
  }
  fprintf(fp, "],\"moreGroups\":%zu}\n", n - shown);
}
