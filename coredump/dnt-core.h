/* coredump/: a .NET process's core file read without the runtime's debugging library (`dntrace
 * dump analyze`, issue 25): the ELF core's memory, threads and mapped files; the runtime's data
 * contracts (the JSON descriptor libcoreclr.so exports as DotNetRuntimeContractDescriptor: the
 * runtime's own account of its types' field offsets and its globals); and from them the managed
 * threads as SOS's clrthreads lists them. docs/internals/dump-analyze-spike.md says why this way.
 *
 * A core is untrusted bytes: every offset, size and count is checked against what the file holds;
 * a read of memory the core does not hold fails, never reads past the file. The file is mapped,
 * not read into memory. Never prints, never exits; errors come back as a message. One public
 * header. */
#ifndef DNT_CORE_H
#define DNT_CORE_H

#include <stddef.h>
#include <stdint.h>

/* ---- the core file ---- */

typedef struct dnt_core dnt_core;

/* A file the process had mapped (NT_FILE): [start, end) of its memory from offset of the file. */
struct dnt_core_mapping {
  uint64_t start, end, offset;
  const char *path; /* borrowed from the core */
};

/* A thread of the process (NT_PRSTATUS), in the core's order (SOS's DBG column is that index). */
struct dnt_core_thread {
  uint32_t tid;
  uint64_t rip, rsp, rbp;
  uint64_t gpr[16]; /* the general registers, the processor's numbering (0 rax ... 3 rbx, 4 rsp, 5 rbp ... 15 r15) */
};

/* Opens the core at path (an x86-64 ELF core). 0, or -1 with err (caller's, cap bytes). *out the
 * callee's: close with dnt_core_close. */
int dnt_core_open(dnt_core **out, const char *path, char *err, size_t cap);
void dnt_core_close(dnt_core *c);

/* The mapped files and the threads, borrowed until the core is closed. */
size_t dnt_core_mappings(const dnt_core *c, const struct dnt_core_mapping **v);
size_t dnt_core_threads(const dnt_core *c, const struct dnt_core_thread **v);

/* n bytes of the process's memory at addr into buf: 0, or -1 when the core does not hold them
 * all. */
int dnt_core_read(const dnt_core *c, uint64_t addr, void *buf, size_t n);
int dnt_core_read_u64(const dnt_core *c, uint64_t addr, uint64_t *v);
int dnt_core_read_u32(const dnt_core *c, uint64_t addr, uint32_t *v);
/* A hint: the memory at [addr, addr + n) will not be read again soon (the pages of the file
 * mapped for it are let go; a later read maps them again). Keeps a walk of a large heap from
 * holding the whole core in memory. */
void dnt_core_forget(const dnt_core *c, uint64_t addr, uint64_t n);

/* ---- the runtime in it ---- */

typedef struct dnt_clr dnt_clr;

/* Finds the runtime in the core: libcoreclr.so among its mapped files; its descriptor's address
 * from the symbol table of that library's file (at the path the core names, or in runtime_dir
 * when given); the descriptor and its JSON read from the core. 0, or -1 with err: not a .NET
 * process, a runtime without contracts (before .NET 9), its library not found on this machine
 * (err names the version and the path looked at). *out the callee's (the core borrowed: close the
 * runtime first). */
int dnt_clr_open(dnt_clr **out, const dnt_core *c, const char *runtime_dir, char *err, size_t cap);
void dnt_clr_close(dnt_clr *r);

/* The runtime's version as its folder names it ("10.0.12"; "" when the path does not say). */
const char *dnt_clr_version(const dnt_clr *r);
/* The library's own version stamp, as SOS's eeversion prints it ("10.0.1226.42308 @Commit:
 * HASH"; "" when the file has none). */
const char *dnt_clr_file_version(const dnt_clr *r);
/* The library's path the core names. */
const char *dnt_clr_library(const dnt_clr *r);

/* A contract's version in the descriptor, 0 when it has none. */
int dnt_clr_contract(const dnt_clr *r, const char *name);
/* A field's offset in a type of the descriptor: 0, or -1 when it has no such field. */
int dnt_clr_field(const dnt_clr *r, const char *type, const char *field, uint64_t *offset);
/* A global's value: a literal's value, or the address a pointer global holds (the address of the
 * runtime's variable: read it for the variable's value). 0, or -1 when there is none. */
int dnt_clr_global(const dnt_clr *r, const char *name, uint64_t *value);

/* ---- objects and types (the Object, RuntimeTypeSystem and Loader contracts) ---- */

