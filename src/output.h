/* The files a command writes, opened one way in every command (see "OUTPUT FILES" in dntrace(1)):
 *   - "-" is standard output;
 *   - the format's extension is added only when the name has none ("out" -> "out.csv", while
 *     "out.txt" stays as given; /dev/stdout stays, and is refused: it is a link);
 *   - a symbolic link is never written through, even a dangling one;
 *   - an existing regular file of the user's is overwritten (one of another user's is refused),
 *     and "overwriting 'F'" is said on stderr; with
 *     --no-clobber it is refused instead; anything else that exists (a directory, a device,
 *     a fifo) is refused;
 *   - the bytes go to a temporary beside the file, renamed over it by dnt_output_commit, so a
 *     failed run leaves the old file (or none) rather than half a new one; except for a file
 *     that is meant to grow while it is watched (DNT_OUTPUT_STREAM: counters collect's CSV),
 *     opened in place with O_NOFOLLOW. */
#ifndef DNT_OUTPUT_H
#define DNT_OUTPUT_H

#include <stdio.h>

struct dnt_output {
  FILE *fp;   /* where to write: stdout for "-" */
  char *path; /* the final name (heap; "-" for stdout) */
  char *tmp;  /* the temporary beside it (heap), NULL for stdout */
};

/* --no-clobber for the rest of the process: an existing file is an error, not overwritten. */
void dnt_output_set_no_clobber(int on);

/* The name a file is written under: name ("-" as is) with ext (".csv") added when the last
 * component of name has no extension of its own, and name is not already something other than
 * a regular file (/dev/stdout, a directory: kept, to be refused). Heap, caller-owned. */
char *dnt_output_name(const char *name, const char *ext);

/* When name is an existing directory (`-o traces/`): the path of file's last component inside it
 * (the name the command would have chosen), heap, caller-owned; else NULL. */
char *dnt_output_in_dir(const char *name, const char *file);

/* Whether path may be written as the policy says (nothing is created): 0, or -1 with one error
 * line printed. quiet: do not say "overwriting" (a caller that checks early and opens later). */
int dnt_output_check(const char *path, int quiet);

#define DNT_OUTPUT_STREAM 1  /* write in place, no temporary */
#define DNT_OUTPUT_REPLACE 2 /* the file is ours already (written again): no check, no message */

/* Opens path (already named by dnt_output_name) for writing as the policy says: 0, or -1 with one
 * error line printed (out left empty). flags: 0, DNT_OUTPUT_STREAM or DNT_OUTPUT_REPLACE. Release with
 * dnt_output_commit or dnt_output_abort. */
int dnt_output_open(struct dnt_output *out, const char *path, int flags);

/* Closes the stream and, unless it is stdout, renames the temporary over the file: 0, or -1 with
 * the error printed and the temporary removed (the old file untouched). Frees out's strings. */
int dnt_output_commit(struct dnt_output *out);

/* Closes and removes the temporary, so an existing file stays as it was (a STREAM file, already
 * truncated, is removed itself). Frees out's strings; a no-op on an output never opened. */
void dnt_output_abort(struct dnt_output *out);

#endif
