/* What a killed dntrace leaves behind, and the next run puts right (dnt-perf.h): a target's perf
 * map still on (the runtime goes on appending to /tmp/perf-PID.map for as long as it lives), and
 * perf's control directories. A run that turns a perf map on notes it in a small file of its
 * own; turning it off removes the note. A note whose writer is gone while its target still runs
 * (the same process: pid and start time) is a forgotten perf map. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "perf-int.h"

#define NOTE_PREFIX "perfmap-"

/* A process's start time (dsipc_proc_stat): with the pid it names one process, never a later one
 * that got the same pid. 0 when it is not there. */
static unsigned long long start_time(int pid) {
  unsigned long long t = 0;
  return dsipc_proc_stat(pid, NULL, &t) == 0 ? t : 0;
}

static int alive(int pid) { return pid > 0 && (kill(pid, 0) == 0 || errno == EPERM); }

/* The directory of the notes: $XDG_RUNTIME_DIR/dntrace, else $TMPDIR (or /tmp)/dntrace-UID; made
 * 0700, and used only when it is a real directory of ours (never through a planted link). */
static int notes_dir(char *out, size_t cap) {
  const char *xdg = getenv("XDG_RUNTIME_DIR"), *tmp = getenv("TMPDIR");
  if (xdg && *xdg)
    snprintf(out, cap, "%s/dntrace", xdg);
  else
    snprintf(out, cap, "%s/dntrace-%u", tmp && *tmp ? tmp : "/tmp", (unsigned)geteuid());
  if (mkdir(out, 0700) != 0 && errno != EEXIST) return -errno;
  struct stat st;
  if (lstat(out, &st) != 0) return -errno;
  if (!S_ISDIR(st.st_mode) || st.st_uid != geteuid() || (st.st_mode & 077)) return -EPERM;
  return 0;
}

void dnt__perfmap_note(const struct dnt_perfmap_run *m, int pid, const char *ep_path) {
  char dir[1024], path[1200], tmp[1300];
  if (notes_dir(dir, sizeof dir) != 0) return; /* best effort: only the cleanup of a killed run is lost */
  snprintf(path, sizeof path, "%s/" NOTE_PREFIX "%d-%d", dir, (int)getpid(), pid);
  snprintf(tmp, sizeof tmp, "%s.tmp", path);
  int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0) return;
  FILE *fp = fdopen(fd, "w");
  if (!fp) {
    close(fd);
    return;
  }
  /* owner pid, owner start, target pid, target start, whether the map existed; socket; map (in
   * the target's root, as long as it lives); then, when the target shares our root, the map's own
   * path and its owner, for once the target is gone */
  fprintf(fp, "%d %llu %d %llu %d\n%s\n%s\n", (int)getpid(), start_time((int)getpid()), pid, start_time(pid),
          m->existed, ep_path, m->path);
  char root[64];
  snprintf(root, sizeof root, "/proc/%d/root", pid);
  struct stat ours, theirs, proc;
  size_t skip = strlen(root);
  char pidir[32];
  snprintf(pidir, sizeof pidir, "/proc/%d", pid);
  if (stat("/", &ours) == 0 && stat(root, &theirs) == 0 && ours.st_dev == theirs.st_dev &&
      ours.st_ino == theirs.st_ino && stat(pidir, &proc) == 0 && strncmp(m->path, root, skip) == 0)
    fprintf(fp, "%u %s\n", (unsigned)proc.st_uid, m->path + skip);
  if (fclose(fp) != 0 || rename(tmp, path) != 0) unlink(tmp);
}

void dnt__perfmap_unnote(int pid) {
  char dir[1024], path[1200];
  if (notes_dir(dir, sizeof dir) != 0) return;
  snprintf(path, sizeof path, "%s/" NOTE_PREFIX "%d-%d", dir, (int)getpid(), pid);
  unlink(path);
}

