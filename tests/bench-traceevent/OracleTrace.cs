// The TraceLog the oracle's modes read, made as dotnet-trace convert makes it.
using System.IO.Compression;
using Microsoft.Diagnostics.Tracing;
using Microsoft.Diagnostics.Tracing.Etlx;
using Microsoft.Diagnostics.Tracing.Parsers;

static class OracleTrace
{
    public static readonly Guid TplGuid = new("2e5dba47-a3d2-4d16-8ee0-6671ffdcd7b5");
    public static readonly Guid FxGuid = new("8e9f5090-2d75-4d03-8a81-e5afbf85daf1"); /* FrameworkEventSource */
    public static readonly Guid SamplerGuid = new("3c530d44-97ae-513a-1e6d-783e8f8e03a9");

    /* Each trace after a line "trace PATH", printed by print: 0, or 1 at the first that throws
     * (its message on stderr). */
    public static int Each(IEnumerable<string> paths, Action<string> print)
    {
        foreach (string path in paths)
        {
            try
            {
                Console.WriteLine($"trace {path}");
                print(path);
            }
            catch (Exception e)
            {
                Console.Error.WriteLine($"BenchTraceEvent: {path}: {e.Message}");
                return 1;
            }
        }
        return 0;
    }

    static bool IsTask(TraceEvent e) => e.ProviderGuid == TplGuid && (int)e.ID is 7 or 8 or 10 or 11 or 12;
    static bool IsClr(TraceEvent e) => e.ProviderGuid == ClrTraceEventParser.ProviderGuid;

    /* The GC's allocation events: AllocationTick, SampledObjectAllocation (high and low). */
    public static bool IsAllocation(TraceEvent e) => IsClr(e) && (int)e.ID is 10 or 20 or 32;

    /* An event SampleProfilerThreadTimeComputer logs as a sample of its thread: the sampler's,
     * the GC's allocation events, the task library's scheduling, starts and waits. */
    public static bool IsLogged(TraceEvent e) => e.ProviderGuid == SamplerGuid || IsTask(e) || IsAllocation(e);

    /* An event its activity computer makes an activity of: those of the task library, the thread
     * pool's enqueues and dequeues, the framework's work items and transfers. */
    public static bool IsActivity(TraceEvent e) =>
        IsTask(e) || (IsClr(e) && (int)e.ID is >= 61 and <= 65) || (e.ProviderGuid == FxGuid && (int)e.ID is 30 or 31 or 150 or 151);

    /* The .etlx of path, written in tmp: a .zip's one entry extracted there first (the corpus keeps
     * some zipped); a truncated trace read again with ContinueOnError, as dotnet-trace retries. */
    public static string Etlx(string path, string tmp)
    {
        string trace = path;
        if (path.EndsWith(".zip", StringComparison.OrdinalIgnoreCase))
        {
            using var zip = ZipFile.OpenRead(path);
            trace = Path.Combine(tmp, "trace.nettrace");
            zip.Entries.First(e => e.Name.Length > 0).ExtractToFile(trace);
        }
        string etlx = Path.Combine(tmp, "trace.etlx");
        try
        {
            TraceLog.CreateFromEventPipeDataFile(trace, etlx, new TraceLogOptions() { ContinueOnError = false });
        }
        catch (Exception e) when (e.ToString().Contains("Read past end of stream."))
        {
            TraceLog.CreateFromEventPipeDataFile(trace, etlx, new TraceLogOptions() { ContinueOnError = true });
        }
        return etlx;
    }
}
