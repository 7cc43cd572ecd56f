// Reads a .nettrace with Microsoft's TraceEvent. Two passes a user of each tool would make, timed
// for tests/bench.sh to set beside dntrace's figures on the same file:
//   --mode parse   every event decoded (EventPipeEventSource), counted
//   --mode stacks  the profiler's path: the trace converted to TraceLog, every SampleProfiler
//                  sample's stack walked to its root with its methods named
// and one for the tests (tests/cli/test-weights.c), the oracle of dntrace's sample weights:
//   --mode threadtime FILE...  per thread, the samples and the thread time that dotnet-trace's
//                  speedscope and Chromium exports hold, computed as dotnet-trace computes them
//                  (SampleProfilerThreadTimeComputer over a TraceLog, every event); "activities N":
//                  the events it stitches async stacks with; no timing line
//   --mode samplestacks FILE...  every sample's thread, time, weight and stack (SampleStacks.cs),
//                  for tests/cli/test-oracle-stacks.c
//   --mode stitched FILE...  the thread time computer's stacks as dotnet-trace files them, async
//                  tasks stitched (Stitched.cs), for tests/cli/test-oracle-stacks.c
//   --mode gc      TraceEvent's GC analysis, one line per GC (GcStats.cs), for tests/runtime/test-gc.c
//   --mode jit     TraceEvent's JIT statistics, one line per method (JitStats.cs), for tests/runtime/test-jit.c
//   --mode allocs  GCAllocationTick bytes and events per type as TraceEvent decodes them
//                  (AllocStats.cs), for tests/runtime/test-allocs.c
//   --mode exclocks  exceptions by type and message, catches, contention (ExcLocks.cs), for
//                  tests/runtime/test-exceptions.c and tests/runtime/test-locks.c
//   --mode names   no timing: one line per distinct event kind, "provider<TAB>id<TAB>version<TAB>
//                  name" as TraceEvent names it (the runtime's parsers registered), for the
//                  expected lists of dntrace's tests (tests/data/traceevent-names/)
//   --mode kinds   as names with each kind's opcode ("provider<TAB>id<TAB>version<TAB>opcode<TAB>
//                  name"), the sampler's parser registered too: for tests/cli/test-event-names.c
using System.Diagnostics;
using System.Globalization;
using System.Text.RegularExpressions;
using Microsoft.Diagnostics.Symbols;
using Microsoft.Diagnostics.Tracing;
using Microsoft.Diagnostics.Tracing.Etlx;
using Microsoft.Diagnostics.Tracing.Stacks;
using Microsoft.Diagnostics.Tracing.Parsers;
using Microsoft.Diagnostics.Tracing.Parsers.Clr;

static class Program
{
    const string Sampler = "Microsoft-DotNETCore-SampleProfiler";

    static int Main(string[] args)
    {
        /* the oracle takes several traces in one run: one start of the runtime for them all */
        if (args.Length >= 3 && args[0] == "--mode" && args[1] == "samplestacks") return SampleStacks.Run(args.Skip(2));
        if (args.Length >= 3 && args[0] == "--mode" && args[1] == "stitched") return Stitched.Run(args.Skip(2));
        if (args.Length >= 3 && args[0] == "--mode" && args[1] == "threadtime") return OracleTrace.Each(args.Skip(2), ThreadTime);
        if (args.Length < 1 || (args.Length == 3 && args[1] != "--mode") || args.Length == 2 || args.Length > 3)
        {
            Console.Error.WriteLine("usage: BenchTraceEvent FILE.nettrace [--mode parse|stacks|gc|jit|allocs|names|kinds]\n" +
                                    "       BenchTraceEvent --mode threadtime|samplestacks|stitched FILE...");
            return 2;
        }
        string path = args[0], mode = args.Length == 3 ? args[2] : "parse";
        if (!File.Exists(path))
        {
            Console.Error.WriteLine($"BenchTraceEvent: no such file: {path}");
            return 1;
        }
        double mb = new FileInfo(path).Length / 1e6;
        if (mode == "names") return Names(path);
        if (mode == "kinds") return Kinds(path);
        try
        {
            var clock = Stopwatch.StartNew();
            string line = mode switch
            {
                "parse" => Parse(path),
                "stacks" => Stacks(path),
                "gc" => GcStats.Print(path),
                "jit" => JitStats.Print(path),
                "allocs" => AllocStats.Print(path),
                "exclocks" => ExcLocks.Print(path),
                _ => throw new ArgumentException($"unknown mode '{mode}'"),
            };
            double s = clock.Elapsed.TotalSeconds;
            long peak = Process.GetCurrentProcess().PeakWorkingSet64 / (1024 * 1024);
            Console.WriteLine($"traceevent {mode}: {line}, {s:F2} s, {mb / s:F0} MB/s, peak working set {peak} MB");
            return 0;
        }
        catch (Exception e)
        {
            Console.Error.WriteLine($"BenchTraceEvent: {path}: {e.Message}");
            return 1;
        }
    }

