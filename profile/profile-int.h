/* profile/: what its files share beyond the public header (dnt-profile.h). */
#ifndef DNT_PROFILE_INT_H
#define DNT_PROFILE_INT_H

#include "dnt-profile.h"

/* methods.c: the first link of the naming chain, the trace's own method table. The runtime's
 * method events (MethodLoadVerbose as it JITs, MethodDC*Verbose in the rundown) give each
 * method's code range and name, the module events each module's file name. Caller-provided
 * storage, zeroed; release with dnt__methods_release. */
struct dnt__method;
struct dnt__module;
struct dnt__image_span;
struct dnt__methods {
  struct dnt__method *v;
  size_t n, cap;
  struct dnt__module *mods;
  size_t nmods, capmods;
  struct dnt__image_span *spans; /* made with the sort */
  size_t nspans;
  int sorted;
};
/* One MethodLoadVerbose/MethodDC*Verbose or ModuleLoad/ModuleDC* event (a payload that does not
 * parse is skipped). 0, or -ENOMEM. */
int dnt__methods_on_method(struct dnt__methods *t, const ntr_event *ev);
int dnt__methods_on_module(struct dnt__methods *t, const ntr_event *ev);
/* `Module!Namespace.Type.Method` for the code at ip into buf: 1, or 0 when no method covers it.
 * An address no method covers between two precompiled (ReadyToRun) methods of one module is in
 * that module's image: `Module!0xADDR` (the rundown leaves out the image's methods whose
 * MethodDesc was never loaded, P/Invoke stubs among them: TraceEvent's `?!?`).
 * Sorts the table on its first call (after the last event). leaf: ip is a sample's own address,
 * else a return address (the call is the byte before). */
int dnt__methods_name(struct dnt__methods *t, uint64_t ip, int leaf, char *buf, size_t cap);
void dnt__methods_release(struct dnt__methods *t);

/* threads.c: thread names by thread id. Caller-provided storage, zeroed; release with
 * dnt__thread_names_release. set copies name (0, or -1 when out of memory); get returns the
 * name, owned by the table, or NULL. */
struct dnt__thread_name;
struct dnt__thread_names {
  struct dnt__thread_name *v;
  size_t n, cap;
};
int dnt__thread_names_set(struct dnt__thread_names *t, uint64_t thread, const char *name);
const char *dnt__thread_names_get(const struct dnt__thread_names *t, uint64_t thread);
void dnt__thread_names_release(struct dnt__thread_names *t);

/* pprof.c: dnt_profile_write's DNT_PROFILE_PPROF. */
int dnt__pprof_write(const struct dnt_profile *prof, const char *title, FILE *fp);

#endif
