/* dntrace info TRACE: on the public corpus its numbers equal an independent count (nt-scan: events,
 * events per provider, samples per thread) and what INDEX.md says of each trace (pointer size,
 * runtime version, truncation); a cut copy says truncated; a V6 trace written here by hand gives
 * back the thread names, pid, CPU count and sampling interval it was written with. The JSON is
 * read by Python's json module, so it is valid JSON. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../lib/env-cr.h"
#include "../lib/nt-scan.h"
#include "../lib/ntr-writer.h"
#include "../lib/run.h"
#include "../lib/v6-trace.h"

#define SAMPLER "Microsoft-DotNETCore-SampleProfiler"

/* ---- the corpus ---- */

static const char *corpus(void) {
  static char dir[4096];
  return corpus_dir(dir, sizeof dir);
}

/* The "runtime / OS / pointer size" column of INDEX.md's row for file. */
static char *index_runtime_column(const char *dir, const char *file) {
  char path[4200], line[2048], head[512];
  snprintf(path, sizeof path, "%s/INDEX.md", dir);
  snprintf(head, sizeof head, "| %s |", file);
  FILE *fp = fopen(path, "r");
  cr_assert(fp, "cannot read %s", path);
  char *col = NULL;
  while (!col && fgets(line, sizeof line, fp)) {
    if (strncmp(line, head, strlen(head)) != 0) continue;
    /* | file | source | runtime / OS / pointer size | format | notes | */
    char *p = line;
    for (int bars = 0; bars < 2 && p; bars++) p = strchr(p + 1, '|');
    cr_assert(p, "INDEX.md row of %s has its columns", file);
    char *end = strchr(p + 1, '|');
    col = strndup(p + 1, end ? (size_t)(end - p - 1) : strlen(p + 1));
  }
  fclose(fp);
  cr_assert(col, "INDEX.md describes %s", file);
  return col;
}

/* ---- the JSON, through Python ---- */

struct info {
  char state[32], runtime[64];
  unsigned long long events, samples, dropped, pointer_size, pid, cpus, sampling_ns;
  double duration;
  struct { char name[128]; unsigned long long events; } providers[64];
  int nproviders;
  struct { unsigned long long id, samples, events; char name[64]; } threads[256];
  int nthreads;
};

/* Flattens info --json with Python's json module (which refuses anything that is not JSON) into
 * "key=value" lines, then reads them. */
static void info_json(const char *trace, struct info *in) {
  static const char py[] =
      "import json,sys\n"
      "d=json.loads(sys.stdin.read())\n"
      "for k in ('state','runtimeVersion','events','samples','droppedEvents','pointerSize','processId',\n"
      "          'cpuCount','samplingIntervalNs','durationSeconds'):\n"
      "    print('%s=%s' % (k, d[k] if d[k] is not None else ''))\n"
      "for p in d['providers']: print('provider=%d=%s' % (p['events'], p['name']))\n"
      "for t in d['threads']: print('thread=%d=%d=%d=%s' % (t['id'], t['samples'], t['events'], t['name'] or ''))\n";
  char dir[] = "/tmp/dnt-info-XXXXXX", json[64], cmd[8192];
  cr_assert(mkdtemp(dir));
  snprintf(json, sizeof json, "%s/info.json", dir);
  struct dnt_run r;
  cr_assert_eq(dnt_run_dntrace(&r, "info", "--json", trace, NULL), 0, "info --json %s: %s", trace, r.err);
  FILE *fp = fopen(json, "w");
  cr_assert(fp);
  fputs(r.out, fp);
  fclose(fp);
  dnt_run_free(&r);
  snprintf(cmd, sizeof cmd, "python3 -c \"$DNT_PY\" < %s", json);
  setenv("DNT_PY", py, 1);
  FILE *p = popen(cmd, "r");
  cr_assert(p);
  memset(in, 0, sizeof *in);
  char line[1024];
  int lines = 0;
  while (fgets(line, sizeof line, p)) {
    line[strcspn(line, "\n")] = '\0';
    char *eq = strchr(line, '=');
    if (!eq) continue;
    *eq++ = '\0';
    lines++;
    if (strcmp(line, "state") == 0) snprintf(in->state, sizeof in->state, "%s", eq);
    else if (strcmp(line, "runtimeVersion") == 0) snprintf(in->runtime, sizeof in->runtime, "%s", eq);
    else if (strcmp(line, "events") == 0) in->events = strtoull(eq, NULL, 10);
    else if (strcmp(line, "samples") == 0) in->samples = strtoull(eq, NULL, 10);
    else if (strcmp(line, "droppedEvents") == 0) in->dropped = strtoull(eq, NULL, 10);
    else if (strcmp(line, "pointerSize") == 0) in->pointer_size = strtoull(eq, NULL, 10);
    else if (strcmp(line, "processId") == 0) in->pid = strtoull(eq, NULL, 10);
    else if (strcmp(line, "cpuCount") == 0) in->cpus = strtoull(eq, NULL, 10);
    else if (strcmp(line, "samplingIntervalNs") == 0) in->sampling_ns = strtoull(eq, NULL, 10);
    else if (strcmp(line, "durationSeconds") == 0) in->duration = atof(eq);
    else if (strcmp(line, "provider") == 0 && in->nproviders < 64) {
      char *name = strchr(eq, '=');
      cr_assert(name);
      *name++ = '\0';
      in->providers[in->nproviders].events = strtoull(eq, NULL, 10);
      snprintf(in->providers[in->nproviders++].name, sizeof in->providers[0].name, "%s", name);
    } else if (strcmp(line, "thread") == 0 && in->nthreads < 256) {
      char *end;
      in->threads[in->nthreads].id = strtoull(eq, &end, 10);
      in->threads[in->nthreads].samples = strtoull(end + 1, &end, 10);
      in->threads[in->nthreads].events = strtoull(end + 1, &end, 10);
      snprintf(in->threads[in->nthreads++].name, sizeof in->threads[0].name, "%s", end + 1);
    }
  }
  cr_assert_eq(pclose(p), 0, "python3 read the output of info --json %s as JSON", trace);
  cr_assert_geq(lines, 10, "python3 printed the fields of %s", trace);
  unlink(json);
  rmdir(dir);
}