/* An object's MethodTable: 0, or -1 when the core does not hold it. */
int dnt_clr_object_mt(const dnt_clr *r, uint64_t obj, uint64_t *mt);
/* The name of the type whose MethodTable is mt ("Namespace.Outer+Inner"), from its module's
 * metadata (the assembly's file at the path the runtime kept, read on this machine): 0, or -1
 * when it cannot be named (its file missing; arrays and generic instances are not named yet). */
int dnt_clr_type_name(const dnt_clr *r, uint64_t mt, char *buf, size_t cap);
/* The same in the runtime's own format, as SOS's dumpobj writes it: a generic instance's
 * arguments after the whole name, each with its assembly
 * ("System.Collections.Generic.List`1[[System.String, System.Private.CoreLib]]"). */
int dnt_clr_type_name_sos(const dnt_clr *r, uint64_t mt, char *buf, size_t cap);
/* The static field whose value lives at addr (a reference-type static: a slot of the array the
 * runtime keeps its classes' statics in), among the classes of the modules the process loaded
 * (their generic instances left out): its class's MethodTable and its name. 0, or -1 when none. */
int dnt_clr_static_at(const dnt_clr *r, uint64_t addr, uint64_t *mt, char *name, size_t cap);
/* The CorElementType of a type as an array's element (a primitive's own, VALUETYPE for a struct
 * or an enum, CLASS for any reference type): 0, or -1. */
int dnt_clr_element_type(const dnt_clr *r, uint64_t mt, uint8_t *type);
/* The file of a Module (its path as the runtime kept it) into buf: 0, or -1. */
int dnt_clr_module_path(const dnt_clr *r, uint64_t module, char *buf, size_t cap);
/* The assemblies' files found not to be the ones the process loaded (their PE headers differ
 * from those the core holds: replaced since the dump, a redeployed app): their names, fields and
 * lines are not read (the module's path reads as none). The list grows as modules are met, in
 * order; *files borrowed until the runtime is closed. */
size_t dnt_clr_stale_files(const dnt_clr *r, const char *const **files);

/* A field of a class, as SOS's dumpobj lists them (dnt_clr_fields). */
struct dnt_clr_field {
  uint32_t token;      /* its FieldDef token */
  uint32_t offset;     /* from the object's data (after its MethodTable), or its statics base */
  uint8_t type;        /* the runtime's CorElementType for it (every reference is CLASS 0x12) */
  uint8_t sig_type;    /* its signature's (SZARRAY 0x1D, GENERICINST 0x15, CLASS, VALUETYPE...) */
  uint32_t type_token; /* its signature's class or struct token, 0 when none */
  int is_static, thread_static;
  uint64_t type_mt;    /* its type's MethodTable when the runtime loaded it, else 0 */
  uint64_t address;    /* where its value is; 0 when not known (a thread static, statics not allocated) */
  uint64_t enclosing;  /* the MethodTable of the class (of the hierarchy) that declares it */
  char name[256];
};
/* The fields of an object of MethodTable mt at obj (0: a class's statics only matter): the
 * parents' first, each class's instance fields then its statics. *v malloc'ed, the caller's. 0,
 * or -1 (a class the core does not hold, a field layout unknown here). */
int dnt_clr_fields(const dnt_clr *r, uint64_t mt, uint64_t obj, struct dnt_clr_field **v, size_t *n);

/* Where a thread static field f of the class mt lives on the thread whose Thread is thread: 0
 * with *at, or -1 when that thread has no storage for it (it never touched the class). */
int dnt_clr_thread_static(const dnt_clr *r, uint64_t mt, const struct dnt_clr_field *f, uint64_t thread, uint64_t *at);

/* A class's count of instance fields (its parents' included) and of its own statics: 0, or -1. */
int dnt_clr_field_counts(const dnt_clr *r, uint64_t mt, unsigned *instances, unsigned *statics);

/* A String object's text in UTF-8 (*out malloc'ed, the caller's; at most max UTF-16 units): 0,
 * or -1 when the core does not hold it. */
int dnt_clr_string(const dnt_clr *r, uint64_t obj, size_t max, char **out);

/* An exception object, as SOS's pe shows it. */
struct dnt_clr_exception {
  uint64_t address, mt;
  char type[512];           /* "" when it cannot be named */
  char *message;            /* NULL: none (malloc'ed, as the two below) */
  char *stack_trace_string; /* _stackTraceString */
  uint64_t inner;           /* the inner exception, 0 when none */
  char inner_type[512];
  uint32_t hresult;
  /* the stack its throw recorded (_stackTrace: the frames the exception passed), innermost first */
  enum { DNT_CLR_TRACE_NONE, DNT_CLR_TRACE_UNAVAILABLE, DNT_CLR_TRACE_UNREADABLE, DNT_CLR_TRACE_FRAMES } trace;
  struct dnt_clr_trace_frame {
    uint64_t ip, sp, method; /* method: its MethodDesc */
  } *frames;                 /* malloc'ed */
  size_t nframes;
};

