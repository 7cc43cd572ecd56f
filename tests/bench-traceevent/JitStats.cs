// --mode jit: TraceEvent's own JIT statistics of a trace (TraceLoadedDotNetRuntime.JIT: the methods
// PerfView's JITStats view lists, and JITStats' totals), for tests/runtime/test-jit.c to hold `dntrace jit`
// to. Invariant culture, tab-separated (method names hold spaces):
//   method THREAD START_MS JIT_MS IL_SIZE NATIVE_SIZE TIER VERSION NAME    one per method
//   jitstats METHODS COMPLETIONS TOTAL_JIT_MS                                       one per runtime
using System.Globalization;
using Microsoft.Diagnostics.Tracing;
using Microsoft.Diagnostics.Tracing.Analysis;

static class JitStats
{
    public static string Print(string path)
    {
        using var source = new EventPipeEventSource(path);
        source.NeedLoadedDotNetRuntimes();
        source.Process();
        long methods = 0;
        foreach (var process in source.Processes())
        {
            var runtime = process.LoadedDotNetRuntime();
            if (runtime == null) continue;
            foreach (var m in runtime.JIT.Methods)
            {
                methods++;
                Console.WriteLine(string.Format(CultureInfo.InvariantCulture,
                    "method\t{0}\t{1:F6}\t{2:F6}\t{3}\t{4}\t{5}\t{6}\t{7}", m.ThreadID, m.StartTimeMSec,
                    m.CompileCpuTimeMSec, m.ILSize, m.NativeSize, m.OptimizationTier, m.VersionID, m.MethodName));
            }
            var stats = runtime.JIT.Stats();
            Console.WriteLine(string.Format(CultureInfo.InvariantCulture, "jitstats\t{0}\t{1}\t{2:F6}",
                runtime.JIT.Methods.Count, stats.Count, stats.TotalCpuTimeMSec));
        }
        return $"{methods} jitted methods";
    }
}
