/* ntr-writer.h: a small nettrace encoder for the tests and the bench. It builds V4/V5
 * (FastSerialization) and V6 byte streams from descriptions, so tests know the expected values
 * from what they wrote, never from the parser's output. Memory errors abort (test code). */
#ifndef NTR_WRITER_H
#define NTR_WRITER_H

#include <stddef.h>
#include <stdint.h>

typedef struct ntrw_field ntrw_field;
struct ntrw_field {
  const char *name;
  uint32_t type;              /* enum ntr_type */
  const ntrw_field *element;  /* array element type (V2Params / V6) */
  const ntrw_field *fields;   /* Object children */
  uint32_t nfields;
  uint16_t fixed_count;       /* V6 FixedLengthArray */
};

typedef struct ntrw_md {
  uint32_t id;
  const char *provider;
  uint32_t event_id;
  const char *name;
  uint64_t keywords;
  uint32_t version, level;
  int opcode;                 /* -1: no OpCode tag/item */
  const ntrw_field *fields;
  uint32_t nfields;
  int v2params;               /* V4/V5: write the fields in a V2Params tag (V1 count 0) */
  int no_fields;              /* V4/V5: stop after Level (native runtime events) */
} ntrw_md;

typedef struct ntrw_ev {
  uint32_t metadata_id;
  uint32_t seq;
  uint64_t thread, capture_thread; /* V6: thread indexes */
  uint32_t proc;
  uint32_t stack_id;
  uint64_t ts;
  uint8_t activity[16], related[16]; /* V4/V5 */
  uint32_t label_list;               /* V6 */
  int sorted;
  const uint8_t *payload;
  uint32_t payload_size;
} ntrw_ev;

typedef struct ntrw {
  uint8_t *buf;
  size_t len, cap;
  int v6;
  uint32_t pointer_size;
  /* open block */
  size_t blk_size_at, blk_start;
  int blk_compressed, blk_is_md;
  ntrw_ev prev;
} ntrw;

typedef struct ntrw_trace {
  uint64_t sync_qpc, freq;
  uint32_t pointer_size, pid, cpus, sampling_ns;
  const char *const *kv; /* V6: 2*nkv strings */
  uint32_t nkv;
} ntrw_trace;

void ntrw_init(ntrw *w, int v6);
void ntrw_release(ntrw *w);
/* Stream header and Trace object/block. */
void ntrw_trace_hdr(ntrw *w, const ntrw_trace *t);
/* Metadata block: begin, records, end. */
void ntrw_md_begin(ntrw *w);
void ntrw_metadata(ntrw *w, const ntrw_md *md);
/* Event block: begin (compressed or not), events, end. */
void ntrw_ev_begin(ntrw *w, int compressed);
void ntrw_event(ntrw *w, const ntrw_ev *ev);
void ntrw_block_end(ntrw *w);
/* Stack block: count stacks, ids first..; frames[i] has nframes[i] IPs. */
void ntrw_stacks(ntrw *w, uint32_t first, uint32_t count, const uint64_t *const *frames,
                 const uint32_t *nframes);
/* Sequence point (V6 flags ignored for V4/V5). */
void ntrw_sp(ntrw *w, uint64_t ts, uint32_t flags, uint32_t n, const uint64_t *threads,
             const uint32_t *seqs);
/* V6 only. */
void ntrw_thread(ntrw *w, uint64_t index, uint64_t os_tid, const char *name);
void ntrw_remove_thread(ntrw *w, uint64_t index, uint32_t seq);
/* One label list per call: activity id (may be NULL) and one key/value string label. */
void ntrw_label_list(ntrw *w, uint32_t index, const uint8_t *activity, const char *key,
                     const char *value);
void ntrw_raw_v6_block(ntrw *w, uint8_t kind, const uint8_t *data, uint32_t len);
/* End of stream: NullReference tag (V4/V5) or EndOfStream block (V6). */
void ntrw_end(ntrw *w);

/* Low-level, for malformed-input tests. */
void ntrw_bytes(ntrw *w, const void *p, size_t n);
void ntrw_u8(ntrw *w, uint8_t v);
void ntrw_u16(ntrw *w, uint16_t v);
void ntrw_u32(ntrw *w, uint32_t v);
void ntrw_u64(ntrw *w, uint64_t v);
void ntrw_varuint(ntrw *w, uint64_t v);
void ntrw_wstr(ntrw *w, const char *s);

#endif
