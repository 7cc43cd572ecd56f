#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "builtin.h"
#include "dnt-trace.h"
#include "target.h"
#include "util.h"

/* /proc/PID/cmdline, NUL-separated; returns its length or -1. */
static ssize_t read_cmdline(int pid, char *buf, size_t cap) {
  char path[64];
  snprintf(path, sizeof path, "/proc/%d/cmdline", pid);
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -1;
  size_t len = 0;
  ssize_t n;
  while (len + 1 < cap && (n = read(fd, buf + len, cap - 1 - len)) > 0) len += (size_t)n;
  close(fd);
  buf[len] = '\0';
  return (ssize_t)len;
}

static const char *base_name(const char *path) {
  const char *slash = strrchr(path, '/');
  return slash ? slash + 1 : path;
}

/* The name as the process chose it (its argv[0], which it may rewrite; its comm). */
static void raw_process_name(int pid, char *buf, size_t cap) {
  char cmd[4096];
  ssize_t len = read_cmdline(pid, cmd, sizeof cmd);
  buf[0] = '\0';
  if (len > 0) {
    const char *argv0 = base_name(cmd);
    /* `dotnet [host options] app.dll`: the app is the first argument ending in .dll */
    if (strcmp(argv0, "dotnet") == 0) {
      for (const char *a = cmd + strlen(cmd) + 1; a < cmd + len; a += strlen(a) + 1) {
        size_t n = strlen(a);
        if (n > 4 && strcmp(a + n - 4, ".dll") == 0) {
          snprintf(buf, cap, "%.*s", (int)(strlen(base_name(a)) - 4), base_name(a));
          return;
        }
      }
    }
    snprintf(buf, cap, "%s", argv0);
    return;
  }
  char path[64];
  snprintf(path, sizeof path, "/proc/%d/comm", pid);
  FILE *fp = fopen(path, "re");
  if (fp) {
    if (fgets(buf, (int)cap, fp)) buf[strcspn(buf, "\n")] = '\0';
    fclose(fp);
  }
}

const char *dnt_process_name(int pid, char *buf, size_t cap) {
  char raw[4096];
  raw_process_name(pid, raw, sizeof raw);
  dnt_text_escape(buf, cap, raw); /* every message prints it: nothing in it may drive a terminal */
  return buf;
}

int dnt_process_stopped(int pid) {
  char state;
  return pid > 0 && dsipc_proc_stat(pid, &state, NULL) == 0 && state == 'T';
}

const char *dnt_process_cmdline(int pid, char *buf, size_t cap) {
  ssize_t len = read_cmdline(pid, buf, cap);
  if (len <= 0) {
    buf[0] = '\0';
    return buf;
  }
  while (len > 0 && buf[len - 1] == '\0') len--;
  for (ssize_t i = 0; i < len; i++)
    if (buf[i] == '\0') buf[i] = ' ';
  return buf;
}

struct name_search {
  const char *name;
  int matches[8];
  int count;
};

static int match_name(const dsipc_endpoint *ep, void *ud) {
  struct name_search *s = ud;
  char name[256], comm[64];
  dnt_process_name(ep->host_pid, name, sizeof name);
  /* comm is what `ps`/top show and what dotnet-trace's -n compares */
  char path[64];
  snprintf(path, sizeof path, "/proc/%d/comm", ep->host_pid);
  comm[0] = '\0';
  FILE *fp = fopen(path, "re");
  if (fp) {
    if (fgets(comm, sizeof comm, fp)) comm[strcspn(comm, "\n")] = '\0';
    fclose(fp);
  }
  if (strcmp(name, s->name) == 0 || strcmp(comm, s->name) == 0) {
    if (s->count < (int)(sizeof s->matches / sizeof s->matches[0])) s->matches[s->count] = ep->host_pid;
    s->count++;
  }
  return 0;
}

int dnt_target_find_by_name(const char *name) {
  struct name_search s = {.name = name};
  if (dsipc_endpoint_list(match_name, &s) < 0 || s.count != 1) return 0;
  return s.matches[0];
}

static int exit_for(int rc) {
  return rc == -EINVAL ? DNT_EXIT_USAGE : DNT_EXIT_NOTARGET;
}

int dnt_target_resolve(int pid, const char *name, struct dnt_target *t) {
  memset(t, 0, sizeof *t);
  if (name) {
    struct name_search s = {.name = name};
    int rc = dsipc_endpoint_list(match_name, &s);
    if (rc < 0) {
      dnt_error("cannot list processes: %s", strerror(-rc));
      return DNT_EXIT_FAILURE;
    }
    if (s.count == 0) {
      dnt_error("no .NET process named '%s' (see 'dntrace ps')", name);
      return DNT_EXIT_NOTARGET;
    }
    if (s.count > 1) {
      char list[256] = "";
      size_t n = 0;
      int shown = s.count < 8 ? s.count : 8;
      for (int i = 0; i < shown && n < sizeof list; i++)
        n += (size_t)snprintf(list + n, sizeof list - n, "%s%d", i ? ", " : "", s.matches[i]);
      dnt_error("%d processes are named '%s' (pids %s%s): choose one with -p", s.count, name, list,
                s.count > shown ? ", ..." : "");
      return DNT_EXIT_NOTARGET;
    }
    pid = s.matches[0];
  }
  int rc = dsipc_endpoint_find(pid, &t->ep);
  if (rc < 0) {
    dnt_error("%s", t->ep.errmsg);
    return exit_for(rc);
  }
  t->pid = pid;
  dnt_process_name(pid, t->name, sizeof t->name);
  return 0;
}

int dnt_target_from_port(const char *spec, struct dnt_target *t) {
  memset(t, 0, sizeof *t);
  char path[sizeof t->ep.path];
  snprintf(path, sizeof path, "%s", spec);
  char *comma = strrchr(path, ',');
  if (comma) {
    if (strcmp(comma + 1, "connect") != 0) {
      dnt_error("--diagnostic-port: '%s' is not 'connect'%s", comma + 1,
                strcmp(comma + 1, "listen") == 0 ? " (listen is for 'dntrace collect')" : "");
      return DNT_EXIT_USAGE;
    }
    *comma = '\0';
  }
  dsipc_process_info pi;
  dsipc_status st;
  if (dsipc_process_info_get(path, 5000, &pi, &st) != 0) {
    dnt_error("%s", st.msg);
    return DNT_EXIT_NOTARGET;
  }
  t->pid = (int)pi.process_id;
  dsipc_process_info_release(&pi);
  snprintf(t->ep.path, sizeof t->ep.path, "%s", path);
  const char *slash = strrchr(path, '/');
  snprintf(t->name, sizeof t->name, "%.200s", slash ? slash + 1 : path);
  return 0;
}

