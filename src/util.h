/* Small helpers shared by the subcommands: messages in git's style, checked allocation,
 * JSON string output. */
#ifndef DNT_UTIL_H
#define DNT_UTIL_H

#include <stdio.h>
#include <stddef.h>
#include <stdint.h>

/* "dntrace: error: ..." on stderr; returns -1 so callers can `return error(...)`. */
int dnt_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void dnt_warning(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Prints "dntrace: fatal: ..." and exits with `code`. */
void dnt_die(int code, const char *fmt, ...) __attribute__((format(printf, 2, 3), noreturn));

/* Allocation that dies on failure: only for the CLI, never in the libraries. */
void *dnt_xmalloc(size_t n);
void *dnt_xrealloc(void *p, size_t n);
char *dnt_xstrdup(const char *s);


/* A string some other process chose (a runtime's answer, a command line), made safe to print on
 * a terminal by dnt_text_escape's rules (trace/dnt-trace.h): a heap copy (caller-owned: free it);
 * NULL in, NULL out. */
char *dnt_safe_text(const char *s);

/* The wall clock in ms since the Unix epoch (a rule's time when no event gives one). */
uint64_t dnt_unix_ms(void);

/* Whether standard output is a pipe whose reader has gone (`dntrace ... | head -1`): what could not
 * be written then was not wanted, and the command ends quietly (EPIPE is no error for a CLI). */
int dnt_stdout_closed(void);

/* Parses a positive pid; -1 if s is not one. */
int dnt_parse_pid(const char *s);
/* The same for a -p value: prints "'X' is not a process id" when it is not one. */
int dnt_opt_pid(const char *arg);

/* A --duration value: dd:hh:mm:ss, hh:mm:ss, or a number with s, m or h (30s, 1.5m); in ms,
 * 0 when s is none of these. */
uint64_t dnt_parse_duration(const char *s);
/* A count for option opt ("-n", "--top"): 1..max, whole string. 0, or -1 with the error printed. */
int dnt_parse_count(const char *opt, const char *arg, long max, long *out);

/* The candidate within a slip of word (an edit distance of 1 for a short word, 2 otherwise, a
 * swap of neighbours counting as one), for "did you mean ...?"; NULL when none is that close.
 * candidates may hold NULLs (skipped). */
const char *dnt_nearest(const char *word, const char *const *candidates, size_t n);

/* fflush + ferror on stdout, so `dntrace ... > /dev/full` fails loudly. 0 or an exit code. */
int dnt_finish_stdout(void);

#endif
