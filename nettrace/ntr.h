/* ntr.h: the nettrace push parser, the single public header of nettrace/.
 *
 * The parser reads the byte stream an EventPipe session produces (a `.nettrace` file or the
 * continuation of a CollectTracing IPC reply). It is a push parser in zlib's manner: the caller
 * hands it bytes in whatever pieces it has (one byte at a time or a whole file) and it calls back
 * for every trace header, metadata record, stack, event and sequence point it completes.
 * It never does I/O and never learns where its bytes come from.
 *
 * Versions: NetTrace V4 and "V5" (FastSerialization framing), NetTrace V6 (block framing) and
 * NetPerf V3 (.NET Core 2.1 and 2.2: FastSerialization, events with their stacks inline); NetPerf
 * V1/V2 (.NET Core 2.0) is recognised and refused with NTR_EUNSUPPORTED.
 * docs/nettrace-format.md describes the format and the limits enforced.
 *
 * Conventions
 *  - Functions return 0 on success and a negative NTR_E* code on failure (see NTR_ERRNO_MAP).
 *  - Every pointer handed to a callback is owned by the parser and valid only during that
 *    callback; copy what you keep.
 *  - Type names: `ntr_parser` is opaque; every other public type is a plain struct typedef'd
 *    to `ntr_<name>`.
 */
#ifndef NTR_H
#define NTR_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---- errors ---------------------------------------------------------------------------- */

/* One table, X-macro style: XX(name, value, message). Values are negative and stable. */
#define NTR_ERRNO_MAP(XX)                                                          \
  XX(AGAIN, -1, "more input is needed")                                           \
  XX(EOF, -2, "end of stream reached")                                            \
  XX(ETRUNCATED, -3, "stream truncated")                                          \
  XX(ENOMEM, -4, "out of memory")                                                 \
  XX(EFORMAT, -5, "malformed stream")                                             \
  XX(EUNSUPPORTED, -6, "unsupported format or version")                           \
  XX(ELIMIT, -7, "a configured limit was exceeded")                               \
  XX(ESTOPPED, -8, "stopped by a callback")                                       \
  XX(EINVAL, -9, "invalid argument or misuse of the parser")

enum ntr_err {
#define NTR__ERR_ENUM(name, value, msg) NTR_##name = (value),
  NTR_ERRNO_MAP(NTR__ERR_ENUM)
#undef NTR__ERR_ENUM
};

/* "NTR_EFORMAT" for NTR_EFORMAT; "NTR_UNKNOWN" for a value outside the table. Static string. */
const char *ntr_err_name(int err);
/* A short lowercase description of err; static string, never NULL. */
const char *ntr_strerror(int err);

/* ---- allocator ------------------------------------------------------------------------- */

typedef void *(*ntr_malloc_fn)(size_t size);
typedef void *(*ntr_realloc_fn)(void *ptr, size_t size);
typedef void *(*ntr_calloc_fn)(size_t count, size_t size);
typedef void (*ntr_free_fn)(void *ptr);

/* Routes every allocation of the library through these functions (libuv's
 * uv_replace_allocator). All four must be non-NULL. Call it before creating any parser:
 * memory must be freed by the allocator that made it. Returns 0 or NTR_EINVAL. */
int ntr_replace_allocator(ntr_malloc_fn m, ntr_realloc_fn r, ntr_calloc_fn c, ntr_free_fn f);

/* ---- limits ---------------------------------------------------------------------------- */

/* Bounds on what a stream may make the parser hold. A zero member means "use the default".
 * Exceeding one fails the parse with NTR_ELIMIT and a message naming the limit. */
