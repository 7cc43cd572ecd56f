/* trace/: reading traces. The trace-file input (plain, gzip, zip) that feeds the nettrace parser,
 * self-describing payload fields decoded by name, the XML schemas of the runtime's own events, and
 * a trace's summary (what `info TRACE` shows), an event matched by provider, name and payload,
 * and the temporary a file is written whole in.
 * One public header; the library never prints and never exits: every message is returned in the
 * caller's buffer or on the object, ready for the command to print. */
#ifndef DNT_TRACE_H
#define DNT_TRACE_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "ntr.h"

/* ============================================================================================== */
/* Reading a trace file into the nettrace parser, in fixed-size chunks (memory does not grow
 * with the file): a plain .nettrace, a gzip-compressed one, or the first .nettrace member of a
 * zip archive. Shared by the commands that read traces (events, report, convert). Never prints;
 * every message is returned in the caller's buffer, ready for dnt_error/dnt_warning. */

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

/* Whether the zip archive at `path` holds several members of the kind dnt_trace_read picks
 * (*.nettrace, else *.netperf): 1, with one line in note (cap bytes, caller-owned) naming the one
 * read, for the command to print as a warning; 0 otherwise (not a zip, one member, unreadable:
 * dnt_trace_read says what is wrong). Reads the central directory only. */
int dnt_trace_zip_note(const char *path, char *note, size_t cap);

/* How many times dnt_trace_read was called in this process: one pass or several. */
unsigned dnt_trace_opens(void);

/* ============================================================================================== */
/* Decoding a self-describing event payload (EventSource, TraceLogging, EventPipe's own events)
 * by the field tree its metadata carries: names, types and values, nested objects and arrays.
 * Independent of the CLI: no printing, no exits; shared by `events` and `counters`.
 *
 * A payload is decoded into a dnt_record: a flat list of values in payload order. Objects and
 * arrays appear as an OBJECT/ARRAY value, their members, then an END value, so a printer can
 * rebuild the nesting; every value also has its dotted name ("Payload.Mean", "items[2].x"), so a
 * reader can look one up directly. Every read is checked against the payload's size: a short or
 * malformed payload is an error with a message, never a read past its end.
 *
 * Runtime events (DotNETRuntime, Rundown, SampleProfiler) have no field descriptions: their
 * metadata has nfields == 0 and they decode to an empty record; their layouts are in the
 * schema (dnt_schema_find, dnt_record_decode_layout below). */

enum dnt_value_kind {
  DNT_VALUE_INT = 1, /* i: SByte, Int16, Int32, Int64, VarInt */
  DNT_VALUE_UINT,    /* u: Byte, UInt16, UInt32, UInt64, VarUInt */
  DNT_VALUE_FLOAT,   /* f: Single, Double */
  DNT_VALUE_BOOL,    /* b (0 or 1), u: the raw value */
  DNT_VALUE_STRING,  /* s/slen, UTF-8: String; Char and UTF8 char (u: the code unit); Guid
                        (registry form, lowercase); DateTime (ISO-8601 UTC with 7 decimals,
                        u: the raw FILETIME); Decimal (its exact decimal text) */
  DNT_VALUE_BYTES,   /* raw/rawlen: RelLoc and DataLoc data (V6) */
  DNT_VALUE_OBJECT,  /* an Object begins: count = its fields; they follow, then an END */
  DNT_VALUE_ARRAY,   /* an array begins: count = its elements; they follow, then an END */
  DNT_VALUE_END      /* ends the innermost OBJECT or ARRAY (type says which) */
};

