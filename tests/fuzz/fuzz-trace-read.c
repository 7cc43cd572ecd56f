/* fuzz-trace-read.c: libFuzzer target for trace files as `report`, `events` and `convert` open
 * them (dnt_trace_read): the container recognised by its first bytes (gzip, zip with stored or
 * deflated members, plain nettrace), inflated, and fed to the parser. Seeds:
 * tests/fuzz/seeds/traces (recordings of the sample target, plain, gzipped and zipped), the
 * public corpus (zips among them) when DNT_CORPUS is set. The events go to the summary of
 * `info TRACE` too (dnt_summary: its tables, thread names and RuntimeInformation decoding), with
 * the property that its counts add up, and to a profile with its timeline (thread names, the
 * ProcessInfo command line; async stacks stitched from the task library's and the thread pool's
 * events: seed traces/async-rules, tests/cli/test-oracle-stacks.c's written trace), written as
 * speedscope and Chromium files to /dev/null. */
#include <stdint.h>
#include <stdlib.h>

#include <stdio.h>

#include "dnt-profile.h"
#include "dnt-trace.h"
#include "fuzz-file.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static size_t sum;

static int on_event(void *ud, const ntr_event *e) {
  (void)ud;
  if (e->payload_size) sum += e->payload[0];
  return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  ntr_fanout fan;
  ntr_callbacks cb = {.on_event = on_event}, summary_cb, profile_cb;
  struct dnt_profile *prof = dnt_profile_new();
  if (!prof) return 0;
  dnt_profile_keep_timeline(prof);
  dnt_profile_set_tasks(prof, DNT_TASKS_STITCHED);
  dnt_profile_callbacks(&profile_cb);
  dnt_summary s;
  dnt_summary_init(&s);
  dnt_summary_callbacks(&summary_cb);
  ntr_fanout_init(&fan);
  ntr_fanout_add(&fan, &cb, NULL);
  ntr_fanout_add(&fan, &summary_cb, &s);
  ntr_fanout_add(&fan, &profile_cb, prof);
  ntr_fanout_callbacks(&fan, &cb);
  char path[32], err[512];
  ntr_stats stats;
  fuzz_file(data, size, path, sizeof path);
  dnt_trace_read(path, &cb, &fan, &stats, err, sizeof err);
  if (dnt_summary_finish(&s) == 0) {
    uint64_t by_provider = 0, by_kind = 0;
    for (size_t i = 0; i < s.nproviders; i++) by_provider += s.providers[i].events;
    for (size_t i = 0; i < s.nkinds; i++) by_kind += s.kinds[i].count;
    /* every event is counted once: under its provider and kind, or as one without metadata */
    if (by_provider != by_kind || by_provider + s.unknown_events != s.events) abort();
  }
  dnt_summary_release(&s);
  static FILE *null;
  if (!null) null = fopen("/dev/null", "w");
  if (dnt_profile_finish(prof) == 0 && null) {
    dnt_profile_write(prof, DNT_PROFILE_SPEEDSCOPE, "t", null);
    dnt_profile_write(prof, DNT_PROFILE_CHROMIUM, "t", null);
  }
  dnt_profile_free(prof);
  return 0;
}
