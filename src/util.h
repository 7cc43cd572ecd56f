/* Small helpers shared by the subcommands: messages in git's style, checked allocation,
 * JSON string output. */
#ifndef DNT_UTIL_H
#define DNT_UTIL_H

#include <stdio.h>
#include <stddef.h>
#include <stdint.h>
#include <getopt.h>

/* "dntrace: error: ..." on stderr; returns -1 so callers can `return error(...)`. */
int dnt_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void dnt_warning(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Prints "dntrace: fatal: ..." and exits with `code`. */
void dnt_die(int code, const char *fmt, ...) __attribute__((format(printf, 2, 3), noreturn));

/* Allocation that dies on failure: only for the CLI, never in the libraries. */
void *dnt_xmalloc(size_t n);
void *dnt_xrealloc(void *p, size_t n);
char *dnt_xstrdup(const char *s);

/* Writes s as a JSON string literal (with quotes) to fp. */
void dnt_json_string(FILE *fp, const char *s);

/* Prints a command's usage array: synopsis, summary, then the option lines. */
void dnt_print_usage(FILE *fp, const char *const *usage);

/* Parses a positive pid; -1 if s is not one. */
int dnt_parse_pid(const char *s);
/* The same for a -p value: prints "'X' is not a process id" when it is not one. */
int dnt_opt_pid(const char *arg);

/* A --duration value: dd:hh:mm:ss, hh:mm:ss, or a number with s, m or h (30s, 1.5m); in ms,
 * 0 when s is none of these. */
uint64_t dnt_parse_duration(const char *s);
/* A count for option opt ("-n", "--top"): 1..max, whole string. 0, or -1 with the error printed. */
int dnt_parse_count(const char *opt, const char *arg, long max, long *out);

/* Builds a getopt_long short-option string from a long-option table (":" first, so a missing
 * argument is reported apart from an unknown option). out must hold 3 * count + 2 bytes. */
void dnt_shortopts(const struct option *opts, char *out, size_t cap);

/* Reports a getopt error for the command `cmd` and returns DNT_EXIT_USAGE. */
int dnt_usage_error(const char *cmd, int opt, int optopt, char **argv);

/* fflush + ferror on stdout, so `dntrace ... > /dev/full` fails loudly. 0 or an exit code. */
int dnt_finish_stdout(void);

#endif
