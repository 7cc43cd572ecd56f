/* Reading a trace file into the nettrace parser, in fixed-size chunks (memory does not grow
 * with the file): a plain .nettrace, a gzip-compressed one, or the first .nettrace member of a
 * zip archive. Shared by the commands that read traces (events, report, convert). Never prints;
 * every message is returned in the caller's buffer, ready for dnt_error/dnt_warning. */
#ifndef DNT_TRACE_INPUT_H
#define DNT_TRACE_INPUT_H

#include <stddef.h>

#include "ntr.h"

/* What dnt_trace_read returns besides a negative "unreadable". */
enum dnt_trace_status {
  DNT_TRACE_COMPLETE = 0,  /* read up to the end-of-stream marker */
  DNT_TRACE_TRUNCATED = 1, /* the stream stops before its end (a killed writer, a cut copy);
                              everything complete before the cut was delivered */
  DNT_TRACE_DAMAGED = 2,   /* malformed (or over a parser limit) after the trace header, or the
                              archive's CRC does not match; everything before was delivered */
  DNT_TRACE_STOPPED = 3    /* a callback returned nonzero: reading stopped there */
};

/* Bytes handed to the parser per call (and the size of the compressed-input buffer). */
#define DNT_TRACE_CHUNK (64 * 1024)

/* Reads the trace at `path` ("-" is standard input) into a new parser with callbacks `cb`
 * (may be NULL; copied) and user data `ud`. The container is recognised by its first bytes,
 * not its name: gzip (1f 8b), zip ("PK\3\4": the first member named *.nettrace, else the
 * first *.netperf, else an error; stored or deflated; a zip needs a seekable file), anything
 * else is read as nettrace.
 *
 * Returns a dnt_trace_status, or -1 when nothing could be read as a trace (cannot open, I/O
 * error, not a trace, unsupported version, cut before the trace header). For TRUNCATED,
 * DAMAGED and -1, err (errlen bytes, caller-owned, may be NULL) receives one line without
 * "error:", e.g. "'f.nettrace' is truncated at byte 1234 inside an object (waiting for ...)" or
 * "'f.txt' is not a nettrace file". `stats` (may be NULL) receives the parser's counters
 * (events delivered, dropped_events, bytes). */
int dnt_trace_read(const char *path, const ntr_callbacks *cb, void *ud, ntr_stats *stats, char *err,
                   size_t errlen);

#endif