typedef struct dnt_value {
  const char *name;      /* dotted path: "n", "Payload.Name", "items[2].x"; UTF-8 */
  const char *key;       /* the field's own name ("Name"); "" for an array element */
  uint32_t type;         /* enum ntr_type of the field (END: of what it closes) */
  int kind;              /* enum dnt_value_kind */
  uint32_t depth;        /* 0 for top-level fields */
  uint32_t index;        /* position in the enclosing array, when in one */
  uint32_t count;        /* OBJECT: fields; ARRAY: elements */
  int64_t i;
  uint64_t u;
  double f;
  int b;
  const char *s;         /* STRING: NUL-terminated UTF-8 (may contain no NUL before slen) */
  size_t slen;
  const uint8_t *raw;    /* the value's bytes in the payload (BYTES: the referenced data) */
  size_t rawlen;
  size_t offset;         /* where the value starts in the payload */
} dnt_value;

/* A decoded payload. Reusable: decode event after event into the same record, its buffers are
 * kept. Every pointer in values[] points into the record (or into the payload for `raw`) and is
 * valid until the next decode or release. */
typedef struct dnt_record {
  size_t nvalues;
  dnt_value *values;
  size_t trailing;       /* payload bytes after the last field (0 for a well-formed payload) */
  char err[256];         /* why the last decode failed ("" when it did not) */
  /* private */
  size_t cap_values;
  size_t *offs;          /* name, key and s as offsets into text while decoding */
  char *text;
  size_t text_len, text_cap;
} dnt_record;

/* Bounds on what one payload may make a record hold (exceeding one is NTR_ELIMIT). */
#define DNT_FIELDS_MAX_VALUES (1u << 20)
#define DNT_FIELDS_MAX_TEXT ((size_t)64 << 20)

void dnt_record_init(dnt_record *r);
/* Frees what r holds; r may be decoded into again after a new dnt_record_init. */
void dnt_record_release(dnt_record *r);

/* Decodes `len` bytes of `payload` (caller-owned; `raw` pointers point into it) by the
 * `nfields` top-level fields of a metadata record. Returns 0, or NTR_ETRUNCATED (the payload
 * is shorter than its fields), NTR_EFORMAT (an unknown type code, an array without an element
 * type, a bad varint or Decimal, a RelLoc/DataLoc outside the payload), NTR_ELIMIT or
 * NTR_ENOMEM, with r->err saying which field and where. After an error the values decoded
 * before it are still in r->values. */
int dnt_record_decode(dnt_record *r, const ntr_field *fields, uint32_t nfields, const uint8_t *payload, size_t len);

/* The same, for an event by its metadata; NTR_EINVAL (with err) when the event has none. */
int dnt_record_decode_event(dnt_record *r, const ntr_event *ev);

/* The value with this dotted name (exact, case-sensitive), or NULL. Never returns an END. */
const dnt_value *dnt_record_get(const dnt_record *r, const char *name);
/* The string value with this name, or NULL when absent or not a STRING. */
const char *dnt_record_str(const dnt_record *r, const char *name);
/* The numeric value (INT, UINT, FLOAT or BOOL) with this name in *out: 0, or -1 when absent or
 * not a number. */
int dnt_record_num(const dnt_record *r, const char *name, double *out);

/* The value as text in buf (cap bytes, always NUL-terminated when cap > 0): integers in
 * decimal, floats in the shortest form that reads back exactly ("NaN", "Infinity" and
 * "-Infinity" as .NET prints them), "true"/"false", strings as they are, bytes in hex, OBJECT
 * and ARRAY as "{N}" / "[N]". Returns the full length like snprintf. */
size_t dnt_value_format(const dnt_value *v, char *buf, size_t cap);

/* "Int32", "String", ...; "Unknown" for a code outside enum ntr_type. Static string. */
const char *dnt_type_name(uint32_t type);

/* FILETIME (100 ns ticks since 1601-01-01 UTC) as "YYYY-MM-DDThh:mm:ss.fffffffZ"; out holds 40. */
void dnt_format_filetime(uint64_t filetime, char out[40]);
/* A GUID's 16 bytes as "xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx" (the first three groups little
 * endian, as .NET writes them); out holds 37. */
