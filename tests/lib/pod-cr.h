/* pod-cr.h: a command that visits every .NET process it can see (serve --all, watch --all) run
 * in a pod: a PID namespace of its own (unshare, its /proc mounted anew) where it sees only the
 * test's two samples, never the processes of the tests running beside (which its sessions would
 * disturb: a session at a process's start can meet the runtime's own startup hazards). The pod
 * is a shell told what to do on its stdin ("restart-b", "kill-PID": SIGKILL, "stop"), answering
 * a line each: "up PID" once a sample's diagnostic socket is there, "started PID" once the command
 * runs, "ended STATUS"; the pids are the pod's, as the command sees them. The command's output goes to fd 3. It all dies with the
 * test (unshare --kill-child, and the parent's death signal). */
#ifndef DNT_TEST_POD_CR_H
#define DNT_TEST_POD_CR_H

#include <criterion/criterion.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "loopback.h"
#include "run.h"

static const char pod_script[] =
    "exe_a=$1 exe_b=$2; shift 2; tmp=${TMPDIR:-/tmp}\n"
    "up() {\n"
    "  \"$1\" </dev/null >/dev/null 2>&1 &\n"
    "  p=$!; key=$(cut -d' ' -f22 /proc/$p/stat)\n"
    "  while [ ! -S \"$tmp/dotnet-diagnostic-$p-$key-socket\" ]; do\n"
    "    kill -0 $p 2>/dev/null || { echo \"died $p\"; exit 1; }\n"
    "    sleep 0.05\n"
    "  done\n"
    "  echo \"up $p\"\n"
    "}\n"
    "up \"$exe_a\"; a=$p; up \"$exe_b\"; b=$p\n"
    "\"$@\" </dev/null >&3 2>&3 &\n"
    "s=$!; echo \"started $s\"\n"
    "while read -r cmd; do\n"
    "  case $cmd in\n"
    "  restart-b) kill $b; wait $b; up \"$exe_b\"; b=$p;;\n"
    "  kill-*) kill -9 ${cmd#kill-};;\n"
    "  stop) kill -INT $s; wait $s; echo \"ended $?\"; kill $a $b; wait; exit 0;;\n"
    "  esac\n"
    "done\n";

struct pod {
  pid_t pid;      /* unshare's */
  int in, out;    /* its stdin, its stdout */
  char buf[4096]; /* what it said and was not heard yet */
  char last[256]; /* the last line heard */
};

/* Starts the pod: samples exe_a and exe_b (tail[0], tail[1]), then the command (tail[2]...), its
 * output to log. */
static inline void pod_start(struct pod *p, int log, char *const tail[]) {
  int in[2], out[2];
  cr_assert_eq(pipe2(in, O_CLOEXEC), 0);
  cr_assert_eq(pipe2(out, O_CLOEXEC), 0);
  const char *argv[64];
  int n = 0;
  argv[n++] = "unshare";
  if (geteuid() != 0) argv[n++] = "--user", argv[n++] = "--map-root-user";
  argv[n++] = "--pid", argv[n++] = "--fork", argv[n++] = "--mount-proc", argv[n++] = "--kill-child";
  argv[n++] = "--", argv[n++] = "/bin/sh", argv[n++] = "-c", argv[n++] = pod_script, argv[n++] = "pod";
  for (char *const *t = tail; *t && n < 63; t++) argv[n++] = *t;
  argv[n] = NULL;
  memset(p, 0, sizeof *p);
  p->pid = fork();
  cr_assert_geq(p->pid, 0);
  if (p->pid == 0) {
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    dup2(in[0], 0);
    dup2(out[1], 1);
    dup2(log, 2);
    dup2(log, 3);
    execvp(argv[0], (char *const *)argv);
    _exit(127);
  }
  close(in[0]);
  close(out[1]);
  p->in = in[1];
  p->out = out[0];
}

static inline void pod_say(struct pod *p, const char *cmd) {
  size_t n = strlen(cmd);
  cr_assert(write(p->in, cmd, n) == (ssize_t)n && write(p->in, "\n", 1) == 1, "the pod takes '%s'", cmd);
}

/* The next line the pod says, when it is "WORD N": N; -1 when it says anything else, or nothing
 * (DNT_HANG_MS at most). The line is kept in p->last. */
static inline int pod_hear(struct pod *p, const char *word) {
  double end = dnt_now_ms() + DNT_HANG_MS; /* timing: a hang's ceiling */
  for (;;) {
    char *nl = strchr(p->buf, '\n');
    if (nl) {
      *nl = '\0';
      snprintf(p->last, sizeof p->last, "%.255s", p->buf);
      memmove(p->buf, nl + 1, strlen(nl + 1) + 1);
      char w[32];
      int v;
      return sscanf(p->last, "%31s %d", w, &v) == 2 && strcmp(w, word) == 0 ? v : -1;
    }
    double left = end - dnt_now_ms(); /* timing: a hang's ceiling */
    struct pollfd pf = {.fd = p->out, .events = POLLIN};
    size_t len = strlen(p->buf);
    ssize_t got;
    if (left <= 0 || poll(&pf, 1, (int)left) <= 0 || len + 1 >= sizeof p->buf ||
        (got = read(p->out, p->buf + len, sizeof p->buf - 1 - len)) <= 0) {
      snprintf(p->last, sizeof p->last, "(nothing, waiting for '%s')", word);
      return -1;
    }
    p->buf[len + (size_t)got] = '\0';
  }
}

/* Ends the pod (its processes die with it) and reaps it. */
static inline void pod_end(struct pod *p) {
  close(p->in);
  close(p->out);
  int status;
  for (double end = dnt_now_ms() + DNT_HANG_MS; dnt_now_ms() < end; usleep(50 * 1000)) /* timing: a hang's ceiling */
    if (waitpid(p->pid, &status, WNOHANG) == p->pid) return;
  kill(p->pid, SIGKILL);
  waitpid(p->pid, &status, 0);
}

#endif