typedef struct ntr_limits {
  uint32_t max_block_size;      /* bytes of one block/object body (default 64 MiB) */
  uint32_t max_metadata;        /* metadata records held at once (default 1<<20) */
  size_t max_metadata_bytes;    /* bytes of metadata held at once (default 256 MiB) */
  size_t max_stack_bytes;       /* stack table between sequence points: 8 bytes per IP, 16 per
                                   stack, the index of ids out of sequence (default 256 MiB) */
  uint32_t max_fields;          /* fields in one metadata record, nested ones too (default 4096) */
  uint32_t max_depth;           /* nesting of Object/array field types (default 16) */
  uint32_t max_threads;         /* threads tracked for sequence numbers / V6 thread table
                                   (default 1<<20) */
  size_t max_label_bytes;       /* V6 label-list table between sequence points, labels, strings
                                   and index (default 64 MiB) */
  uint32_t max_stacks;          /* stacks held between sequence points, empty ones too (default
                                   1<<20) */
  size_t max_thread_bytes;      /* V6 thread table: rows, names and index (default 128 MiB) */
} ntr_limits;

/* Fills *lim with the defaults. */
void ntr_limits_default(ntr_limits *lim);

/* ---- what the callbacks receive --------------------------------------------------------- */

enum ntr_format {
  NTR_FORMAT_NETPERF = 3, /* NetPerf V3 (.NET Core 2.x): FastSerialization, events and their
                           * metadata inline in EventBlocks, each event with its own stack
                           * (stack_id NTR_STACK_INLINE), no sequence numbers or points */
  NTR_FORMAT_V4 = 4, /* FastSerialization framing; also what people call "V5" */
  NTR_FORMAT_V6 = 6
};

/* The stack_id of a NetPerf event that has a stack: it comes with the event, from no table. */
#define NTR_STACK_INLINE 0xffffffffu

typedef struct ntr_keyvalue {
  const char *key;   /* UTF-8, NUL-terminated */
  const char *value; /* UTF-8, NUL-terminated */
} ntr_keyvalue;

typedef struct ntr_trace {
  int format;                  /* enum ntr_format */
  uint32_t minor_version;      /* V6 minor version; 0 for V4/V5 */
  uint16_t start_time[8];      /* SYSTEMTIME (UTC): year, month, day-of-week, day, h, m, s, ms */
  uint64_t sync_time_qpc;      /* timestamp taken at start_time */
  uint64_t qpc_frequency;      /* timestamp ticks per second */
  uint32_t pointer_size;       /* 4 or 8: width of stack IPs */
  uint32_t process_id;         /* 0 if unknown (V6 without a ProcessId key) */
  uint32_t cpu_count;          /* 0 if unknown */
  uint32_t sampling_interval_ns; /* expected CPU sampling rate; 0 if unknown */
  size_t nkeyvalues;           /* V6 key/value pairs, in stream order; 0 for V4/V5 */
  const ntr_keyvalue *keyvalues;
} ntr_trace;

/* Payload type codes (the numbers on the wire: u32 in V4/V5, u8 in V6). */
enum ntr_type {
  NTR_TYPE_OBJECT = 1,
  NTR_TYPE_BOOLEAN = 3, /* 4 bytes */
  NTR_TYPE_CHAR = 4,    /* one UTF-16 code unit */
  NTR_TYPE_SBYTE = 5,
  NTR_TYPE_BYTE = 6,
  NTR_TYPE_INT16 = 7,
  NTR_TYPE_UINT16 = 8,
  NTR_TYPE_INT32 = 9,
  NTR_TYPE_UINT32 = 10,
  NTR_TYPE_INT64 = 11,
  NTR_TYPE_UINT64 = 12,
  NTR_TYPE_SINGLE = 13,
  NTR_TYPE_DOUBLE = 14,
  NTR_TYPE_DECIMAL = 15,
  NTR_TYPE_DATETIME = 16,  /* 8 bytes, FILETIME as EventSource writes it */
  NTR_TYPE_GUID = 17,
  NTR_TYPE_STRING = 18,    /* UTF-16, NUL-terminated */
  NTR_TYPE_ARRAY = 19,     /* u16 count + elements */
  NTR_TYPE_VARINT = 20,    /* V6: zigzag LEB128 */
  NTR_TYPE_VARUINT = 21,   /* V6: LEB128 */
  NTR_TYPE_FIXED_ARRAY = 22, /* V6: fixed_count elements */
  NTR_TYPE_UTF8_CHAR = 23, /* V6 */
  NTR_TYPE_RELLOC = 24,    /* V6 */
  NTR_TYPE_DATALOC = 25,   /* V6 */
  NTR_TYPE_BOOLEAN8 = 26   /* V6: 1 byte */
};

