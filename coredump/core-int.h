/* coredump/'s own declarations, shared by its files (not public). */
#ifndef DNT_CORE_INT_H
#define DNT_CORE_INT_H

#include <stddef.h>
#include <stdint.h>

#include "dnt-core.h"

struct segment {
  uint64_t vaddr, filesz, offset;
};

/* A file the process had mapped, read for what the core left out (backing.c). */
struct backing {
  const char *path;    /* the core's */
  const uint8_t *f;    /* mapped; NULL when it cannot be read */
  uint64_t size;
  uint64_t bias;       /* where its address 0 was loaded (its offset-0 mapping's start) */
  struct reloc {
    uint64_t at, addend;
  } *rels;             /* its R_X86_64_RELATIVE relocations, by address */
  size_t nrels;
};

struct dnt_core {
  const uint8_t *base; /* the file, mapped */
  uint64_t size;
  int cut; /* a segment runs past the file's end */
  struct segment *segs;
  size_t nsegs;
  struct dnt_core_mapping *maps;
  size_t nmaps;
  struct dnt_core_thread *threads;
  size_t nthreads, capthreads;
  struct backing *backings; /* made as reads need them */
  size_t nbackings;
};

/* backing.c: n bytes at addr from the file mapped there (not the core's), relocated as the loader
 * did: 0, or -1 when no file was mapped there or it cannot be read. c's cache of files grows. */
int dnt__backing_read(dnt_core *c, uint64_t addr, uint8_t *to, size_t n);
void dnt__backings_free(dnt_core *c);

/* Little-endian numbers of a core's, a file's or an image's bytes (core.c). */
uint16_t dnt__u16(const uint8_t *p);
uint32_t dnt__u32(const uint8_t *p);
uint64_t dnt__u64(const uint8_t *p);

/* clr.c: the core a runtime was found in. */
/* Reads what the core itself holds at addr (no file behind it): 0, or -1 where it holds nothing. */
int dnt__core_read_dumped(const dnt_core *c, uint64_t addr, void *buf, size_t n);

/* modules.c: which modules' files are not the ones the process loaded (checked once each). */
struct dnt__module_checks;
struct dnt__module_checks *dnt__module_checks_new(void);
void dnt__module_checks_free(struct dnt__module_checks *m);
/* 1 when the file at path is not the one of module (its headers differ from the core's). */
int dnt__module_stale(const dnt_clr *r, struct dnt__module_checks *m, uint64_t module, const char *path);
size_t dnt__module_stale_files(const struct dnt__module_checks *m, const char *const **files);
/* The runtime's checks (clr.c). */
struct dnt__module_checks *dnt__clr_module_checks(const dnt_clr *r);

const dnt_core *dnt__clr_core(const dnt_clr *r);

/* For the files that walk the runtime's structures: a field's offset in the descriptor, and
 * reads of the runtime's memory (0, or -1 as dnt_clr_field and dnt_core_read). */
static inline int clr_field(const dnt_clr *r, const char *type, const char *name, uint64_t *off) {
  return dnt_clr_field(r, type, name, off);
}
static inline int clr_u64(const dnt_clr *r, uint64_t at, uint64_t *v) { return dnt_core_read_u64(dnt__clr_core(r), at, v); }
static inline int clr_u32(const dnt_clr *r, uint64_t at, uint32_t *v) { return dnt_core_read_u32(dnt__clr_core(r), at, v); }
/* The runtime's g_dacTable (the addresses of its debugger-visible variables) and its size in
 * bytes: 0 when its library exports none. */
uint64_t dnt__clr_dac_table(const dnt_clr *r, uint64_t *size);

/* code.c: the function holding a code address, for unwinding it: where it begins, its
 * UNWIND_INFO (both 0 when not known), and the base its RVAs count from (a chained function's). */
struct dnt__code_unwind {
  uint64_t begin, info, base;
  uint64_t header; /* the JIT's RealCodeHeader of the method, 0 for precompiled code */
  uint64_t method_info; /* precompiled code: the UNWIND_INFO of the method's own function (not a funclet's) */
};
/* As dnt_clr_code_method, and the function's unwind data into *u. */
int dnt__clr_code(const dnt_clr *r, uint64_t ip, uint64_t *md, uint64_t *start, struct dnt__code_unwind *u);

/* stack.c: a thread's registers at a frame: ip, sp and rbp's values; where each register's value
 * lies in the core (loc: 0 unknown; saved by a callee, or in an exception's context), else its
 * value when known (the thread's own registers, for its innermost frame). */
struct dnt__regs {
  uint64_t ip, sp, fp;
  uint64_t loc[16], val[16];
  uint16_t have; /* which val[] are known */
};
/* A managed frame's registers and its caller's (NULL when they could not be found), its code's
 * unwind data and start, and whether it is the thread's innermost, running frame. */