/* ---- corpus traces against nt-scan and INDEX.md ---- */

/* What INDEX.md says: the pointer size (32-bit / x86: 4, else 8) and the runtime's version
 * (".NET Core 3.1" -> "3.1", ".NET 8" -> "8"). */
static void index_expectations(const char *column, unsigned *pointer, char *version, size_t cap) {
  *pointer = strstr(column, "32-bit") || strstr(column, "x86") ? 4 : 8;
  const char *v = strstr(column, ".NET Core ");
  v = v ? v + strlen(".NET Core ") : (v = strstr(column, ".NET ")) ? v + strlen(".NET ") : NULL;
  cr_assert(v, "a runtime in '%s'", column);
  size_t n = strspn(v, "0123456789.");
  while (n && v[n - 1] == '.') n--;
  snprintf(version, cap, "%.*s", (int)n, v);
}

static void check_corpus_trace(const char *file, int has_rundown) {
  const char *dir = corpus();
  char path[4300];
  snprintf(path, sizeof path, "%s/%s", dir, file);
  struct info in;
  info_json(path, &in);

  char *column = index_runtime_column(dir, file), version[32];
  unsigned pointer;
  index_expectations(column, &pointer, version, sizeof version);
  cr_assert_eq(in.pointer_size, pointer, "%s: INDEX.md says '%s', info says pointer size %llu", file, column,
               in.pointer_size);
  if (has_rundown) {
    /* "3.1" for 3.1.0; "8" for 8.0.10 */
    size_t n = strlen(version);
    cr_assert(strncmp(in.runtime, version, n) == 0 && (in.runtime[n] == '.' || in.runtime[n] == '\0'),
              "%s: INDEX.md says '%s', info says runtime %s", file, column, in.runtime);
  }
  free(column);

  if (strstr(file, ".zip")) return; /* nt-scan reads plain files */
  static struct nt_scan s;
  memset(&s, 0, sizeof s);
  cr_assert_eq(nt_scan_file(path, &s), 0);
  cr_assert_eq(in.events, s.events, "%s: info says %llu events, nt-scan counts %llu", file, in.events,
               (unsigned long long)s.events);
  cr_assert_eq(in.pointer_size, s.pointer_size, "%s", file);
  cr_assert_eq(in.sampling_ns, s.sampling_ns, "%s", file);
  cr_assert_lt(s.ncounts, (int)(sizeof s.counts / sizeof s.counts[0]), "%s: nt-scan kept every count", file);
  unsigned long long total = 0;
  for (int i = 0; i < in.nproviders; i++) {
    uint64_t n = nt_scan_count(&s, in.providers[i].name, -1, 0);
    cr_assert_eq(in.providers[i].events, n, "%s: %s has %llu events, nt-scan counts %llu", file,
                 in.providers[i].name, in.providers[i].events, (unsigned long long)n);
    total += in.providers[i].events;
  }
  cr_assert_eq(total, in.events, "%s: the providers' events add up", file);
  unsigned long long samples = 0;
  for (int i = 0; i < in.nthreads; i++) {
    uint64_t n = nt_scan_count(&s, SAMPLER, 0, in.threads[i].id);
    cr_assert_eq(in.threads[i].samples, n, "%s: thread %llu has %llu samples, nt-scan counts %llu", file,
                 in.threads[i].id, in.threads[i].samples, (unsigned long long)n);
    samples += in.threads[i].samples;
  }
  cr_assert_eq(samples, in.samples, "%s", file);
  cr_assert_eq(in.samples, nt_scan_count(&s, SAMPLER, 0, 0), "%s", file);
  cr_assert_eq(in.state[0] == 'c', s.complete, "%s: state %s, nt-scan complete=%d", file, in.state, s.complete);
  cr_assert_gt(in.duration, 0, "%s", file);
}