/* Reads the exception at obj. 0, or -1 with err. e the caller's (release it). */
int dnt_clr_exception_read(const dnt_clr *r, uint64_t obj, struct dnt_clr_exception *e, char *err, size_t cap);
void dnt_clr_exception_release(struct dnt_clr_exception *e);

/* ---- code and methods (the ExecutionManager contract, MethodDescs) ---- */

/* The method whose code holds ip: its MethodDesc and where its code (or its function, in a
 * ReadyToRun image) begins. 0, or -1 when ip is in no managed method's code (native code, a
 * stub). */
int dnt_clr_code_method(const dnt_clr *r, uint64_t ip, uint64_t *md, uint64_t *start);
/* A MethodDesc's MethodTable and MethodDef token. 0, or -1. */
int dnt_clr_method_desc(const dnt_clr *r, uint64_t md, uint64_t *mt, uint32_t *token);
/* "Namespace.Type.Method" of a MethodDesc, from its module's metadata: 0, or -1. */
int dnt_clr_method_name(const dnt_clr *r, uint64_t md, char *buf, size_t cap);
/* The file of a MethodDesc's module (its path as the runtime kept it): 0, or -1. */
int dnt_clr_method_module(const dnt_clr *r, uint64_t md, char *buf, size_t cap);

/* ---- the GC heap (the GC's own interface to debuggers: .NET 10's contracts have no GC yet) ---- */

typedef struct dnt_clr_heap dnt_clr_heap;

/* A region of the heap holding objects: [start, end). */
struct dnt_clr_region {
  uint64_t start, end;  /* its objects' (end = start: none) */
  uint64_t committed;   /* where its committed memory ends */
  uint64_t descriptor;  /* the GC's record of it (its heap_segment) */
  int generation; /* 0, 1, 2; 3 the large object heap, 4 the pinned one */
  int heap;       /* its heap's index (server GC has one per core) */
  int frozen;     /* a frozen segment: objects never collected (string literals) */
};

/* Finds the heap: its regions (in the walk's order: by address)
 * and the allocation contexts the walk steps over. 0, or -1 with err (a runtime whose GC
 * interface this reader does not know; a triage dump, which holds none of the GC's state). *out
 * the callee's: close it before the runtime. */
int dnt_clr_heap_open(dnt_clr_heap **out, const dnt_clr *r, char *err, size_t cap);
void dnt_clr_heap_close(dnt_clr_heap *h);
size_t dnt_clr_heap_regions(const dnt_clr_heap *h, const struct dnt_clr_region **v);
/* Its number of heaps: 1 with workstation GC. */
int dnt_clr_heap_count(const dnt_clr_heap *h);
/* Heap i's gc_heap (server GC), 0 with workstation GC. */
uint64_t dnt_clr_heap_address(const dnt_clr_heap *h, int i);
/* DATAS's mode (the GC's dynamic adaptation: server GC says it), -1 when the GC does not. */
int dnt_clr_heap_datas(const dnt_clr_heap *h);
/* Whether the GC said its structures were valid when the core was taken (not in the middle of
 * a collection): a walk of a heap that is not may meet things that are not objects. */
int dnt_clr_heap_valid(const dnt_clr_heap *h);

/* One object the walk met. An address where the walk found no valid MethodTable is given too
 * (valid 0, mt the word read there, size 0), and the walk looks for the next object word by
 * word, as ClrMD's careful walk does. */
struct dnt_clr_object {
  uint64_t address, mt;
  uint64_t size; /* as SOS counts it: BaseSize plus the components, at least 24; not aligned */
  int valid;
  const struct dnt_clr_region *region;
};
/* Nonzero stops the walk. */
typedef int (*dnt_clr_object_fn)(void *ud, const struct dnt_clr_object *o);

struct dnt_clr_walk {
  uint64_t invalid; /* addresses without a valid MethodTable met */
  uint64_t missing; /* regions (or their rest) whose memory the core does not hold (a mini dump) */
};
/* Calls fn for every object, in the walk's order (that of dotnet-dump's dumpheap). 0, or -1 out
 * of memory. *w the caller's, filled. */