/* One field of an event's payload description. A tree: Object fields have children; array
 * types describe their element with `element` (an unnamed field, which may itself be an
 * Object with children or another array). */
typedef struct ntr_field ntr_field;
struct ntr_field {
  const char *name;        /* UTF-8, NUL-terminated; "" for an array's element */
  uint32_t type;           /* enum ntr_type, or an unknown code kept as read */
  uint32_t nfields;        /* children of an Object; 0 otherwise */
  const ntr_field *fields; /* nfields children, in payload order */
  const ntr_field *element; /* element type of ARRAY/FIXED_ARRAY/RELLOC/DATALOC; else NULL */
  uint32_t fixed_count;    /* FIXED_ARRAY element count */
};

/* One metadata record: what an event id means and how its payload is laid out. */
typedef struct ntr_metadata {
  uint32_t id;              /* the id events refer to */
  const char *provider;     /* UTF-8, NUL-terminated */
  uint32_t event_id;
  const char *event_name;   /* UTF-8; often "" for native runtime events (no fields either) */
  uint64_t keywords;
  uint32_t version;
  uint32_t level;
  uint32_t opcode;          /* valid when has_opcode */
  int has_opcode;
  int fields_from_v2params; /* 1 when the fields came from the V5 V2Params tag */
  uint32_t nfields;         /* top-level fields */
  const ntr_field *fields;
  const char *message_template; /* V6 optional metadata; NULL when absent */
  const char *description;      /* V6 optional metadata; NULL when absent */
  size_t nattributes;           /* V6 KeyValue items */
  const ntr_keyvalue *attributes;
  int has_provider_guid;
  uint8_t provider_guid[16];
} ntr_metadata;

typedef struct ntr_stack {
  uint32_t id;
  uint32_t nframes;
  const uint64_t *frames; /* nframes instruction pointers, leaf first, zero-extended; never
                             NULL, even for an empty stack (memcmp/memcpy may take it) */
} ntr_stack;

/* V6 labels (label lists replace V4/V5 activity ids). */
enum ntr_label_kind {
  NTR_LABEL_ACTIVITY_ID = 1,
  NTR_LABEL_RELATED_ACTIVITY_ID = 2,
  NTR_LABEL_TRACE_ID = 3,
  NTR_LABEL_SPAN_ID = 4,
  NTR_LABEL_KEY_STRING = 5,
  NTR_LABEL_KEY_INT = 6,
  NTR_LABEL_OPCODE = 7,
  NTR_LABEL_KEYWORDS = 8,
  NTR_LABEL_LEVEL = 9,
  NTR_LABEL_VERSION = 10
};

typedef struct ntr_label {
  uint32_t kind;           /* enum ntr_label_kind */
  uint8_t guid[16];        /* ACTIVITY_ID, RELATED_ACTIVITY_ID, TRACE_ID */
  uint64_t u;              /* SPAN_ID, OPCODE, KEYWORDS, LEVEL, VERSION */
  int64_t i;               /* KEY_INT */
  const char *key;         /* KEY_STRING / KEY_INT: UTF-8, NUL-terminated */
  const char *value;       /* KEY_STRING */
} ntr_label;

typedef struct ntr_event {
  uint32_t metadata_id;
  const ntr_metadata *metadata; /* NULL when the id was never defined (or was flushed) */
  uint32_t sequence;            /* per capture thread, wraps at 2^32 */
  uint64_t thread_id;           /* OS thread the event is about (V6: from the thread table, 0
                                   if unknown) */
  uint64_t capture_thread_id;   /* OS thread that wrote it (V6: from the thread table) */
  uint64_t thread_index;        /* V6 thread-table index; V4/V5: same as thread_id */
  uint64_t capture_thread_index; /* V6 index; V4/V5: same as capture_thread_id */
  uint32_t processor;
  uint32_t stack_id;            /* 0 = no stack */
  const ntr_stack *stack;       /* NULL when stack_id is 0 or unknown */
  uint64_t timestamp;           /* ticks; see ntr_trace.qpc_frequency */
  int sorted;                   /* the IsSorted flag */
  uint8_t activity_id[16];      /* V6: from the label list, zero when absent */
  uint8_t related_activity_id[16];
  uint32_t label_list_id;       /* V6; 0 = none */
  size_t nlabels;               /* V6 labels of label_list_id */
  const ntr_label *labels;
  const uint8_t *payload;       /* payload_size bytes, described by metadata->fields */
  uint32_t payload_size;
} ntr_event;