void dnt_format_guid(const uint8_t g[16], char out[37]);

/* ============================================================================================== */
/* Layouts of events whose metadata has no field list (the runtime's own providers), read from
 * XML files in dntrace's schema format (data/runtime-events.xml, installed in $(pkgdatadir)),
 * so that `dntrace events` can show their fields by name. */

struct dnt_schema;

/* An empty schema; NULL when out of memory. Free with dnt_schema_free (NULL is fine). */
struct dnt_schema *dnt_schema_new(void);
void dnt_schema_free(struct dnt_schema *s);

/* Adds the events of an XML schema file; an event already known is replaced. 0, or -1 with a
 * one-line reason in err ("file:line: ..."). */
int dnt_schema_load(struct dnt_schema *s, const char *path, char *err, size_t errlen);

/* Where dnt_schema_load_default looks for runtime-events.xml, in order: $DNT_DATADIR, the
 * source tree's data/ when the program runs from its build tree (the build tree is the
 * directory holding the running executable, or its parent, and has this source tree recorded
 * at configure time), then the installed data directory. Writes the first path that exists
 * into path (cap bytes) and returns 0, or -1 (path: the installed one) when none does. */
int dnt_schema_default_path(char *path, size_t cap);

/* Loads runtime-events.xml from dnt_schema_default_path. 0, or -1 with a reason in err.
 * The reason names the path tried. */
int dnt_schema_load_default(struct dnt_schema *s, char *err, size_t errlen);

/* The layout of (provider, event id) at that event version (as dnt_schema_find picks it): its
 * name, and the fields present in that version (*nfields of them), to decode with
 * dnt_record_decode_layout. NULL when the schema does not know the event. The fields belong to
 * the schema. */
const ntr_field *dnt_schema_lookup(const struct dnt_schema *s, const char *provider, uint32_t event_id,
                                   uint32_t version, const char **name, uint32_t *nfields);

/* What a schema says of one event (id, version). It and every pointer in it belong to the
 * schema: valid until the next dnt_schema_load into it or dnt_schema_free. */
typedef struct dnt_schema_event {
  const char *provider;
  uint32_t id, version;
  const char *name;     /* TraceEvent's and PerfView's name: "GC/Start" */
  const char *symbol;   /* the manifest's: "GCStart_V2"; "" when the file gives none */
  const char *task;     /* "GC"; "" when none */
  const char *opcode;   /* "Start"; "" when none */
  uint32_t opcode_value, level;
  uint64_t keywords;
  int has_info;         /* 1 when the file gives opcode-value, level and keywords */
  const ntr_field *fields; /* the layout, with the types below besides enum ntr_type */
  uint32_t nfields;
} dnt_schema_event;

/* Field types of schema layouts only (never in a trace's metadata): decoded by
 * dnt_record_decode_layout. An array whose count is an earlier field of the same level keeps
 * that field's position among its siblings in fixed_count. */
enum dnt_layout_type {
  DNT_TYPE_POINTER = 0x10001,  /* 4 or 8 bytes: the trace's pointer size */
  DNT_TYPE_ANSI = 0x10002,     /* 8-bit characters, NUL-terminated (read as Latin-1) */
  DNT_TYPE_BINARY = 0x10003,   /* as many bytes as the sibling fixed_count says */
  DNT_TYPE_COUNTED = 0x10004   /* as many `element`s as the sibling fixed_count says */
};

/* The event (provider, id) at `version`: that version's layout, else the highest version below
 * it, else the lowest one; *nfields: how many of its top-level fields that version has (a
 * version 1 file's since=). NULL when the schema has no event with that id. */
const dnt_schema_event *dnt_schema_find(const struct dnt_schema *s, const char *provider, uint32_t event_id,
                                        uint32_t version, uint32_t *nfields);