Test(info_trace, corpus_32bit_linux) { check_corpus_trace("microsoft__perfview/HeartRateMonitor.10068.nettrace", 1); }
Test(info_trace, corpus_32bit_zipped) { check_corpus_trace("microsoft__perfview/VoiceMemo.23092.nettrace.zip", 1); }
Test(info_trace, corpus_net5_samples) { check_corpus_trace("microsoft__perfview/mixed_managed_external_samples.nettrace", 1); }
Test(info_trace, corpus_net5_v2params) { check_corpus_trace("shirhatti__Nettrace/allocTrace.nettrace", 1); }
Test(info_trace, corpus_net8) { check_corpus_trace("zetslief__nettrace/perf.nettrace", 1); }
Test(info_trace, corpus_net10_counters) { check_corpus_trace("tbbuck__countercow/generic-net10.nettrace", 0); }

/* INDEX.md: truncated inside its last EventBlock; every complete block is counted */
Test(info_trace, corpus_truncated) {
  check_corpus_trace("dotnet__diagnostics/trace.nettrace", 0);
  char path[4300];
  snprintf(path, sizeof path, "%s/dotnet__diagnostics/trace.nettrace", corpus());
  struct info in;
  info_json(path, &in);
  cr_assert_str_eq(in.state, "truncated");
  struct dnt_run r;
  cr_assert_eq(dnt_run_dntrace(&r, "info", path, NULL), 0, "%s", r.err);
  cr_assert(strstr(r.out, "State               : truncated: "), "%s", r.out);
  dnt_run_free(&r);
}

/* A copy cut in the middle says so, and counts what came before the cut. */
Test(info_trace, cut_copy_is_truncated) {
  char src[4300];
  snprintf(src, sizeof src, "%s/microsoft__perfview/only_managed_samples.nettrace", corpus());
  FILE *in = fopen(src, "rb");
  cr_assert(in);
  fseek(in, 0, SEEK_END);
  long size = ftell(in);
  rewind(in);
  char *buf = malloc((size_t)size);
  cr_assert_eq(fread(buf, 1, (size_t)size, in), (size_t)size);
  fclose(in);
  char dir[] = "/tmp/dnt-info-XXXXXX", cut[64];
  cr_assert(mkdtemp(dir));
  snprintf(cut, sizeof cut, "%s/cut.nettrace", dir);
  FILE *out = fopen(cut, "wb");
  cr_assert(out);
  fwrite(buf, 1, (size_t)size / 2, out);
  fclose(out);
  free(buf);
  struct info full, half;
  info_json(src, &full);
  info_json(cut, &half);
  cr_assert_str_eq(full.state, "complete");
  cr_assert_str_eq(half.state, "truncated");
  cr_assert_gt(half.events, 0);
  cr_assert_lt(half.events, full.events);
  static struct nt_scan s;
  memset(&s, 0, sizeof s);
  cr_assert_eq(nt_scan_file(cut, &s), 0);
  cr_assert_eq(half.events, s.events, "the events of the complete blocks before the cut");
  unlink(cut);
  rmdir(dir);
}

/* ---- a V6 trace written here: every value is known by construction (lib/v6-trace.h) ---- */