typedef struct ntr_thread_seq {
  uint64_t thread;   /* V4/V5: capture thread id; V6: thread index */
  uint32_t sequence; /* last sequence number the thread tried to write */
} ntr_thread_seq;

typedef struct ntr_sequence_point {
  uint64_t timestamp;
  uint32_t flags;    /* V6: 1 = thread table flushed, 2 = metadata flushed; 0 for V4/V5 */
  size_t nthreads;
  const ntr_thread_seq *threads;
} ntr_sequence_point;

/* V6 thread-table row. */
typedef struct ntr_thread {
  uint64_t index;
  const char *name;  /* NULL if none */
  uint64_t os_process_id; int has_os_process_id;
  uint64_t os_thread_id;  int has_os_thread_id;
} ntr_thread;

/* ---- the callback table ---------------------------------------------------------------- */

/* Like perf's struct perf_tool. Every member may be NULL (skipped). A callback that returns
 * nonzero stops the parse: the feed in progress returns NTR_ESTOPPED, and so does every later
 * call (the parser stays stopped). The pointers passed are valid only during the call.
 * Callbacks must not call back into the same parser (ntr_parser_feed/finish/free): that is
 * detected and refused with NTR_EINVAL. */
typedef struct ntr_callbacks {
  int (*on_trace)(void *ud, const ntr_trace *trace);
  int (*on_metadata)(void *ud, const ntr_metadata *md);
  int (*on_stack)(void *ud, const ntr_stack *stack);
  int (*on_event)(void *ud, const ntr_event *ev);
  int (*on_sequence_point)(void *ud, const ntr_sequence_point *sp);
  int (*on_thread)(void *ud, const ntr_thread *thread); /* V6 Thread rows */
  /* Called once, when the end-of-stream marker has been read. Not called for a truncated
   * stream (ntr_parser_finish reports that). */
  int (*on_end)(void *ud);
  /* NetTrace V4/V5 only: each object's body as the stream has it, once what it holds has been
   * delivered through the callbacks above: kind NTR_BLOCK_TRACE (the Trace object's 48 bytes),
   * _EVENT, _METADATA, _STACK or _SP. For a consumer that keeps the blocks themselves (the flight
   * recorder, ntr_ring). */
  int (*on_block)(void *ud, int kind, const uint8_t *body, size_t n);
} ntr_callbacks;

enum ntr_block_kind { NTR_BLOCK_TRACE = 1, NTR_BLOCK_EVENT, NTR_BLOCK_METADATA, NTR_BLOCK_STACK, NTR_BLOCK_SP };

/* ---- the flight recorder ---------------------------------------------------------------- */

/* A ring of a NetTrace V4/V5 stream's blocks (nettrace/ring.c): fed by the parser through
 * ntr_ring_callbacks (with ntr_fanout beside other consumers), it keeps the last window_ms of
 * event blocks by the caller's clock (ntr_ring_now) and at most max_bytes (0: no bound; the
 * metadata blocks are always kept), and writes what it keeps as a stream every reader takes whole:
 * the Trace object, the metadata, a sequence point giving the threads whose first events were
 * dropped their numbers, the stack blocks the kept events refer to, the events. NULL when out of
 * memory; free with ntr_ring_free. */
typedef struct ntr_ring ntr_ring;
ntr_ring *ntr_ring_new(uint64_t window_ms, uint64_t max_bytes);
void ntr_ring_free(ntr_ring *r);
/* The callbacks to hand the parser (on_event, on_block), with the ring as their ud. */
void ntr_ring_callbacks(ntr_callbacks *cb);
/* The caller's clock in ms: the blocks that arrive from now on are stamped with it. */
void ntr_ring_now(ntr_ring *r, uint64_t ms);
/* From now on nothing is dropped for its age (the byte bound still holds): a save is under way,
 * and what comes after the window (the rundown) must not push it out. */