int dnt_clr_heap_walk(dnt_clr_heap *h, dnt_clr_object_fn fn, void *ud, struct dnt_clr_walk *w);

/* Whether obj is an object of a valid type: 0 with its MethodTable and size (as SOS counts it),
 * or -1. */
int dnt_clr_heap_object(dnt_clr_heap *h, uint64_t obj, uint64_t *mt, uint64_t *size);

/* The last object at or before addr in the region holding addr (the object an interior pointer
 * points into): 0, or -1 when addr is in no region or none is there. */
int dnt_clr_heap_object_before(dnt_clr_heap *h, uint64_t addr, uint64_t *obj);

/* dumpheap -stat's rows: a MethodTable's objects, in the order the walk first met it. */
struct dnt_clr_type_stat {
  uint64_t mt, count, size;
};
/* Walks the heap and counts its objects by MethodTable (only those for which keep, when given,
 * returns nonzero; an invalid one under the word found at its address). *v malloc'ed, the
 * caller's; *n its length. 0, or -1 out of memory. */
int dnt_clr_heap_stat(dnt_clr_heap *h, int (*keep)(void *ud, const struct dnt_clr_object *o), void *ud,
                      struct dnt_clr_type_stat **v, size_t *n, struct dnt_clr_walk *w);

/* ---- roots and references (SOS's gcroot, as ClrMD finds them) ---- */

/* A handle's type, the GC's numbering (HNDTYPE_*); a root of the finalizer queue is ROOT_FINALIZER. */
enum {
  DNT_CLR_HANDLE_WEAK_SHORT = 0, DNT_CLR_HANDLE_WEAK_LONG = 1, DNT_CLR_HANDLE_STRONG = 2, DNT_CLR_HANDLE_PINNED = 3,
  DNT_CLR_HANDLE_VARIABLE = 4, DNT_CLR_HANDLE_REFCOUNTED = 5, DNT_CLR_HANDLE_DEPENDENT = 6,
  DNT_CLR_HANDLE_ASYNC_PINNED = 7, DNT_CLR_HANDLE_SIZED_REF = 8, DNT_CLR_HANDLE_WEAK_NATIVE_COM = 9,
  DNT_CLR_ROOT_FINALIZER = 100
};

struct dnt_clr_root {
  uint64_t address;   /* the handle, or the finalizer queue's slot */
  uint64_t object;    /* what it holds (never 0) */
  uint64_t dependent; /* a dependent handle's secondary object, 0 when none */
  int kind;
};

/* The GC's handles that hold an object, in the order the runtime's debugger interface lists them
 * (handle table by handle table; in each, type by type; in each segment, a type's blocks in its
 * allocation chain's order). *v malloc'ed, the caller's. 0, or -1 with err (tables the core does
 * not hold, or in a layout this reader does not know). */
int dnt_clr_handles(dnt_clr_heap *h, struct dnt_clr_root **v, size_t *n, char *err, size_t cap);

/* The objects ready for finalization (each heap's f-reachable queue), as roots. *v malloc'ed, the
 * caller's. 0, or -1 out of memory. */
int dnt_clr_finalizer_roots(dnt_clr_heap *h, struct dnt_clr_root **v, size_t *n);

/* Whether a handle of this kind keeps its object alive (a ref-counted handle's count is not read:
 * it is not counted as one). */
int dnt_clr_root_is_strong(int kind);

/* The search for paths from roots to one object, as ClrMD's GCRoot walks it (depth first, an
 * object's references in its GCDesc's order after its dependent handles' secondaries; what a search
 * proved reaches the target is kept for the next ones, so a root's path may join an earlier one). */
typedef struct dnt_clr_gcroot dnt_clr_gcroot;

/* A search for target; handles (borrowed for the search's life) gives the dependent handles. 0, or
 * -1 out of memory. *out the callee's (free with dnt_clr_gcroot_free, before the heap). */
int dnt_clr_gcroot_new(dnt_clr_gcroot **out, dnt_clr_heap *h, uint64_t target, const struct dnt_clr_root *handles,
                       size_t nhandles);
void dnt_clr_gcroot_free(dnt_clr_gcroot *g);
/* The path from the object from to the target: *path (from first, the target last; malloc'ed, the
 * caller's) and its length, 0 when none. 0, or -1 out of memory. */