    static string Parse(string path)
    {
        long events = 0, samples = 0, bytes = 0;
        using var source = new EventPipeEventSource(path);
        source.AllEvents += e =>
        {
            events++;
            bytes += e.EventDataLength;
            if (e.ProviderGuid == OracleTrace.SamplerGuid) samples++; /* no parser registered: by its GUID */
        };
        source.Process();
        return $"{events} events ({bytes} payload bytes), {samples} samples";
    }

    static int Names(string path)
    {
        var seen = new SortedSet<string>(StringComparer.Ordinal);
        using var source = new EventPipeEventSource(path);
        Action<TraceEvent> add = e => seen.Add($"{e.ProviderName}\t{(int)e.ID}\t{e.Version}\t{e.EventName}");
        /* the runtime's parsers, as PerfView registers them; everything else as it comes */
        source.Clr.All += add;
        new ClrRundownTraceEventParser(source).All += add;
        new ClrPrivateTraceEventParser(source).All += add;
        source.Dynamic.All += add;
        source.UnhandledEvents += add;
        source.Process();
        foreach (string line in seen) Console.WriteLine(line);
        return 0;
    }

    /* --mode kinds: as names, with each kind's opcode, and the sampler's own parser registered (as
     * TraceLog, dotnet-trace and PerfView have it): "provider<TAB>id<TAB>version<TAB>opcode<TAB>name" */
    static int Kinds(string path)
    {
        var seen = new SortedSet<string>(StringComparer.Ordinal);
        using var source = new EventPipeEventSource(path);
        Action<TraceEvent> add = e => seen.Add($"{e.ProviderName}\t{(int)e.ID}\t{e.Version}\t{(int)e.Opcode}\t{e.EventName}");
        source.Clr.All += add;
        new ClrRundownTraceEventParser(source).All += add;
        new ClrPrivateTraceEventParser(source).All += add;
        new Microsoft.Diagnostics.Tracing.EventPipe.SampleProfilerTraceEventParser(source).All += add;
        source.Dynamic.All += add;
        source.UnhandledEvents += add;
        source.Process();
        foreach (string line in seen) Console.WriteLine(line);
        return 0;
    }

    static string Stacks(string path)
    {
        string etlx = Path.Combine(Path.GetTempPath(), $"bench-traceevent-{Environment.ProcessId}.etlx");
        try
        {
            TraceLog.CreateFromEventPipeDataFile(path, etlx);
            long samples = 0, frames = 0, named = 0;
            using (var log = new TraceLog(etlx))
            {
                foreach (TraceEvent e in log.Events)
                {
                    if (e.ProviderName != Sampler) continue;
                    samples++;
                    for (TraceCallStack? s = e.CallStack(); s != null; s = s.Caller)
                    {
                        frames++;
                        if (!string.IsNullOrEmpty(s.CodeAddress.FullMethodName)) named++;
                    }
                }
            }
            return $"{samples} samples, {frames} frames ({named} named) (etlx conversion + walk)";
        }
        finally
        {
            File.Delete(etlx);
        }
    }