struct dnt__frame_regs {
  const struct dnt__regs *ctx, *caller;
  const struct dnt__code_unwind *code;
  uint64_t start;
  int active;
};
/* Called for each row of the walk, innermost first (regs NULL for the runtime's Frames); nonzero
 * stops the walk (which then returns -1). */
typedef int (*dnt__frame_fn)(void *ud, const struct dnt_clr_frame *f, const struct dnt__frame_regs *regs);
/* The walk of dnt_clr_stack_walk, frame by frame. 0, or -1. */
int dnt__stack_walk(const dnt_clr *r, const struct dnt_clr_thread *t, dnt__frame_fn fn, void *ud);

/* objects.c: a generic instance's type arguments (at most max; *n 0 for any other type): 0, or
 * -1 when the core does not hold them. */
int dnt__mt_instantiation(const dnt_clr *r, uint64_t mt, uint64_t *args, uint32_t max, uint32_t *n);

/* heap.c, for the roots' and references' readers (roots.c, gcroot.c): the runtime; the GC's
 * g_HandleTableMap; heap i's finalize queue (its CFinalize, 0 when unknown) and the GC's count of
 * generations; an object's valid MethodTable, its flags and its size as SOS counts it (0, or -1
 * when addr holds no object of a valid type). */
const dnt_clr *dnt__heap_clr(const dnt_clr_heap *h);
uint64_t dnt__heap_handle_map(const dnt_clr_heap *h);
uint64_t dnt__heap_finalize_queue(const dnt_clr_heap *h, int i, uint64_t *gen_count);
int dnt__heap_object(dnt_clr_heap *h, uint64_t obj, uint64_t *mt, uint32_t *flags, uint64_t *size);

/* fields.c: a class's statics base: its GC statics (references and structs) or the others, 0
 * when none. */
uint64_t dnt__statics_base(const dnt_clr *r, uint64_t mt, int gc);

/* gcinfo.c: a method's GC info (x64, version 4) at a code offset: its slots, each live or not.
 * flags: the frame's execution was aborted (an exception's), or its untracked slots are not to
 * be reported (a funclet's parent, a filter). 0, or -1 when the info does not read (the core
 * lacks it, it is damaged, or it has more than DNT__GC_MAX_SLOTS slots). */
#define DNT__GC_MAX_SLOTS 4096
#define DNT__GC_ABORTED 1
#define DNT__GC_NO_UNTRACKED 2
enum { DNT__GC_CALLER_SP_REL = 0, DNT__GC_SP_REL = 1, DNT__GC_FRAMEREG_REL = 2 };
#define DNT__GC_INTERIOR 1
#define DNT__GC_PINNED 2
struct dnt__gc_slot {
  int is_register;
  uint32_t reg;    /* a register's number (0 rax, 1 rcx, 2 rdx, 3 rbx, 4 rsp, 5 rbp, 6 rsi, 7 rdi, 8-15) */
  uint32_t base;   /* a stack slot's: DNT__GC_*_REL */
  int32_t offset;  /* a stack slot's, from its base */
  uint32_t flags;  /* DNT__GC_INTERIOR, DNT__GC_PINNED */
  int untracked, live, could;
};
struct dnt__gcinfo {
  uint32_t code_length, stack_base_register; /* the frame register, ~0 none */
  uint32_t outgoing_area;                    /* bytes of outgoing arguments above SP */
  int report_only_leaf, interruptible, safe_point;
  uint32_t nslots;
  struct dnt__gc_slot slots[DNT__GC_MAX_SLOTS];
};
int dnt__gcinfo_read(const dnt_core *c, uint64_t at, uint32_t offset, int flags, struct dnt__gcinfo *g);
/* The same from any memory: read fills buf with n bytes at at (0), or fails (-1). */
typedef int (*dnt__read_fn)(const void *ud, uint64_t at, void *buf, size_t n);
int dnt__gcinfo_decode(dnt__read_fn read, const void *ud, uint64_t at, uint32_t offset, int flags, struct dnt__gcinfo *g);

/* ---- json.c: a JSON text read into a tree of nodes (the descriptor's: small, trusted no more
 * than the core it came from) ---- */

enum json_kind { JSON_NULL, JSON_BOOL, JSON_NUMBER, JSON_STRING, JSON_ARRAY, JSON_OBJECT };

struct json {
  enum json_kind kind;
  const char *key;   /* a member's name (its object's), NUL-terminated in the tree's copy */
  const char *text;  /* a string's, NUL-terminated (escapes kept as written but \" and \\ read) */
  double number;
  int32_t child, next; /* indexes into the tree's nodes; -1 none */
};

struct json_tree {
  struct json *v;
  size_t n, cap;
  char *text; /* the copy the strings point into */
};

/* Reads text (n bytes) into t (caller's, zeroed). 0, or -1 with err. */
int dnt__json_parse(struct json_tree *t, const char *text, size_t n, char *err, size_t cap);
void dnt__json_free(struct json_tree *t);
/* The member named key of object node i, -1 when none. */
int32_t dnt__json_member(const struct json_tree *t, int32_t i, const char *key);

#endif
