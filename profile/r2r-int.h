/* profile/: ReadyToRun images, to name the frames of precompiled code the trace's rundown leaves
 * out (methods whose MethodDesc was never loaded: P/Invoke stubs, the epoll loop's wait). Both
 * readers take untrusted bytes (a file a trace names): every offset and length is checked, and
 * what does not hold is "no name", never a crash. */
#ifndef DNT_PROFILE_R2R_INT_H
#define DNT_PROFILE_R2R_INT_H

#include <stddef.h>
#include <stdint.h>

#include "dnt-profile.h"

/* ecma-names.c: the ECMA-335 metadata tables (II.22, II.24) as far as method names need them:
 * TypeDef, MethodDef and NestedClass, and the #Strings heap. */
struct dnt__ecma {
  const uint8_t *strings; /* #Strings heap */
  uint32_t strings_len;
  const uint8_t *typedefs, *methods, *nested; /* the tables' first rows */
  uint32_t ntypedefs, nmethods, nnested;
  uint32_t typedef_row, method_row, nested_row; /* row sizes */
  uint8_t str_size, typedef_idx, method_idx;    /* index sizes (2 or 4) */
  uint8_t td_name, td_ns, td_methods;           /* column offsets in a TypeDef row */
  const uint8_t *blobs;                         /* #Blob heap (NULL when none) */
  uint32_t blobs_len;
  const uint8_t *typerefs;                      /* TypeRef rows */
  uint32_t ntyperefs, typeref_row;
  uint8_t blob_size, scope_size;                /* a Blob index's size, a ResolutionScope's */
  const uint8_t *fields;                        /* Field rows */
  uint32_t nfields, field_row;
};

/* The stream named name of the metadata root at md (len bytes): its bytes and size, or NULL. */
const uint8_t *dnt__ecma_stream(const uint8_t *md, size_t len, const char *name, uint32_t *size);
/* Reads the metadata root at md (len bytes, borrowed: it must outlive e). 0, or -1 when it is
 * not metadata dntrace can read. */
int dnt__ecma_open(struct dnt__ecma *e, const uint8_t *md, size_t len);
/* "Namespace.Outer+Inner.Method" of MethodDef row rid (1-based) into buf: 1, or 0 when there is
 * no such row or its names do not read. */
int dnt__ecma_method_name(const struct dnt__ecma *e, uint32_t rid, char *buf, size_t cap);
/* The parameters of MethodDef row rid as the runtime's debugger interface writes them after a
 * method's name: "(Int32, System.String, Boolean ByRef, Byte*, System.Object[])". 1, or 0 when
 * its signature does not read. */
int dnt__ecma_method_params(const struct dnt__ecma *e, uint32_t rid, const struct dnt_generic_names *inst, char *buf,
                            size_t cap);
/* Field row rid: its name into buf, and what its signature's type is: the element type (CLASS
 * 0x12, VALUETYPE 0x11, SZARRAY 0x1D, GENERICINST 0x15, a primitive's...) and, for a CLASS or
 * VALUETYPE, its TypeDefOrRef token (0x02.../0x01.../0x1B...; 0 otherwise); the type's own
 * signature bytes into sig (*siglen; 0 when longer than sigcap). 1, or 0. */
int dnt__ecma_field(const struct dnt__ecma *e, uint32_t rid, char *buf, size_t cap, uint8_t *element, uint32_t *token,
                    uint8_t *sig, size_t sigcap, size_t *siglen);
/* The TypeDef row (1-based) of the top-level type ns.name, 0 when none. */
uint32_t dnt__ecma_find_type(const struct dnt__ecma *e, const char *ns, const char *name);
/* "Namespace.Outer+Inner" of TypeDef row td (1-based) into buf: 1, or 0 as above. */
int dnt__ecma_type_name(const struct dnt__ecma *e, uint32_t td, char *buf, size_t cap);

/* methods.c: the regular file at path mapped read-only (at most max bytes; *len its size; unmap
 * it with munmap), or NULL: a trace or a core names the file, so a FIFO or a device is not waited
 * on, nor a huge file taken. */
#define DNT__MAX_IMAGE (1u << 30)
uint8_t *dnt__map_file(const char *path, size_t max, size_t *len);

/* r2r.c: a PE file with ReadyToRun code (its bytes in memory). */
struct dnt__r2r;
/* bytes (len, taken: released by dnt__r2r_free, also on failure: munmap'ed when mapped, else
 * freed): NULL when it is not a PE image with ReadyToRun code for a machine dntrace knows, or
 * out of memory. */
struct dnt__r2r *dnt__r2r_open(uint8_t *bytes, size_t len, int mapped);
uint32_t dnt__r2r_image_size(const struct dnt__r2r *r);
/* The RVA where the precompiled code of MethodDef token (0x06xxxxxx) begins, or 0 when it has
 * none. */
uint32_t dnt__r2r_method_rva(const struct dnt__r2r *r, uint32_t token);
/* The name of the method whose entry code holds rva into buf: 1; 0 when rva is in no function
 * of the image or in one that is no MethodDef's entry (a funclet, a generic instance). */
int dnt__r2r_name(const struct dnt__r2r *r, uint32_t rva, char *buf, size_t cap);
void dnt__r2r_free(struct dnt__r2r *r);

#endif