    /* The oracle: what `dotnet-trace convert --format speedscope` puts in each thread's profile.
     * dotnet-trace (TraceFileFormatConverter.Convert) builds a TraceLog (retrying with
     * ContinueOnError on a truncated trace), a MutableTraceEventStackSource with managed frames
     * only, and runs SampleProfilerThreadTimeComputer on it without EventSource events; the
     * speedscope writer then files each sample under the "Thread (N)" frame of its stack
     * (StackSourceWriterHelper.GetSortedSamplesPerThread) with its Metric as its duration.
     * The computer is called over every event, as dotnet-trace calls it: the sampler's samples,
     * the GC's allocation events and the task library's scheduling, starts and waits are its
     * samples, and its activity computer files a task's samples under the thread that made it.
     * Printed after a line "trace PATH" and "activities N": one line per thread, sorted by TID,
     * "thread TID EVENTS SAMPLES MS": the events of the thread the computer logs as samples, and
     * the samples filed under its "Thread (TID)" frame and the sum of their Metrics (ms). A .zip
     * holds the trace as its one entry (the corpus keeps some zipped). */
    static void ThreadTime(string path)
    {
        string tmp = Path.Combine(Path.GetTempPath(), $"oracle-te-{Environment.ProcessId}");
        Directory.CreateDirectory(tmp);
        try
        {
            string etlx = OracleTrace.Etlx(path, tmp);
            var totals = new SortedDictionary<long, (long events, long samples, double ms)>();
            using (var symbols = new SymbolReader(TextWriter.Null, ""))
            using (var log = new TraceLog(etlx))
            {
                /* the events the computer logs as samples of a thread: the sampler's, the GC's
                 * allocation events, the task library's scheduling, starts and waits; and the
                 * events its activity computer makes activities of (those, the thread pool's
                 * enqueues and dequeues, the framework's work items and transfers), which move
                 * samples to the thread that made the work */
                long activities = 0;
                foreach (TraceEvent e in log.Events)
                {
                    if (OracleTrace.IsActivity(e)) activities++;
                    if (!OracleTrace.IsLogged(e)) continue;
                    totals.TryGetValue(e.ThreadID, out var t);
                    totals[e.ThreadID] = (t.events + 1, t.samples, t.ms);
                }
                Console.WriteLine(string.Create(CultureInfo.InvariantCulture, $"activities {activities}"));
                var stacks = new MutableTraceEventStackSource(log) { OnlyManagedCodeStacks = true };
                var computer = new SampleProfilerThreadTimeComputer(log, symbols) { IncludeEventSourceEvents = false };
                computer.GenerateThreadTimeStacks(stacks); /* every event, as dotnet-trace convert calls it */
                var id = new Regex(@"\((\d+)\)");
                stacks.ForEach(sample =>
                {
                    for (var s = sample.StackIndex; s != StackSourceCallStackIndex.Invalid; s = stacks.GetCallerIndex(s))
                    {
                        string name = stacks.GetFrameName(stacks.GetFrameIndex(s), false);
                        if (!name.StartsWith("Thread (")) continue;
                        var m = id.Match(name);
                        long tid = m.Success ? long.Parse(m.Groups[1].Value, CultureInfo.InvariantCulture) : 0;
                        totals.TryGetValue(tid, out var t);
                        totals[tid] = (t.events, t.samples + 1, t.ms + sample.Metric);
                        return;
                    }
                });
            }
            foreach (var (tid, t) in totals)
                Console.WriteLine(string.Create(CultureInfo.InvariantCulture, $"thread {tid} {t.events} {t.samples} {t.ms:R}"));
        }
        finally
        {
            Directory.Delete(tmp, true);
        }
    }
}