Test(info_trace, v6_thread_names_and_header) {
  char dir[] = "/tmp/dnt-info-XXXXXX", path[64];
  cr_assert(mkdtemp(dir));
  snprintf(path, sizeof path, "%s/v6.nettrace", dir);
  cr_assert_eq(dnt_write_v6_trace(path), 0);
  struct info in;
  info_json(path, &in);
  cr_assert_str_eq(in.state, "complete");
  cr_assert_eq(in.pid, V6_PID);
  cr_assert_eq(in.cpus, 6);
  cr_assert_eq(in.sampling_ns, 2000000);
  cr_assert_eq(in.events, 10);
  cr_assert_eq(in.samples, 8);
  cr_assert_eq(in.dropped, 0);
  /* 10 events 2 ms apart: 18 ms from the first to the last */
  cr_assert(in.duration > 0.017999 && in.duration < 0.018001, "duration %f", in.duration);
  cr_assert_eq(in.nthreads, 3);
  cr_assert_eq(in.threads[0].id, 4001);
  cr_assert_str_eq(in.threads[0].name, "cpu-work");
  cr_assert_eq(in.threads[0].samples, 5);
  cr_assert_eq(in.threads[1].id, 4002);
  cr_assert_str_eq(in.threads[1].name, "blocking-work");
  cr_assert_eq(in.threads[1].samples, 3);
  cr_assert_eq(in.threads[2].id, 4003);
  cr_assert_str_eq(in.threads[2].name, "");
  cr_assert_eq(in.threads[2].events, 2);

  struct dnt_run r;
  cr_assert_eq(dnt_run_dntrace(&r, "info", "-v", path, NULL), 0, "%s", r.err);
  cr_assert(strstr(r.out, "4001 (cpu-work)"), "%s", r.out);
  cr_assert(strstr(r.out, "NetTrace V6"), "%s", r.out);
  cr_assert(strstr(r.out, "My-Provider/Tick"), "%s", r.out);
  dnt_run_free(&r);
  /* the names of a `.threads` file beside it (collect --native's) win over the trace's, and name
   * the thread it left unnamed */
  char names[96];
  snprintf(names, sizeof names, "%s/v6.threads", dir);
  FILE *fp = fopen(names, "w");
  cr_assert(fp);
  fputs("4001\tworker-one\n4003\tthird one\n", fp);
  fclose(fp);
  cr_assert_eq(dnt_run_dntrace(&r, "info", path, NULL), 0, "%s", r.err);
  cr_assert(strstr(r.out, "4001 (worker-one)\n") && strstr(r.out, "4002 (blocking-work)\n") &&
                strstr(r.out, "4003 (third one)\n"),
            "%s", r.out);
  dnt_run_free(&r);
  unlink(names);
  unlink(path);
  rmdir(dir);
}

/* Drops: a writer whose sequence numbers jump from 2 to 6 lost 3 events (by construction). */
Test(info_trace, dropped_events) {
  static const char *kv[] = {"ProcessId", "77"};
  ntrw_trace t = {1000, 1000000000, 8, 0, 0, 0, kv, 1};
  ntrw_md md = {1, "My-Provider", 7, "Tick", 0, 0, 4, -1, NULL, 0, 0, 0};
  ntrw w;
  ntrw_init(&w, 1);
  ntrw_trace_hdr(&w, &t);
  ntrw_thread(&w, 1, 501, "writer");
  ntrw_md_begin(&w);
  ntrw_metadata(&w, &md);
  ntrw_block_end(&w);
  ntrw_ev_begin(&w, 1);
  static const uint32_t seq[] = {1, 2, 6, 7};
  for (int i = 0; i < 4; i++) {
    ntrw_ev ev = {.metadata_id = 1, .seq = seq[i], .thread = 1, .capture_thread = 1, .ts = 2000 + (uint64_t)i};
    ntrw_event(&w, &ev);
  }
  ntrw_block_end(&w);
  ntrw_end(&w);
  char dir[] = "/tmp/dnt-info-XXXXXX", path[64];
  cr_assert(mkdtemp(dir));
  snprintf(path, sizeof path, "%s/drops.nettrace", dir);
  FILE *fp = fopen(path, "wb");
  cr_assert(fp);
  cr_assert_eq(fwrite(w.buf, 1, w.len, fp), w.len);
  fclose(fp);
  ntrw_release(&w);
  struct info in;
  info_json(path, &in);
  cr_assert_eq(in.events, 4);
  cr_assert_eq(in.dropped, 3);
  cr_assert_eq(in.pid, 77);
  cr_assert_str_eq(in.threads[0].name, "writer");
  struct dnt_run r;
  cr_assert_eq(dnt_run_dntrace(&r, "info", path, NULL), 0, "%s", r.err);
  cr_assert(strstr(r.out, "Dropped events      : 3 "), "%s", r.out);
  dnt_run_free(&r);
  unlink(path);
  rmdir(dir);
}

Test(info_trace, usage_errors) {
  struct dnt_run r;
  cr_assert_eq(dnt_run_dntrace(&r, "info", "-p", "1", "/tmp/x.nettrace", NULL), 2);
  cr_assert(strstr(r.err, "not both"), "%s", r.err);
  dnt_run_free(&r);
  cr_assert_eq(dnt_run_dntrace(&r, "info", "/etc/passwd", NULL), 1);
  cr_assert(strstr(r.err, "not a nettrace file"), "%s", r.err);
  cr_assert_eq(strchr(r.err, '\n'), r.err + strlen(r.err) - 1, "one line: %s", r.err);
  dnt_run_free(&r);
  cr_assert_eq(dnt_run_dntrace(&r, "info", "--env", "/etc/passwd", NULL), 2);
  dnt_run_free(&r);
  cr_assert_eq(dnt_run_dntrace(&r, "info", "a.nettrace", "b.nettrace", NULL), 2);
  dnt_run_free(&r);
}
