/* Discovery: where does a .NET process keep its diagnostic socket?
 *
 * The runtime creates `dotnet-diagnostic-<pid>-<key>-socket` in its own $TMPDIR (default /tmp),
 * where <pid> is its pid inside its own PID namespace and <key> is its start time in clock ticks
 * since boot (field 22 of /proc/<pid>/stat). A container's /tmp is usually not ours, so when the
 * target lives in another mount namespace we look through /proc/<pid>/root, which the kernel
 * resolves in the target's mount namespace: no shared /tmp is needed from a sidecar or the host.
 *
 * Everything here is read from /proc of the host pid; nothing is taken from the socket name
 * without checking it against the process it claims to belong to.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "dsipc.h"

#define SOCKET_PREFIX "dotnet-diagnostic-"
#define PROC_FILE_MAX (1u << 20) /* environ and status are small; a bound keeps a hostile one cheap */

struct proc_facts {
  int ns_pid;
  unsigned euid, egid;
  unsigned long long starttime;
  int same_mntns;
  char tmpdir[1024];
  int environ_readable;
  int diagnostics_disabled; /* DOTNET_EnableDiagnostics=0 or its IPC/COMPlus spellings */
  int exited;               /* State: Z (zombie) or X (dead): it has exited, not been reaped */
  int ppid;
};