/* What a session enables to get the events of provider named name (TraceEvent's "GC/Start" or
 * the manifest's symbol "GCStart_V2"), over all their versions: the keywords OR'ed, the most
 * verbose level. 1, or 0 when the schema has no such event. */
int dnt_schema_enabling(const struct dnt_schema *s, const char *provider, const char *name, uint64_t *keywords,
                        uint32_t *level);

/* A self-described event's name as TraceEvent gives it (its EventPipe metadata rules): without an
 * opcode in the metadata, a name ending in Start or Stop (any case) implies opcode 1 or 2; an
 * opcode 1 or 2 strips that ending; a nonzero opcode follows a slash by its name (Start, Stop,
 * DataCollectionStart, DataCollectionStop, Extension, Reply, Resume, Suspend, Transfer for 1..9,
 * else its number): "RequestStart" is "Request/Start", TPL's "TaskWaitBegin" (opcode 9)
 * "TaskWaitBegin/Transfer". Written into buf (cap bytes, truncated, NUL-terminated); *opcode
 * (may be NULL): the opcode TraceEvent reports. md->event_name "" gives "". Returns buf. */
char *dnt_event_te_name(const ntr_metadata *md, char *buf, size_t cap, uint32_t *opcode);

/* Decodes a payload by a schema layout (fields of a dnt_schema_event): like dnt_record_decode,
 * with the layout types above, pointers `pointer_size` (4 or 8) bytes wide. */
int dnt_record_decode_layout(dnt_record *r, const ntr_field *fields, uint32_t nfields, uint32_t pointer_size,
                             const uint8_t *payload, size_t len);

/* ============================================================================================== */
/* A trace's summary (`dntrace info TRACE`): the header, the events per provider and per kind,
 * the threads with their names (V6 thread rows; V4/V5 streams carry none) and SampleProfiler
 * samples, the first and last event's timestamps. A consumer of the parser's callbacks; memory
 * grows with the distinct metadata records, providers and threads, not with the events. Drops
 * and truncation are the parser's and dnt_trace_read's to say (ntr_stats, the return value). */

typedef struct dnt_summary_provider {
  char *name;      /* UTF-8; owned by the summary */
  uint64_t events;
} dnt_summary_provider;

/* One kind of event: (provider, event id, event name as the metadata gives it: often "" for the
 * runtime's own events). */
typedef struct dnt_summary_kind {
  const char *provider; /* the provider's name (valid after dnt_summary_finish; owned) */
  size_t provider_index; /* private */
  uint32_t event_id;
  char *name;           /* owned by the summary */
  uint64_t count;
} dnt_summary_kind;

typedef struct dnt_summary_thread {
  uint64_t id;          /* the OS thread id events carry (ntr_event.thread_id) */
  char *name;           /* NULL when the trace does not name it; owned by the summary */
  uint64_t events, samples;
} dnt_summary_thread;

typedef struct dnt_summary {
  int has_header;
  ntr_trace header;     /* a copy of the trace header (without its V6 key/values) */
  uint64_t events;      /* events delivered */
  uint64_t unknown_events; /* of them, with no metadata record */
  uint64_t samples;     /* SampleProfiler samples (event 0 of Microsoft-DotNETCore-SampleProfiler) */
  uint64_t first_timestamp, last_timestamp; /* the earliest and latest event (ticks), when events */
  int has_runtime;      /* the runtime described itself (RuntimeInformation, event 187 of the
                           runtime or its rundown): */
  struct {
    uint16_t bcl[4], vm[4]; /* major, minor, build, qfe as the runtime says them */
    char *path;         /* its runtime library's path (UTF-8; owned by the summary) */
  } runtime;
  dnt_summary_provider *providers; /* after finish: by events, most first */
  size_t nproviders;
  dnt_summary_kind *kinds;         /* after finish: by count, most first */
  size_t nkinds;
  dnt_summary_thread *threads;     /* after finish: by samples, then events, most first */
  size_t nthreads;
  int oom;              /* an allocation failed (sticky): the callbacks stop the parse */
  /* private */
  size_t capproviders, capkinds, capthreads;
  struct dnt__summary_map *maps;
} dnt_summary;

