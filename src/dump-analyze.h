/* dump analyze's commands, shared by its files (dump-analyze.c reads the command line and runs
 * them; each command's file prints its answer). */
#ifndef DNT_DUMP_ANALYZE_H
#define DNT_DUMP_ANALYZE_H

#include "dnt-core.h"
#include "options.h"

struct analyze_options {
  const char *core, *runtime_dir;
  struct dnt_strlist commands;
  int json;
};

struct analysis {
  const struct analyze_options *o;
  dnt_core *core;
  dnt_clr *clr;
  dnt_clr_heap *heap; /* found when a command first needs it (NULL until then) */
  int thread;         /* the current thread (setthread): its index among the core's */
  size_t stale_said;  /* the stale assemblies' files warned about (dnt_clr_stale_files) */
};

/* The heap, found once: NULL after printing why. */
dnt_clr_heap *dnt_analyze_heap(struct analysis *a, const char *command);

/* dumpheap [-stat] [-type NAME] [-mt MT] (dump-heap.c): 0, or 1 after printing why. */
int dnt_analyze_dumpheap(struct analysis *a, int argc, char **argv);

/* clrstack [-all] (dump-stack.c): 0, or 1 after printing why. */
int dnt_analyze_clrstack(struct analysis *a, int argc, char **argv);

/* dumpobj ADDR (dump-obj.c): 0, or 1 after printing why. */
int dnt_analyze_dumpobj(struct analysis *a, int argc, char **argv);

/* gcroot [-nostacks] [-limit N] ADDR (dump-gcroot.c): 0, or 1 after printing why. */
int dnt_analyze_gcroot(struct analysis *a, int argc, char **argv);

/* eeheap -gc (dump-heap.c): 0, or 1 after printing why. */
int dnt_analyze_eeheap(struct analysis *a, int argc, char **argv);

#endif
