/* test-ntr-corpus.c: every trace of the public corpus (../shared/corpus, or $DNT_CORPUS) is
 * read to its end or to its known truncation, the same way in every run and for every split.
 * Expected facts come from outside the parser: bytes at fixed offsets of the Trace object,
 * tests/lib/nt-scan.c (an independent structural reader) and INDEX.md. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <zlib.h>

#include "../../lib/env-cr.h"
#include "../../lib/nt-scan.h"
#include "../../lib/ntr-transcript.h"
#include "ntr.h"

struct expect {
  const char *path;
  int zipped;
  int netperf;        /* NetPerf V3 (.NET Core 2.x): no Nettrace magic before the preamble */
  int complete;       /* has its end-of-stream tag */
};

static const struct expect corpus[] = {
    {"microsoft__perfview/eventpipe-dotnetcore3.0-win-x64-objver4.nettrace", 0, 0, 1},
    {"microsoft__perfview/eventpipe-dotnetcore5.0-win-x64-arraytypes.nettrace", 0, 0, 1},
    {"microsoft__perfview/eventpipe-dotnetcore6.0-win-x64-executioncheckpoints.nettrace", 0, 0, 1},
    {"microsoft__perfview/HeartRateMonitor.10068.nettrace", 0, 0, 1},
    {"microsoft__perfview/VoiceMemo.23092.nettrace.zip", 1, 0, 1},
    {"microsoft__perfview/mixed_managed_external_samples.nettrace", 0, 0, 1},
    {"microsoft__perfview/only_managed_samples.nettrace", 0, 0, 1},
    {"microsoft__perfview/eventpipe-dotnetcore2.1-linux-x64-tracelogging.netperf", 0, 1, 1},
    {"microsoft__perfview/eventpipe-dotnetcore2.1-win-x86-objver3.netperf.zip", 1, 1, 1},
    {"dotnet__diagnostics/trace.nettrace", 0, 0, 0},
    {"zetslief__nettrace/perf.nettrace", 0, 0, 1},
    {"zetslief__nettrace/perf_100ms.nettrace", 0, 0, 0},
    {"zetslief__nettrace/perf_with_work.nettrace", 0, 0, 0},
    {"zetslief__nettrace/task_trace.nettrace", 0, 0, 1},
    {"shirhatti__Nettrace/allocTrace.nettrace", 0, 0, 1},
    {"tbbuck__countercow/console-net8.nettrace", 0, 0, 1},
    {"tbbuck__countercow/aspnet-net9.nettrace", 0, 0, 1},
    {"tbbuck__countercow/generic-net10.nettrace", 0, 0, 1},
    {"tbbuck__countercow/aspnet-net10-loaded.nettrace", 0, 0, 1},
    {"tbbuck__countercow/runtime-net10-loaded.nettrace", 0, 0, 1},
};
#define NCORPUS (sizeof(corpus) / sizeof(corpus[0]))

static char corpus_root[4096];

static void need_corpus(void) { corpus_dir(corpus_root, sizeof corpus_root); }

static uint8_t *slurp(const char *path, size_t *len) {
  FILE *f = fopen(path, "rb");
  uint8_t *b;
  long n;
  if (!f)
    return NULL;
  fseek(f, 0, SEEK_END);
  n = ftell(f);
  fseek(f, 0, SEEK_SET);
  b = malloc((size_t)n + 1);
  if (b && fread(b, 1, (size_t)n, f) != (size_t)n) {
    free(b);
    b = NULL;
  }
  fclose(f);
  *len = (size_t)n;
  return b;
}

static uint32_t rd16(const uint8_t *p) { return (uint32_t)(p[0] | (p[1] << 8)); }
static uint32_t rd32(const uint8_t *p) { return rd16(p) | (rd16(p + 2) << 16); }

/* The first member of a zip archive, inflated in memory (central directory sizes, so a data
 * descriptor does not matter). */
static uint8_t *unzip_first(const uint8_t *z, size_t zlen, size_t *outlen) {
  size_t i, cd, lh, data;
  uint32_t method, csize, usize;
  uint8_t *out;
  z_stream s;
  if (zlen < 22)
    return NULL;
  for (i = zlen - 22;; i--) {
    if (rd32(z + i) == 0x06054b50)
      break;
    if (i == 0)
      return NULL;
  }
  cd = rd32(z + i + 16);
  if (cd + 46 > zlen || rd32(z + cd) != 0x02014b50)
    return NULL;
  method = rd16(z + cd + 10);
  csize = rd32(z + cd + 20);
  usize = rd32(z + cd + 24);
  lh = rd32(z + cd + 42);
  if (lh + 30 > zlen || rd32(z + lh) != 0x04034b50)
    return NULL;
  data = lh + 30 + rd16(z + lh + 26) + rd16(z + lh + 28);
  if (data + csize > zlen)
    return NULL;
  out = malloc(usize ? usize : 1);
  if (!out)
    return NULL;
  if (method == 0) {
    memcpy(out, z + data, usize);
  } else if (method == 8) {
    memset(&s, 0, sizeof(s));
    if (inflateInit2(&s, -15) != Z_OK) {
      free(out);
      return NULL;
    }
    s.next_in = (Bytef *)(uintptr_t)(z + data);
    s.avail_in = csize;
    s.next_out = out;
    s.avail_out = usize;
    if (inflate(&s, Z_FINISH) != Z_STREAM_END || s.total_out != usize) {
      inflateEnd(&s);
      free(out);
      return NULL;
    }
    inflateEnd(&s);
  } else {
    free(out);
    return NULL;
  }
  *outlen = usize;
  return out;
}

