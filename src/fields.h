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
 * metadata has nfields == 0 and they decode to an empty record. */
#ifndef DNT_FIELDS_H
#define DNT_FIELDS_H

#include <stddef.h>
#include <stdint.h>

#include "ntr.h"

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

#endif
