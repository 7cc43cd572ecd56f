// The TraceLog the oracle's modes read, made as dotnet-trace convert makes it.
using System.IO.Compression;
using Microsoft.Diagnostics.Tracing.Etlx;

static class OracleTrace
{
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