int dnt_clr_gcroot_path(dnt_clr_gcroot *g, uint64_t from, uint64_t **path, size_t *n);
/* Whether the link from one object to the next of a path is a dependent handle's. */
int dnt_clr_gcroot_dependent_link(const dnt_clr_gcroot *g, uint64_t from, uint64_t to);
/* The address of the element or field of obj that holds ref (its first), 0 when none. */
uint64_t dnt_clr_reference_slot(dnt_clr_heap *h, uint64_t obj, uint64_t ref);

/* ---- managed threads (the Thread contract) ---- */

struct dnt_clr_thread {
  uint32_t id;           /* the managed thread id */
  uint32_t os_id;        /* the OS's (the core's thread ids) */
  int dbg;               /* the index of that thread among the core's, -1 when it has none */
  uint64_t address;      /* the Thread object */
  uint32_t state;        /* Thread::m_State's bits */
  int cooperative;       /* GC mode: 1 cooperative, 0 preemptive */
  uint64_t alloc_ptr, alloc_limit; /* its allocation context */
  uint64_t frame;        /* its innermost explicit Frame */
  uint64_t last_thrown;  /* the last exception object it threw, 0 when none */
  int finalizer, gc;     /* the runtime's finalizer thread, a GC thread */
};

struct dnt_clr_threads {
  uint32_t count, unstarted, background, pending, dead;
  uint64_t domain; /* the AppDomain */
  struct dnt_clr_thread *v;
  size_t n;
};

#define DNT_CLR_TS_BACKGROUND 0x200u
#define DNT_CLR_TS_UNSTARTED 0x400u
#define DNT_CLR_TS_DEAD 0x800u
#define DNT_CLR_TS_THREADPOOL 0x01000000u /* TS_TPWorkerThread */

/* The thread store's list, walked as the Thread contract says. 0, or -1 with err (a list that
 * does not end, memory the core lacks). t the caller's (free with dnt_clr_threads_release). */
int dnt_clr_threads_read(const dnt_clr *r, struct dnt_clr_threads *t, char *err, size_t cap);
void dnt_clr_threads_release(struct dnt_clr_threads *t);

/* ---- stacks (as SOS's clrstack walks them) ---- */

/* A row of a managed thread's stack: a managed method's frame (frame 0), or one of the runtime's
 * explicit Frames (its address in frame, its kind's name; method: the P/Invoke target an
 * InlinedCallFrame names, 0 when none). sp: the frame's stack pointer (a Frame's own address);
 * ip: where it is (a Frame's: where the thread was when it was met). */
struct dnt_clr_frame {
  uint64_t sp, ip;
  uint64_t method; /* MethodDesc */
  uint64_t frame;
  const char *kind; /* static */
};
/* The source line of a managed frame at ip (caller: not the innermost frame, nor the first after
 * a Frame: its ip is a return address, the line the call's), as SOS's clrstack shows it: the IL
 * offset from the method's debug info, the line from the portable PDB beside its module's file.
 * 0 with the document's path in file, or -1 (no PDB there, no line, precompiled code). */
int dnt_clr_source_line(const dnt_clr *r, uint64_t ip, int caller, char *file, size_t cap, uint32_t *line);
/* The thread's stack, innermost first. *v malloc'ed, the caller's (NULL, 0 for a thread the core
 * holds no registers of). 0, or -1 out of memory or the runtime's Frame layout unknown. */
int dnt_clr_stack_walk(const dnt_clr *r, const struct dnt_clr_thread *t, struct dnt_clr_frame **v, size_t *n);

/* A reference on a thread's stack, as the runtime's debugger interface reports it: a slot its
 * managed frame's GC info says is live at the frame's code offset (registers saved by a callee
 * read where they were saved). */
struct dnt_clr_stack_root {
  uint64_t address; /* a stack slot's address; 0 for a register (as SOS shows it) */
  uint64_t object;  /* what it holds (never 0; an interior pointer as it is, into its object) */
  uint64_t sp, ip;  /* the frame's, as clrstack shows it */
  char reg[16];     /* the slot's register, SOS's name ("rbp", "rsp", "caller.rsp", "rbx") */
  int32_t offset;   /* a stack slot's, from reg */
  int interior, pinned;
  int active;       /* the frame is the thread's running one (its ip is no return address) */
};
/* The thread's stack roots: its managed frames innermost first, each frame's slots in its GC
 * info's order (an exception handler's frame for its method, whose own frame then reports none).
 * Not read: the runtime's Frames' own (a stub's arguments).
 * *v malloc'ed, the caller's. 0, or -1 out of memory or the runtime's Frame layout unknown. */
int dnt_clr_stack_roots(const dnt_clr *r, const struct dnt_clr_thread *t, struct dnt_clr_stack_root **v, size_t *n);

#endif