void ntr_ring_hold(ntr_ring *r);
/* 1 when memory ran out while keeping (the ring then keeps nothing more). */
int ntr_ring_failed(const ntr_ring *r);
typedef struct ntr_ring_info {
  uint64_t bytes;          /* the blocks kept */
  uint64_t event_blocks;   /* event blocks kept */
  uint64_t oldest_ms;      /* when the oldest kept one arrived (the caller's clock) */
  uint64_t dropped_blocks; /* event blocks dropped but still listed */
  size_t threads_cut;      /* threads whose first events were dropped */
} ntr_ring_info;
void ntr_ring_stats(const ntr_ring *r, ntr_ring_info *info);
/* Writes the kept stream to fp (the caller's; write errors are its to check). 0, or -1 when there
 * is nothing to write (no Trace object yet) or memory ran out. */
int ntr_ring_write(const ntr_ring *r, FILE *fp);

/* ---- one parse, several consumers -------------------------------------------------------- */

/* A callback table that hands every callback to each consumer in the order they were added
 * (a consumer's NULL members are skipped); the first nonzero return stops the others and the
 * parse. Use it as: ntr_fanout_callbacks(&cb); ntr_parser_new(&p, &cb, &fanout, NULL). */
#define NTR_FANOUT_MAX 8
typedef struct ntr_fanout {
  size_t n;
  struct {
    ntr_callbacks cb; /* a copy */
    void *ud;         /* borrowed: lives as long as the parse */
  } to[NTR_FANOUT_MAX];
} ntr_fanout;

/* Empties f (caller-provided storage; nothing to release). */
void ntr_fanout_init(ntr_fanout *f);
/* Adds a consumer (cb copied). 0, or NTR_EINVAL when NTR_FANOUT_MAX are there already. */
int ntr_fanout_add(ntr_fanout *f, const ntr_callbacks *cb, void *ud);
/* The forwarding table, whose ud is the ntr_fanout itself: a member is set only where some
 * consumer has it (the parser skips work for a NULL one). Call after the last ntr_fanout_add. */
void ntr_fanout_callbacks(const ntr_fanout *f, ntr_callbacks *cb);

/* ---- the parser ------------------------------------------------------------------------ */

typedef struct ntr_parser ntr_parser;

typedef struct ntr_stats {
  uint64_t bytes;           /* bytes consumed, the end marker included */
  uint64_t trailing_bytes;  /* bytes fed after the end marker (ignored) */
  uint64_t blocks;          /* blocks/objects decoded (Trace included) */
  uint64_t events;          /* events delivered (metadata records not counted) */
  uint64_t metadata;        /* metadata records read */
  uint64_t stacks;          /* stacks read */
  uint64_t sequence_points;
  uint64_t dropped_events;  /* gaps in per-thread sequence numbers */
  uint64_t skipped_blocks;  /* V6 blocks of unknown kind */
  size_t carry_peak;        /* largest carry buffer used, bytes */
} ntr_stats;

/* Creates a parser. `cb` is copied (the caller keeps ownership of it); NULL means no callbacks.
 * `ud` is passed to every callback and never dereferenced. `lim` may be NULL for defaults; it is
 * copied. On success *out owns a parser to release with ntr_parser_free.
 * Returns 0, NTR_EINVAL (out NULL) or NTR_ENOMEM. */
int ntr_parser_new(ntr_parser **out, const ntr_callbacks *cb, void *ud, const ntr_limits *lim);

/* Frees p and everything it holds. NULL does nothing. */
void ntr_parser_free(ntr_parser *p);

/* Consumes all `len` bytes of `buf`, any split of the stream being valid. The caller keeps `buf`:
 * the parser copies what it still needs (an object straddling two calls) into a carry buffer
 * bounded by ntr_limits.max_block_size.
 * Returns 0 (all consumed, more expected), NTR_EOF once the end-of-stream marker has been read
 * (bytes after it are ignored and counted in trailing_bytes), or a negative error, which is
 * sticky: every later call returns it again; ntr_parser_errmsg says what and where. */