static void say(char *report, size_t cap, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void say(char *report, size_t cap, const char *fmt, ...) {
  size_t len = strlen(report);
  if (len + 2 >= cap) return;
  if (len) report[len++] = '\n';
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(report + len, cap - len, fmt, ap);
  va_end(ap);
}

/* One note: its perf map turned off if its writer is gone and its target is the same process. */
static int restore(int dirfd, const char *name, char *report, size_t cap) {
  int fd = openat(dirfd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) return 0;
  FILE *fp = fdopen(fd, "r");
  if (!fp) {
    close(fd);
    return 0;
  }
  int owner = 0, pid = 0, existed = 0;
  unsigned long long owner_start = 0, target_start = 0;
  char sock[4300] = "", map[2300] = "", own[2300] = "";
  unsigned uid = 0;
  int ok = fscanf(fp, "%d %llu %d %llu %d\n", &owner, &owner_start, &pid, &target_start, &existed) == 5 &&
           fgets(sock, sizeof sock, fp) && fgets(map, sizeof map, fp);
  int has_own = ok && fscanf(fp, "%u ", &uid) == 1 && fgets(own, sizeof own, fp);
  fclose(fp);
  sock[strcspn(sock, "\n")] = '\0';
  map[strcspn(map, "\n")] = '\0';
  own[strcspn(own, "\n")] = '\0';
  if (ok && alive(owner) && start_time(owner) == owner_start) return 0; /* its writer still runs */
  int restored = 0;
  if (ok && alive(pid) && start_time(pid) == target_start) {
    dsipc_status st = {0};
    if (dsipc_perfmap_disable(sock, 5000, &st) == 0) {
      restored = 1;
      if (!existed) unlink(map); /* the file that run made the runtime write */
      say(report, cap, "turned the perf map of process %d off again (left on by dntrace %d, which was killed)", pid,
          owner);
    } else {
      say(report, cap, "cannot turn the perf map of process %d off: %s", pid, st.msg);
      return 0; /* the note stays for a later try */
    }
  } else if (has_own && !existed && own[0] == '/' && !alive(pid)) {
    /* the target is gone too: the file that run made it write would stay in /tmp for nobody. A
     * later process of that pid may have a map of its own (then it is alive: left alone); the
     * file must still be the target's (its user's, a plain file), not one planted since. */
    struct stat st;
    if (lstat(own, &st) == 0 && S_ISREG(st.st_mode) && st.st_uid == uid && unlink(own) == 0)
      say(report, cap, "removed %s, which process %d (gone since) wrote for dntrace %d, which was killed", own, pid,
          owner);
  }
  unlinkat(dirfd, name, 0);
  return restored;
}

int dnt_perfmap_restore_forgotten(char *report, size_t cap) {
  if (cap) report[0] = '\0';
  char dir[1024];
  if (notes_dir(dir, sizeof dir) != 0) return 0;
  DIR *d = opendir(dir);
  if (!d) return 0;
  int n = 0;
  struct dirent *e;
  while ((e = readdir(d)))
    if (strncmp(e->d_name, NOTE_PREFIX, sizeof NOTE_PREFIX - 1) == 0 && !strstr(e->d_name, ".tmp"))
      n += restore(dirfd(d), e->d_name, report, cap);
  closedir(d);
  return n;
}

int dnt_perf_remove_stale(const char *tmpdir) {
  const char *tmp = tmpdir ? tmpdir : getenv("TMPDIR");
  DIR *d = opendir(tmp && *tmp ? tmp : "/tmp");
  if (!d) return 0;
  int n = 0;
  struct dirent *e;
  while ((e = readdir(d))) {
    int pid = 0;
    if (sscanf(e->d_name, "dntrace-perf-%d-", &pid) != 1 || alive(pid)) continue;
    struct stat st;
    if (fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISDIR(st.st_mode) || st.st_uid != geteuid())
      continue;
    int sub = openat(dirfd(d), e->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (sub < 0) continue;
    unlinkat(sub, "ctl", 0);
    unlinkat(sub, "ack", 0);
    close(sub);
    if (unlinkat(dirfd(d), e->d_name, AT_REMOVEDIR) == 0) n++;
  }
  closedir(d);
  return n;
}
