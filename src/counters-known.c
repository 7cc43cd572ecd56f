/* `dntrace counters list`: the counters people look for first, with their units. Our own
 * summary of the runtime's and ASP.NET Core's documentation (Meters of .NET 8/9 and the older
 * EventCounters, which are still published). */
#include <stdio.h>
#include <string.h>

#include "builtin.h"

struct known {
  const char *provider, *kind, *name, *unit, *what;
};

static const struct known known[] = {
    {"System.Runtime", "Meter", "dotnet.process.cpu.time", "s", "CPU time used, by cpu.mode (user, system)"},
    {"System.Runtime", "Meter", "dotnet.process.cpu.count", "{cpu}", "processors available to the process"},
    {"System.Runtime", "Meter", "dotnet.process.memory.working_set", "By", "physical memory mapped to the process"},
    {"System.Runtime", "Meter", "dotnet.gc.collections", "{collection}", "garbage collections, by gc.heap.generation"},
    {"System.Runtime", "Meter", "dotnet.gc.heap.total_allocated", "By", "bytes allocated on the managed heap"},
    {"System.Runtime", "Meter", "dotnet.gc.last_collection.memory.committed_size", "By", "memory committed by the GC"},
    {"System.Runtime", "Meter", "dotnet.gc.last_collection.heap.size", "By", "heap size after the last GC, by generation"},
    {"System.Runtime", "Meter", "dotnet.gc.last_collection.heap.fragmentation.size", "By", "heap fragmentation, by generation"},
    {"System.Runtime", "Meter", "dotnet.gc.pause.time", "s", "time paused in GC"},
    {"System.Runtime", "Meter", "dotnet.jit.compiled_il.size", "By", "IL bytes compiled by the JIT"},
    {"System.Runtime", "Meter", "dotnet.jit.compiled_methods", "{method}", "methods compiled by the JIT"},
    {"System.Runtime", "Meter", "dotnet.jit.compilation.time", "s", "time spent in the JIT"},
    {"System.Runtime", "Meter", "dotnet.monitor.lock_contentions", "{contention}", "contended Monitor lock acquisitions"},
    {"System.Runtime", "Meter", "dotnet.thread_pool.thread.count", "{thread}", "thread-pool threads"},
    {"System.Runtime", "Meter", "dotnet.thread_pool.work_item.count", "{work_item}", "work items completed by the thread pool"},
    {"System.Runtime", "Meter", "dotnet.thread_pool.queue.length", "{work_item}", "work items waiting in the thread pool"},
    {"System.Runtime", "Meter", "dotnet.timer.count", "{timer}", "active timers"},
    {"System.Runtime", "Meter", "dotnet.assembly.count", "{assembly}", "assemblies loaded"},
    {"System.Runtime", "Meter", "dotnet.exceptions", "{exception}", "exceptions thrown, by error.type"},
    {"System.Runtime", "EventCounter", "cpu-usage", "%", "CPU usage"},
    {"System.Runtime", "EventCounter", "working-set", "MB", "working set"},
    {"System.Runtime", "EventCounter", "gc-heap-size", "MB", "GC heap size"},
    {"System.Runtime", "EventCounter", "gen-0-gc-count", "", "gen 0 collections per interval"},
    {"System.Runtime", "EventCounter", "gen-1-gc-count", "", "gen 1 collections per interval"},
    {"System.Runtime", "EventCounter", "gen-2-gc-count", "", "gen 2 collections per interval"},
    {"System.Runtime", "EventCounter", "threadpool-thread-count", "", "thread-pool threads"},
    {"System.Runtime", "EventCounter", "monitor-lock-contention-count", "", "lock contentions per interval"},
    {"System.Runtime", "EventCounter", "threadpool-queue-length", "", "thread-pool queue length"},
    {"System.Runtime", "EventCounter", "threadpool-completed-items-count", "", "work items completed per interval"},
    {"System.Runtime", "EventCounter", "alloc-rate", "B", "bytes allocated per interval"},
    {"System.Runtime", "EventCounter", "active-timer-count", "", "active timers"},
    {"System.Runtime", "EventCounter", "gc-fragmentation", "%", "GC heap fragmentation"},
    {"System.Runtime", "EventCounter", "gc-committed", "MB", "memory committed by the GC"},
    {"System.Runtime", "EventCounter", "exception-count", "", "exceptions per interval"},
    {"System.Runtime", "EventCounter", "time-in-gc", "%", "time in GC since the last GC"},
    {"System.Runtime", "EventCounter", "gen-0-size", "B", "gen 0 heap size"},
    {"System.Runtime", "EventCounter", "gen-1-size", "B", "gen 1 heap size"},
    {"System.Runtime", "EventCounter", "gen-2-size", "B", "gen 2 heap size"},
    {"System.Runtime", "EventCounter", "loh-size", "B", "large object heap size"},
    {"System.Runtime", "EventCounter", "poh-size", "B", "pinned object heap size"},
    {"System.Runtime", "EventCounter", "assembly-count", "", "assemblies loaded"},
    {"System.Runtime", "EventCounter", "il-bytes-jitted", "B", "IL bytes compiled by the JIT"},
    {"System.Runtime", "EventCounter", "methods-jitted-count", "", "methods compiled by the JIT"},
    {"System.Runtime", "EventCounter", "time-in-jit", "ms", "time in the JIT per interval"},
    {"Microsoft.AspNetCore.Hosting", "Meter", "http.server.request.duration", "s", "request durations (histogram), by route and status"},
    {"Microsoft.AspNetCore.Hosting", "Meter", "http.server.active_requests", "{request}", "requests being handled"},
    {"Microsoft.AspNetCore.Hosting", "EventCounter", "requests-per-second", "", "requests started per interval"},
    {"Microsoft.AspNetCore.Hosting", "EventCounter", "total-requests", "", "requests since the start"},
    {"Microsoft.AspNetCore.Hosting", "EventCounter", "current-requests", "", "requests being handled"},
    {"Microsoft.AspNetCore.Hosting", "EventCounter", "failed-requests", "", "failed requests since the start"},
    {"Microsoft.AspNetCore.Server.Kestrel", "Meter", "kestrel.active_connections", "{connection}", "open connections"},
    {"Microsoft.AspNetCore.Server.Kestrel", "Meter", "kestrel.connection.duration", "s", "connection durations (histogram)"},
    {"Microsoft.AspNetCore.Server.Kestrel", "Meter", "kestrel.queued_connections", "{connection}", "connections waiting to start"},
    {"Microsoft-AspNetCore-Server-Kestrel", "EventCounter", "connections-per-second", "", "connections per interval"},
    {"Microsoft-AspNetCore-Server-Kestrel", "EventCounter", "current-connections", "", "open connections"},
    {"Microsoft-AspNetCore-Server-Kestrel", "EventCounter", "connection-queue-length", "", "connections waiting to start"},
    {"Microsoft-AspNetCore-Server-Kestrel", "EventCounter", "request-queue-length", "", "requests waiting for a thread"},
    {"System.Net.Http", "Meter", "http.client.request.duration", "s", "outgoing request durations (histogram)"},
    {"System.Net.Http", "Meter", "http.client.active_requests", "{request}", "outgoing requests in flight"},
    {"System.Net.Http", "Meter", "http.client.open_connections", "{connection}", "connections, by state (active, idle)"},
    {"System.Net.Http", "EventCounter", "requests-started-rate", "", "outgoing requests started per interval"},
    {"System.Net.Http", "EventCounter", "requests-failed-rate", "", "outgoing requests failed per interval"},
    {"System.Net.Http", "EventCounter", "current-requests", "", "outgoing requests in flight"},
    {"System.Net.NameResolution", "Meter", "dns.lookup.duration", "s", "DNS lookup durations (histogram)"},
    {"System.Net.NameResolution", "EventCounter", "dns-lookups-requested", "", "DNS lookups since the start"},
    {"System.Net.Sockets", "EventCounter", "outgoing-connections-established", "", "outgoing connections since the start"},
    {"System.Net.Sockets", "EventCounter", "incoming-connections-established", "", "incoming connections since the start"},
    {"System.Net.Sockets", "EventCounter", "bytes-received", "B", "bytes received since the start"},
    {"System.Net.Sockets", "EventCounter", "bytes-sent", "B", "bytes sent since the start"},
    {"System.Net.Security", "EventCounter", "tls-handshake-rate", "", "TLS handshakes per interval"},
    {"System.Net.Security", "EventCounter", "failed-tls-handshakes", "", "failed TLS handshakes since the start"},
};

int dnt_counters_list(void) {
  const char *provider = NULL;
  for (size_t i = 0; i < sizeof known / sizeof known[0]; i++) {
    const struct known *k = &known[i];
    if (!provider || strcmp(provider, k->provider) != 0) {
      printf("%s%s\n", provider ? "\n" : "", k->provider);
      printf("  %-13s %-50s %-13s %s\n", "Kind", "Name", "Unit", "Description");
      provider = k->provider;
    }
    printf("  %-13s %-50s %-13s %s\n", k->kind, k->name, k->unit[0] ? k->unit : "-", k->what);
  }
  printf("\nA Meter and an EventSource of the same name: dntrace, like dotnet-counters, shows the Meter.\n"
         "Ask for one with --counters NAME, or NAME[counter,...]; EventCounters\\NAME for the EventSource.\n");
  return 0;
}