static void set_err(dsipc_endpoint *ep, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#include <stdarg.h>
static void set_err(dsipc_endpoint *ep, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(ep->errmsg, sizeof ep->errmsg, fmt, ap);
  va_end(ap);
}

/* What to do about a permission error on a process's files (/proc/PID/root): the kernel lets in
 * a process with the same uid and gid (and no fewer capabilities), or one with CAP_SYS_PTRACE.
 * Root is never told to run as root: a container's root lacks SYS_PTRACE by default. The fixes
 * are given in the words of the places users set them (podman/docker, Kubernetes). */
static const char *perm_hint(const struct proc_facts *f, char *buf, size_t cap) {
  if (f->euid == (unsigned)geteuid() && f->egid == (unsigned)getegid()) {
    snprintf(buf, cap, "it runs as %u:%u too, so it belongs to an outer user namespace, is not dumpable, or a "
             "security module refuses it (CAP_SYS_PTRACE over it would let dntrace in)", f->euid, f->egid);
    return buf;
  }
  if (geteuid() != 0) {
    snprintf(buf, cap, "it runs as %u:%u; run dntrace as that user (in a container: --user %u:%u, Kubernetes "
             "runAsUser and runAsGroup), or as root (or with CAP_SYS_PTRACE)", f->euid, f->egid, f->euid, f->egid);
    return buf;
  }
  snprintf(buf, cap, "it runs as %u:%u, dntrace as %u:%u without CAP_SYS_PTRACE; run dntrace as %u:%u (--user "
           "%u:%u, Kubernetes runAsUser and runAsGroup) or add SYS_PTRACE (--cap-add SYS_PTRACE)",
           f->euid, f->egid, (unsigned)geteuid(), (unsigned)getegid(), f->euid, f->egid, f->euid, f->egid);
  return buf;
}

/* Reads a whole /proc file (they report size 0, so read until EOF). Returns bytes or -errno;
 * the result is NUL-terminated and truncated at cap-1 bytes. */
static ssize_t read_proc_file(const char *path, char *buf, size_t cap) {
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -errno;
  size_t len = 0;
  while (len + 1 < cap) {
    ssize_t n = read(fd, buf + len, cap - 1 - len);
    if (n < 0) {
      if (errno == EINTR) continue;
      int e = errno;
      close(fd);
      return -e;
    }
    if (n == 0) break;
    len += (size_t)n;
  }
  close(fd);
  buf[len] = '\0';
  return (ssize_t)len;
}

/* The last NSpid value is the pid in the innermost namespace, the one the runtime uses. */
static int parse_status(const char *status, struct proc_facts *f, int host_pid) {
  f->ns_pid = host_pid;
  int have_uid = 0;
  for (const char *line = status; line && *line;) {
    const char *nl = strchr(line, '\n');
    if (strncmp(line, "NSpid:", 6) == 0) {
      const char *p = line + 6;
      char *end;
      for (;;) {
        long v = strtol(p, &end, 10);
        if (end == p) break;
        if (v > 0) f->ns_pid = (int)v;
        p = end;
      }
    } else if (strncmp(line, "State:", 6) == 0) {
      const char *p = line + 6;
      while (*p == ' ' || *p == '\t') p++;
      f->exited = *p == 'Z' || *p == 'X';
    } else if (strncmp(line, "PPid:", 5) == 0) {
      f->ppid = atoi(line + 5);
    } else if (strncmp(line, "Gid:", 4) == 0) {
      unsigned r, e;
      if (sscanf(line + 4, "%u %u", &r, &e) == 2) f->egid = e;
    } else if (strncmp(line, "Uid:", 4) == 0) {
      unsigned r, e;
      if (sscanf(line + 4, "%u %u", &r, &e) == 2) {
        f->euid = e;
        have_uid = 1;
      }
    }
    line = nl ? nl + 1 : NULL;
  }
  return have_uid ? 0 : -EINVAL;
}

/* Field 22 (starttime) comes after the parenthesised command name, which may hold spaces. */
static int parse_starttime(const char *stat, unsigned long long *out) {
  const char *p = strrchr(stat, ')');
  if (!p) return -EINVAL;
  p++;
  for (int field = 3; field < 22; field++) {
    p = strchr(p + 1, ' ');
    if (!p) return -EINVAL;
  }
  char *end;
  unsigned long long v = strtoull(p + 1, &end, 10);
  if (end == p + 1) return -EINVAL;
  *out = v;
  return 0;
}

int dsipc_proc_stat(int host_pid, char *state, unsigned long long *starttime) {
  char path[64], stat[4096];
  snprintf(path, sizeof path, "/proc/%d/stat", host_pid);
  ssize_t n = read_proc_file(path, stat, sizeof stat);
  if (n < 0) return n == -ENOENT ? -ESRCH : (int)n;
  const char *paren = strrchr(stat, ')'); /* the command name before it may hold anything */
  unsigned long long start;
  if (!paren || paren[1] != ' ' || !paren[2] || parse_starttime(stat, &start) < 0) return -ESRCH;
  if (state) *state = paren[2];
  if (starttime) *starttime = start;
  return 0;
}

static void parse_environ(const char *env, size_t len, struct proc_facts *f) {
  for (size_t i = 0; i < len;) {
    const char *var = env + i;
    size_t n = strnlen(var, len - i);
    if (strncmp(var, "TMPDIR=", 7) == 0 && n > 7 && n - 7 < sizeof f->tmpdir)
      memcpy(f->tmpdir, var + 7, n - 7 + 1);
    else if (strcmp(var, "DOTNET_EnableDiagnostics=0") == 0 ||
             strcmp(var, "COMPlus_EnableDiagnostics=0") == 0 ||
             strcmp(var, "DOTNET_EnableDiagnostics_IPC=0") == 0)
      f->diagnostics_disabled = 1;
    i += n + 1;
  }
}

static int same_namespace(int host_pid, const char *ns) {
  char mine[64], theirs[64], path[64];
  snprintf(path, sizeof path, "/proc/self/ns/%s", ns);
  ssize_t a = readlink(path, mine, sizeof mine - 1);
  snprintf(path, sizeof path, "/proc/%d/ns/%s", host_pid, ns);
  ssize_t b = readlink(path, theirs, sizeof theirs - 1);
  if (a < 0 || b < 0) return -1;
  return a == b && memcmp(mine, theirs, (size_t)a) == 0;
}

/* Gathers what discovery needs from /proc; env is scratch space for /proc/PID/environ. -ESRCH: no such process; -EACCES: not ours to see. */
static int read_facts(int host_pid, struct proc_facts *f, char *env, size_t env_cap) {
  char path[64];
  char small[4096];
  memset(f, 0, sizeof *f);
  strcpy(f->tmpdir, "/tmp");

  snprintf(path, sizeof path, "/proc/%d/status", host_pid);
  ssize_t n = read_proc_file(path, small, sizeof small);
  if (n < 0) return n == -ENOENT ? -ESRCH : (int)n;
  if (parse_status(small, f, host_pid) < 0) return -ESRCH;

  snprintf(path, sizeof path, "/proc/%d/stat", host_pid);
  n = read_proc_file(path, small, sizeof small);
  if (n < 0) return n == -ENOENT ? -ESRCH : (int)n;
  if (parse_starttime(small, &f->starttime) < 0) return -ESRCH;

  snprintf(path, sizeof path, "/proc/%d/environ", host_pid);
  n = read_proc_file(path, env, env_cap);
  if (n >= 0) {
    f->environ_readable = 1;
    parse_environ(env, (size_t)n, f);
  }
  if (f->tmpdir[0] != '/') strcpy(f->tmpdir, "/tmp"); /* the runtime ignores a relative TMPDIR too */

  f->same_mntns = same_namespace(host_pid, "mnt") == 1;
  return 0;
}

/* The directory where the target's sockets are, as reachable from here. In another mount
 * namespace its TMPDIR is first spelt out inside its root (dsipc_resolve_in_root): through
 * /proc/PID/root an absolute symlink on the way would be followed in *our* tree, so a container
 * whose /tmp links to /var/tmp would send us to the host's /var/tmp, to another runtime's socket
 * of the same pid number. -errno when the TMPDIR is no directory inside the root. */
static int socket_dir(int host_pid, const struct proc_facts *f, char *dir, size_t cap) {
  if (f->same_mntns) {
    int n = snprintf(dir, cap, "%s", f->tmpdir);
    return n < 0 || (size_t)n >= cap ? -ENAMETOOLONG : 0;
  }
  char root[64], inside[sizeof f->tmpdir];
  snprintf(root, sizeof root, "/proc/%d/root", host_pid);
  int rfd = open(root, O_PATH | O_DIRECTORY | O_CLOEXEC);
  if (rfd < 0) return -errno;
  int rc = dsipc_resolve_in_root(rfd, f->tmpdir, inside, sizeof inside);
  close(rfd);
  if (rc < 0) return rc;
  int n = snprintf(dir, cap, "%s%s", root, strcmp(inside, "/") == 0 ? "" : inside);
  return n < 0 || (size_t)n >= cap ? -ENAMETOOLONG : 0;
}

/* Parses `dotnet-diagnostic-<pid>-<key>-socket`; 0 when it matches. */
static int parse_socket_name(const char *name, int *pid, unsigned long long *key) {
  if (strncmp(name, SOCKET_PREFIX, sizeof SOCKET_PREFIX - 1) != 0) return -1;
  const char *p = name + sizeof SOCKET_PREFIX - 1;
  char *end;
  if (*p < '0' || *p > '9') return -1;
  long v = strtol(p, &end, 10);
  if (*end != '-' || v <= 0 || v > 0x7fffffff) return -1;
  p = end + 1;
  if (*p < '0' || *p > '9') return -1;
  unsigned long long k = strtoull(p, &end, 10);
  if (strcmp(end, "-socket") != 0) return -1;
  *pid = (int)v;
  *key = k;
  return 0;
}

/* A leftover socket of a dead process answers connect() with ECONNREFUSED. */
static int socket_is_live(const char *path) {
  if (strlen(path) >= sizeof(((struct sockaddr_un *)0)->sun_path)) return 1; /* can't tell here */
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return 1;
  struct sockaddr_un sa = {.sun_family = AF_UNIX};
  strcpy(sa.sun_path, path);
  int live = connect(fd, (struct sockaddr *)&sa, sizeof sa) == 0 || errno != ECONNREFUSED;
  close(fd);
  return live;
}

/* Checks one candidate: a socket, owned by the target's user. */
static int check_candidate(dsipc_endpoint *ep, const struct proc_facts *f, const char *path) {
  struct stat st;
  if (lstat(path, &st) < 0) {
    int e = errno;
    if (e == EACCES || e == EPERM) {
      char hint[256];
      set_err(ep, "permission denied looking at '%s' (a socket of process %d): %s", path, ep->host_pid,
              perm_hint(f, hint, sizeof hint));
      return -EACCES;
    }
    return -ENOENT;
  }
  if (!S_ISSOCK(st.st_mode)) return -ENOENT;
  if (st.st_uid != f->euid) {
    set_err(ep, "refusing '%s': it belongs to uid %u but process %d runs as uid %u (a planted socket?)",
            path, (unsigned)st.st_uid, ep->host_pid, f->euid);
    return DSIPC_EUNSAFE;
  }
  return 0;
}

/* Fills ep with the right socket in dir. The socket whose key equals the process start time is
 * exact; otherwise (time namespaces, clock changes) the newest live socket for the pid wins. */
static int find_in_dir(dsipc_endpoint *ep, const struct proc_facts *f, const char *dir) {
  char path[sizeof ep->path];
  int n = snprintf(path, sizeof path, "%s/" SOCKET_PREFIX "%d-%llu-socket", dir, f->ns_pid, f->starttime);
  if (n > 0 && (size_t)n < sizeof path) {
    int rc = check_candidate(ep, f, path);
    if (rc == 0) {
      memcpy(ep->path, path, (size_t)n + 1);
      ep->key = f->starttime;
      return 0;
    }
    if (rc != -ENOENT) return rc;
  }

  DIR *d = opendir(dir);
  if (!d) {
    int e = errno;
    if (e == EACCES || e == EPERM) {
      char hint[256];
      set_err(ep, "permission denied reading '%s' (the socket directory of process %d): %s", dir,
              ep->host_pid, perm_hint(f, hint, sizeof hint));
      return -EACCES;
    }
    set_err(ep, "cannot read '%s': %s", dir, strerror(e));
    return DSIPC_ENOTFOUND;
  }
  unsigned long long best_key = 0;
  int found = 0, last_rc = DSIPC_ENOTFOUND;
  struct dirent *de;
  while ((de = readdir(d)) != NULL) {
    int pid;
    unsigned long long key;
    if (parse_socket_name(de->d_name, &pid, &key) != 0 || pid != f->ns_pid) continue;
    if (found && key <= best_key) continue;
    n = snprintf(path, sizeof path, "%s/%s", dir, de->d_name);
    if (n < 0 || (size_t)n >= sizeof path) continue;
    int rc = check_candidate(ep, f, path);
    if (rc != 0) {
      /* a key older than the process is an earlier process's leftover (its pid reused, the
       * runtime killed before it removed its socket): passed over, never this one's error */
      if (rc != -ENOENT && key >= f->starttime) last_rc = rc;
      continue;
    }
    if (!socket_is_live(path)) continue;
    memcpy(ep->path, path, (size_t)n + 1);
    best_key = key;
    found = 1;
  }
  closedir(d);
  if (found) {
    ep->key = best_key;
    ep->errmsg[0] = '\0';
    return 0;
  }
  return last_rc;
}

/* Is libcoreclr (or the Mono/NativeAOT runtime) mapped? Used only to word the error. */
static int looks_like_dotnet(int host_pid) {
  char path[64];
  snprintf(path, sizeof path, "/proc/%d/maps", host_pid);
  FILE *fp = fopen(path, "re");
  if (!fp) return -1;
  char line[1024];
  int hit = 0;
  while (!hit && fgets(line, sizeof line, fp))
    hit = strstr(line, "libcoreclr.so") != NULL || strstr(line, "libmonosgen") != NULL;
  fclose(fp);
  return hit;
}

int dsipc_mapped_runtime_version(int host_pid, char *out, size_t cap) {
  static const char dir[] = "/Microsoft.NETCore.App/", lib[] = "/libcoreclr.so";
  char path[64];
  snprintf(path, sizeof path, "/proc/%d/maps", host_pid);
  FILE *fp = fopen(path, "re");
  if (!fp) return -errno;
  char line[4096];
  int rc = -ENOENT;
  while (rc == -ENOENT && fgets(line, sizeof line, fp)) {
    line[strcspn(line, "\n")] = '\0';
    size_t n = strlen(line);
    if (n < sizeof lib || strcmp(line + n - (sizeof lib - 1), lib) != 0) continue;
    line[n - (sizeof lib - 1)] = '\0'; /* ".../Microsoft.NETCore.App/VERSION" */
    char *slash = strrchr(line, '/');
    if (!slash || slash - line < (ptrdiff_t)(sizeof dir - 2) ||
        memcmp(slash - (sizeof dir - 2), dir, sizeof dir - 2) != 0 || !slash[1] || strlen(slash + 1) >= cap)
      continue;
    memcpy(out, slash + 1, strlen(slash + 1) + 1);
    rc = 0;
  }
  fclose(fp);
  return rc;
}

static void read_comm(int host_pid, char *out, size_t cap) {
  char path[64];
  snprintf(path, sizeof path, "/proc/%d/comm", host_pid);
  if (read_proc_file(path, out, cap) <= 0) {
    snprintf(out, cap, "?");
    return;
  }
  out[strcspn(out, "\n")] = '\0';
}

int dsipc_endpoint_find(int host_pid, dsipc_endpoint *out) {
  struct proc_facts f;
  char dir[sizeof out->path];
  memset(out, 0, sizeof *out);
  out->host_pid = host_pid;
  if (host_pid <= 0) {
    set_err(out, "invalid process id %d", host_pid);
    return -EINVAL;
  }
  char *env = malloc(PROC_FILE_MAX);
  if (!env) {
    set_err(out, "out of memory");
    return DSIPC_ENOMEM;
  }
  int rc = read_facts(host_pid, &f, env, PROC_FILE_MAX);
  free(env);
  if (rc == -ESRCH) {
    set_err(out, "no such process: %d", host_pid);
    return rc;
  }
  if (rc < 0) {
    set_err(out, "cannot read /proc/%d: %s", host_pid, strerror(-rc));
    return rc;
  }
  out->ns_pid = f.ns_pid;
  if (f.exited) {
    char comm[64];
    read_comm(host_pid, comm, sizeof comm);
    set_err(out, "process %d (%s) has exited: it is a zombie that its parent (pid %d) has not reaped yet",
            host_pid, comm, f.ppid);
    return -ESRCH;
  }
  rc = socket_dir(host_pid, &f, dir, sizeof dir);
  if (rc == -ENAMETOOLONG) {
    set_err(out, "the TMPDIR of process %d is too long", host_pid);
    return rc;
  }
  if (rc == -EACCES || rc == -EPERM) {
    char hint[256];
    set_err(out, "permission denied looking into process %d's files: %s", host_pid, perm_hint(&f, hint, sizeof hint));
    return -EACCES;
  }
  if (rc == 0) {
    rc = find_in_dir(out, &f, dir);
    if (rc != DSIPC_ENOTFOUND) return rc;
  } else { /* its TMPDIR is no directory inside its root: no socket there, worded as below */
    snprintf(dir, sizeof dir, "/proc/%d/root%s", host_pid, f.tmpdir);
  }

  char comm[64];
  read_comm(host_pid, comm, sizeof comm);
  if (!f.environ_readable && getuid() != 0 && geteuid() != f.euid) {
    set_err(out, "permission denied: process %d (%s) belongs to uid %u; run as that user or as root "
            "(or with CAP_SYS_PTRACE)", host_pid, comm, f.euid);
    return -EACCES;
  }
  int dotnet = looks_like_dotnet(host_pid);
  if (f.diagnostics_disabled)
    set_err(out, "process %d (%s) has diagnostics disabled (DOTNET_EnableDiagnostics=0)", host_pid, comm);
  else if (dotnet == 0)
    set_err(out, "process %d (%s) is not a .NET process (no diagnostic socket in '%s')", host_pid, comm, dir);
  else
    set_err(out, "process %d (%s) has no diagnostic socket in '%s' (still starting up?)", host_pid, comm, dir);
  return DSIPC_ENOTFOUND;
}

/* One cheap stat per process: the exact socket name is known from /proc, so no directory is
 * listed, which keeps `dntrace ps` fast however many processes the machine runs. */
static int list(int (*cb)(const dsipc_endpoint *ep, void *ud), void *ud, int denied_too) {
  DIR *proc = opendir("/proc");
  if (!proc) return -errno;
  dsipc_endpoint *ep = malloc(sizeof *ep);
  char *env = malloc(PROC_FILE_MAX);
  if (!ep || !env) {
    free(ep);
    free(env);
    closedir(proc);
    return DSIPC_ENOMEM;
  }
  int rc = 0;
  int self = getpid();
  struct dirent *de;
  while ((de = readdir(proc)) != NULL) {
    if (de->d_name[0] < '1' || de->d_name[0] > '9') continue;
    char *end;
    long pid = strtol(de->d_name, &end, 10);
    if (*end || pid == self) continue;
    struct proc_facts f;
    if (read_facts((int)pid, &f, env, PROC_FILE_MAX) < 0) continue;
    memset(ep, 0, sizeof *ep);
    ep->host_pid = (int)pid;
    ep->ns_pid = f.ns_pid;
    char dir[sizeof ep->path];
    int drc = socket_dir((int)pid, &f, dir, sizeof dir);
    if ((drc == -EACCES || drc == -EPERM) && denied_too) {
      char hint[256], comm[64];
      read_comm((int)pid, comm, sizeof comm);
      set_err(ep, "cannot look into process %ld (%s): %s", pid, comm, perm_hint(&f, hint, sizeof hint));
      ep->key = f.starttime; /* what its socket's name would carry */
      if (cb(ep, ud)) break;
      continue;
    }
    if (drc < 0) continue;
    int n = snprintf(ep->path, sizeof ep->path, "%s/" SOCKET_PREFIX "%d-%llu-socket", dir, f.ns_pid,
                     f.starttime);
    if (n < 0 || (size_t)n >= sizeof ep->path) continue;
    if (check_candidate(ep, &f, ep->path) != 0) continue;
    ep->key = f.starttime;
    ep->errmsg[0] = '\0';
    if (cb(ep, ud)) break;
  }
  free(ep);
  free(env);
  closedir(proc);
  return rc;
}

int dsipc_endpoint_list(int (*cb)(const dsipc_endpoint *ep, void *ud), void *ud) { return list(cb, ud, 0); }

int dsipc_endpoint_list_all(int (*cb)(const dsipc_endpoint *ep, void *ud), void *ud) { return list(cb, ud, 1); }