int ntr_parser_feed(ntr_parser *p, const uint8_t *buf, size_t len);

/* Declares the end of input. Returns 0 if the end-of-stream marker was read, NTR_ETRUNCATED
 * ("truncated at byte N ...") if the input stopped before it (inside an object or between
 * objects), or the sticky error. Everything complete before the cut has been delivered. */
int ntr_parser_finish(ntr_parser *p);

/* The last error's message, "byte N: what went wrong", or "" when there is none. Owned by p,
 * valid until the next call on p. */
const char *ntr_parser_errmsg(const ntr_parser *p);

/* Bytes consumed so far (the absolute stream offset of the next byte). */
uint64_t ntr_parser_offset(const ntr_parser *p);

/* Copies the counters into *out. */
void ntr_parser_stats(const ntr_parser *p, ntr_stats *out);

/* The trace header once seen (NULL before). Owned by p; valid until ntr_parser_free. */
const ntr_trace *ntr_parser_trace(const ntr_parser *p);

/* ---- payload helpers -------------------------------------------------------------------- */

/* A bounds-checked reader over an event payload. The cursor does not own the bytes. Every
 * read returns 0, or NTR_ETRUNCATED (nothing consumed) when the payload is too short. */
typedef struct ntr_payload {
  const uint8_t *cur;
  const uint8_t *end;
} ntr_payload;

void ntr_payload_init(ntr_payload *c, const uint8_t *buf, size_t len);
size_t ntr_payload_left(const ntr_payload *c);
int ntr_payload_u8(ntr_payload *c, uint8_t *v);
int ntr_payload_u16(ntr_payload *c, uint16_t *v);
int ntr_payload_u32(ntr_payload *c, uint32_t *v);
int ntr_payload_u64(ntr_payload *c, uint64_t *v);
int ntr_payload_f32(ntr_payload *c, float *v);
int ntr_payload_f64(ntr_payload *c, double *v);
int ntr_payload_skip(ntr_payload *c, size_t n);
/* V6 VarUInt / VarInt (LEB128, zigzag for the signed one); NTR_EFORMAT when overlong. */
int ntr_payload_varuint(ntr_payload *c, uint64_t *v);
int ntr_payload_varint(ntr_payload *c, int64_t *v);
/* Reads a NUL-terminated UTF-16LE string and writes it as UTF-8 into out (outsz bytes,
 * always NUL-terminated when outsz > 0; too long a string is cut at a character boundary).
 * *needed (may be NULL) receives the full UTF-8 length without the NUL. Unpaired surrogates
 * become U+FFFD. NTR_ETRUNCATED if no terminator is found before the end. */
int ntr_payload_utf16z(ntr_payload *c, char *out, size_t outsz, size_t *needed);

/* Byte size of a fixed-size field, or 0 if the field's size depends on its data. */
size_t ntr_field_fixed_size(const ntr_field *f);

/* ---- thread names, written into a trace ------------------------------------------------- */

/* What ends a complete NetTrace V4/V5 stream naming its threads, so that the names stay with
 * the trace and every reader of the format (TraceEvent too) reads them as ordinary self-described
 * events: a MetadataBlock describing event NTR_NAMES_EVENT (id 1) of provider NTR_NAMES_PROVIDER
 * (fields ThreadId UInt64, Name String), an EventBlock with one such event per thread, then the
 * stream's end tag. They are written in place of the stream's own end tag (its last byte);
 * offset: where they begin in the file (the format aligns on it); timestamp: the events' (the
 * stream's last). names are UTF-8 (invalid bytes become U+FFFD); the events' capture thread is a
 * made-up id no thread has, so that their sequence numbers count no loss. *out is allocated with
 * the library's allocator (ntr_replace_allocator): its free. 0, NTR_EINVAL or NTR_ENOMEM. */
#define NTR_NAMES_PROVIDER "dntrace"
#define NTR_NAMES_EVENT "ThreadName"
int ntr_names_tail(uint64_t offset, uint64_t timestamp, const uint64_t *tids, const char *const *names, size_t n,
                   uint8_t **out, size_t *len);

#ifdef __cplusplus
}
#endif

#endif /* NTR_H */