static uint8_t *load(const struct expect *e, size_t *len) {
  char path[4400];
  uint8_t *raw, *u;
  size_t rlen;
  snprintf(path, sizeof(path), "%s/%s", corpus_root, e->path);
  raw = slurp(path, &rlen);
  cr_assert_not_null(raw, "cannot read %s", path);
  if (!e->zipped) {
    *len = rlen;
    return raw;
  }
  u = unzip_first(raw, rlen, len);
  free(raw);
  cr_assert_not_null(u, "cannot unzip %s", path);
  return u;
}

/* Reads each file whole, checks it against the independent facts, prints a summary line. */
Test(ntr_corpus, every_file_reads_to_its_end_or_known_truncation, .timeout = 120) {
  size_t i;
  need_corpus();
  for (i = 0; i < NCORPUS; i++) {
    const struct expect *e = &corpus[i];
    ntr_transcript t;
    struct nt_scan *scan;
    size_t len;
    uint8_t *b = load(e, &len);
    char msg[256];
    int rc;

    ntr_transcript_init(&t, 0);
    rc = ntr_transcript_run(&t, b, len, 0, 0, NULL, msg, sizeof(msg));
    cr_assert_eq(rc, e->complete ? 0 : NTR_ETRUNCATED, "%s: %s (%s)", e->path, ntr_err_name(rc),
                 msg);
    cr_assert_gt(t.events, 0, "%s", e->path);
    cr_assert_eq(t.traces, 1);
    cr_assert_eq(t.trace.format, e->netperf ? NTR_FORMAT_NETPERF : NTR_FORMAT_V4, "%s", e->path);
    /* The Trace object's payload sits at a fixed offset in every V4/V5 file: after the magic,
     * the preamble and the "Trace" type header (byte 53); NetPerf has no magic (byte 45). */
    size_t at = e->netperf ? 45 : 53;
    cr_assert_eq(t.trace.pointer_size, rd32(b + at + 32), "%s", e->path);
    cr_assert_eq(t.trace.process_id, rd32(b + at + 36), "%s", e->path);
    cr_assert_eq(t.trace.qpc_frequency, (uint64_t)rd32(b + at + 24) | ((uint64_t)rd32(b + at + 28) << 32));
    /* An independent scan agrees on the number of events. */
    scan = calloc(1, sizeof(*scan));
    nt_scan(b, len, scan);
    cr_assert_eq(t.events, scan->events, "%s: %llu events, nt-scan %llu (%s)", e->path,
                 (unsigned long long)t.events, (unsigned long long)scan->events, scan->problem);
    cr_assert_eq(!!scan->complete, e->complete, "%s", e->path);
    printf("# %-80s ptr=%u pid=%u events=%llu md=%llu stacks=%llu sps=%llu %s\n", e->path,
           t.trace.pointer_size, t.trace.process_id, (unsigned long long)t.events,
           (unsigned long long)t.metadata, (unsigned long long)t.stacks,
           (unsigned long long)t.sps, e->complete ? "complete" : msg);
    free(scan);
    free(b);
    ntr_transcript_release(&t);
  }
}

/* Transcript digests are the same for every way of splitting each file. */
Test(ntr_corpus, split_invariance, .timeout = 300) {
  static const long chunks[] = {1, 2, 3, 7, 64, 4096, -13, -70000};
  size_t i, k;
  /* timing: CPU seconds printed, not asserted */
  clock_t start = clock();
  need_corpus();
  for (i = 0; i < NCORPUS; i++) {
    const struct expect *e = &corpus[i];
    ntr_transcript whole;
    size_t len;
    uint8_t *b;
    b = load(e, &len);
    ntr_transcript_init(&whole, 0);
    ntr_transcript_run(&whole, b, len, 0, 0, NULL, NULL, 0);
    for (k = 0; k < sizeof(chunks) / sizeof(chunks[0]); k++) {
      ntr_transcript t;
      /* Tiny splits of big files only cost time: the synthetic tests cover them. */
      if (chunks[k] > 0 && chunks[k] < 64 && len > (chunks[k] == 1 ? 1u << 20 : 4u << 20))
        continue;
      ntr_transcript_init(&t, 0);
      ntr_transcript_run(&t, b, len, chunks[k], (unsigned)(i + 1), NULL, NULL, 0);
      cr_assert_eq(t.digest, whole.digest, "%s: split %ld differs", e->path, chunks[k]);
      cr_assert_eq(t.events, whole.events);
      ntr_transcript_release(&t);
    }
    ntr_transcript_release(&whole);
    free(b);
  }
  /* timing: as above */
  printf("# corpus split invariance: %.1f s CPU\n", (double)(clock() - start) / CLOCKS_PER_SEC);
}
