// --mode allocs: the GCAllocationTick events of a trace as TraceEvent decodes them
// (ClrTraceEventParser's GCAllocationTickTraceData), summed per type: one line per type,
// "TYPE<TAB>EVENTS<TAB>BYTES" (AllocationAmount64, which TraceEvent takes from AllocationAmount on
// the versions without it), for tests/runtime/test-allocs.c to hold `dntrace allocs --source tick` to.
using System.Globalization;
using Microsoft.Diagnostics.Tracing;

static class AllocStats
{
    public static string Print(string path)
    {
        using var source = new EventPipeEventSource(path);
        var types = new Dictionary<string, (long Events, long Bytes)>();
        long ticks = 0;
        source.Clr.GCAllocationTick += e =>
        {
            string type = string.IsNullOrEmpty(e.TypeName) ? "(unknown type)" : e.TypeName;
            types.TryGetValue(type, out var t);
            types[type] = (t.Events + 1, t.Bytes + e.AllocationAmount64);
            ticks++;
        };
        source.Process();
        foreach (var kv in types.OrderByDescending(kv => kv.Value.Bytes).ThenBy(kv => kv.Key, StringComparer.Ordinal))
            Console.WriteLine(string.Format(CultureInfo.InvariantCulture, "{0}\t{1}\t{2}", kv.Key, kv.Value.Events,
                                            kv.Value.Bytes));
        return $"{ticks} allocation ticks, {types.Count} types";
    }
}
