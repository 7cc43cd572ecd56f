/* A process's threads as /proc shows them (dsipc.h "Discovery"): their ids in the process's own
 * PID namespace (what its runtime's events carry) and the names the kernel keeps for them. */
#include <ctype.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dsipc-int.h"

const char *dsipc_thread_comm(int pid, unsigned long long tid, char *buf, size_t cap) {
  char path[96];
  snprintf(path, sizeof path, "/proc/%d/task/%llu/comm", pid, tid);
  buf[0] = '\0';
  FILE *fp = fopen(path, "re");
  if (!fp) return buf;
  if (!fgets(buf, (int)cap, fp)) buf[0] = '\0';
  fclose(fp);
  buf[strcspn(buf, "\n")] = '\0';
  return buf;
}

/* The thread's id inside the process's own PID namespace: the last NSpid value of
 * /proc/PID/task/TID/status (a kernel without it: the id as is). */
static unsigned long long ns_tid(int pid, const char *task) {
  char path[320], line[256];
  snprintf(path, sizeof path, "/proc/%d/task/%s/status", pid, task);
  FILE *fp = fopen(path, "re");
  unsigned long long id = strtoull(task, NULL, 10);
  if (!fp) return id;
  while (fgets(line, sizeof line, fp)) {
    if (strncmp(line, "NSpid:", 6) != 0) continue;
    char *w = line + 6, *end;
    for (;;) {
      unsigned long long v = strtoull(w, &end, 10);
      if (end == w) break;
      id = v;
      w = end;
    }
    break;
  }
  fclose(fp);
  return id;
}

int dsipc_process_threads(int pid, void (*fn)(void *ud, unsigned long long tid, const char *name), void *ud) {
  char path[64];
  snprintf(path, sizeof path, "/proc/%d/task", pid);
  DIR *d = opendir(path);
  if (!d) return -1;
  struct dirent *e;
  while ((e = readdir(d))) {
    if (!isdigit((unsigned char)e->d_name[0])) continue;
    char name[64];
    dsipc_thread_comm(pid, strtoull(e->d_name, NULL, 10), name, sizeof name);
    fn(ud, ns_tid(pid, e->d_name), name);
  }
  closedir(d);
  return 0;
}
