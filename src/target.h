/* Choosing the process a command talks to: -p PID or -n NAME, resolved to a diagnostic socket. */
#ifndef DNT_TARGET_H
#define DNT_TARGET_H

#include "dsipc.h"

struct dnt_target {
  int pid;              /* host pid */
  char name[256];       /* process name as `ps` shows it */
  dsipc_endpoint ep;    /* where its diagnostic socket is */
};

/* Fills t from a pid (>0) or a name (non-NULL). Prints one clear error line and returns an exit
 * code (DNT_EXIT_NOTARGET, DNT_EXIT_USAGE) on failure, 0 on success. t: caller-owned. */
int dnt_target_resolve(int pid, const char *name, struct dnt_target *t);

/* --diagnostic-port PATH[,connect]: a runtime's socket named directly (a dsrouter, a socket
 * bind-mounted out of a container). Asks the runtime for its pid; the socket's file name stands in
 * for the process name, as in dotnet-trace. Prints one error line and returns an exit code on
 * failure, 0 on success. t: caller-owned. */
int dnt_target_from_port(const char *spec, struct dnt_target *t);

/* The pid of the one .NET process named name, silently: 0 when there is none or several. */
int dnt_target_find_by_name(const char *name);

/* The name shown for a process: the entry assembly for `dotnet app.dll`, else the executable's
 * base name (not truncated like /proc/PID/comm), escaped by dnt_text_escape's rules (a process
 * writes its own argv[0]). Writes into buf (caller-owned) and returns it. */
const char *dnt_process_name(int pid, char *buf, size_t cap);

/* Whether the process is stopped by a signal (SIGSTOP, ^Z: state T): its runtime answers nothing
 * then. Not a tracing stop (t): createdump itself stops the process through ptrace while it reads
 * its memory. */
int dnt_process_stopped(int pid);

/* Reads /proc/PID/cmdline as one space-joined string into buf; "" if unreadable. */
const char *dnt_process_cmdline(int pid, char *buf, size_t cap);

#endif
