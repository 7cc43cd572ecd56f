// Reads a .nettrace with Microsoft's TraceEvent and prints how long it took, for tests/bench.sh
// to set beside dntrace's figures on the same file. Two passes a user of each tool would make:
//   --mode parse   every event decoded (EventPipeEventSource), counted
//   --mode stacks  the profiler's path: the trace converted to TraceLog, every SampleProfiler
//                  sample's stack walked to its root with its methods named
//   --mode names   no timing: one line per distinct event kind, "provider<TAB>id<TAB>version<TAB>
//                  name" as TraceEvent names it (the runtime's parsers registered), for the
//                  expected lists of dntrace's tests (tests/data/traceevent-names/)
using System.Diagnostics;
using Microsoft.Diagnostics.Tracing;
using Microsoft.Diagnostics.Tracing.Etlx;
using Microsoft.Diagnostics.Tracing.Parsers;
using Microsoft.Diagnostics.Tracing.Parsers.Clr;

static class Program
{
    const string Sampler = "Microsoft-DotNETCore-SampleProfiler";
    static readonly Guid SamplerGuid = new("3c530d44-97ae-513a-1e6d-783e8f8e03a9");

    static int Main(string[] args)
    {
        if (args.Length < 1 || (args.Length == 3 && args[1] != "--mode") || args.Length == 2 || args.Length > 3)
        {
            Console.Error.WriteLine("usage: BenchTraceEvent FILE.nettrace [--mode parse|stacks|names]");
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
        try
        {
            var clock = Stopwatch.StartNew();
            string line = mode switch
            {
                "parse" => Parse(path),
                "stacks" => Stacks(path),
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
            if (e.ProviderGuid == SamplerGuid) samples++; /* no parser registered: by its GUID */
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
}