/* Caller-provided storage; free what it holds with dnt_summary_release. */
void dnt_summary_init(dnt_summary *s);
void dnt_summary_release(dnt_summary *s);
/* Callbacks to hand the parser (or dnt_trace_read), with the summary as their ud. */
void dnt_summary_callbacks(ntr_callbacks *cb);
/* After the last byte: sorts the tables (most first) and fills kinds[].provider. No events may
 * follow. 0, or -1 when memory ran out at some point (the tables are then incomplete). */
int dnt_summary_finish(dnt_summary *s);

/* ============================================================================================== */
/* Text for a terminal from strings a target or a trace chose (names, messages: an exception's
 * message may quote a request's bytes). \n \r \t as C escapes, other control bytes and DEL as
 * \xNN, the C1 controls U+0080..U+009F as \u00NN, bytes that are not UTF-8 as \xNN; the rest as
 * is. So a string can neither move the cursor, ring the bell, retitle the window nor fake a line
 * of the output. Every text view prints such strings through these. */

/* Writes s (NULL: "") escaped to fp. */
void dnt_text_put(FILE *fp, const char *s);
/* The same in double quotes, with \" and \\ for the quote and the backslash (logfmt's value). */
void dnt_text_put_quoted(FILE *fp, const char *s);
/* s (NULL: "") escaped into out (cap bytes, NUL-terminated when cap > 0), cut at a whole character
 * or escape when it does not fit. Returns the length the whole of it needs, without the NUL (as
 * snprintf: a result >= cap means it was cut). */
size_t dnt_text_escape(char *out, size_t cap, const char *s);

/* ============================================================================================== */
/* JSON output, streamed. */

/* Writes s (NULL: "") as a JSON string literal, quotes included, to fp; control characters are
 * escaped. */
void dnt_json_string(FILE *fp, const char *s);

/* ============================================================================================== */
/* A file written whole: its temporary "DIR/.NAME.XXXXXX" beside path, created 0666 less the umask
 * (a hidden name: a directory's listing does not take it for the file meanwhile), to be renamed
 * over path once complete. The descriptor, *tmp its name (the caller's to free); -1 with errno. */
int dnt_temp_beside(const char *path, char **tmp);

/* ============================================================================================== */
/* An event matched by its provider, name and payload values, as dotnet-trace's stopping event
 * matches it (TraceEvent's EventMonitor): collect's --stopping-event-* options and watch's and
 * serve's event rules. */
#define DNT_MATCH_MAX_FILTERS 16

struct dnt_event_match {
  const char *provider, *event; /* borrowed; event NULL: any of the provider's */
  char *filter;                 /* a copy of FIELD:VALUE[,FIELD:VALUE...], cut up in place */
  const char *keys[DNT_MATCH_MAX_FILTERS], *values[DNT_MATCH_MAX_FILTERS];
  size_t nfilters;
  const struct dnt_schema *schema; /* borrowed: layouts of the runtime's own events (NULL: none) */
  dnt_record rec;
};

/* Sets up m (caller's storage; provider, event and schema borrowed, filter copied). 0, or -1 with
 * err saying which pair is not FIELD:VALUE (m released). */
int dnt_event_match_init(struct dnt_event_match *m, const char *provider, const char *event, const char *filter,
                         const struct dnt_schema *schema, char *err, size_t cap);
void dnt_event_match_release(struct dnt_event_match *m);

/* 1 when ev (its payload's pointers pointer_size bytes wide) matches, *name then the event's name
 * (borrowed from the schema or the metadata; NULL when it has none); else 0. */
int dnt_event_match_test(struct dnt_event_match *m, const ntr_event *ev, uint32_t pointer_size, const char **name);

#endif
