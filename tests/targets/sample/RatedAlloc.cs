// The --alloc workload: objects of one type allocated at a known rate from one known method, and
// the bytes allocated as the runtime itself counts them, the known answer of `dntrace allocs`.
using System;
using System.Diagnostics;
using System.Runtime.CompilerServices;
using System.Threading;

namespace Sample
{
    // 64 bytes on a 64-bit runtime: an 8-byte header, the method table pointer, six longs.
    public sealed class Payload
    {
        public long A, B, C, D, E, F;

        public Payload(long v)
        {
            A = v;
        }
    }

    public static class RatedAlloc
    {
        private const int Kept = 4096;  // the objects kept alive at a time (a ring): a few survive a GC
        private static long _allocated; // bytes allocated inside AllocWork.Allocate, all calls

        public static bool Known(string type) => type == "byte[]" || type == "string" || type == "Sample.Payload";

        // Allocates at bytesPerSecond in slices of 10 ms, until stopped or (total > 0) total bytes are
        // allocated; only what Allocate allocates is counted, measured around each call (the
        // 'allocated' lines themselves allocate strings).
        public static void Run(string type, double bytesPerSecond, long total, CancellationToken stop)
        {
            var keep = new object?[Kept];
            int slot = 0;
            var clock = Stopwatch.StartNew();
            long reported = 0;
            while (!stop.IsCancellationRequested && (total <= 0 || Interlocked.Read(ref _allocated) < total))
            {
                double due = clock.Elapsed.TotalSeconds * bytesPerSecond;
                if (total > 0) due = Math.Min(due, total);
                long done = Interlocked.Read(ref _allocated);
                if (done < due)
                {
                    long before = GC.GetAllocatedBytesForCurrentThread();
                    AllocWork.Allocate(type, (long)Math.Min(due - done, bytesPerSecond / 100) + 1, keep, ref slot);
                    Interlocked.Add(ref _allocated, GC.GetAllocatedBytesForCurrentThread() - before);
                }
                else
                {
                    Thread.Sleep(2);
                }
                if (clock.ElapsedMilliseconds - reported >= 250)
                {
                    reported = clock.ElapsedMilliseconds;
                    Report(type);
                }
            }
        }

        public static void Report(string type)
        {
            Console.WriteLine("allocated " + type + " " + Interlocked.Read(ref _allocated));
            Console.Out.Flush();
        }
    }

    public static partial class AllocWork
    {
        // At least `bytes` bytes of `type`, small objects only (no large object heap): byte[1000]
        // (1024 bytes each), strings of 500 chars (1022), Payloads (64).
        [MethodImpl(MethodImplOptions.NoInlining)]
        public static void Allocate(string type, long bytes, object?[] keep, ref int slot)
        {
            for (long n = 0; n < bytes;)
            {
                object o;
                switch (type)
                {
                    case "byte[]": o = new byte[1000]; n += 1024; break;
                    case "string": o = new string('x', 500); n += 1022; break;
                    default: o = new Payload(n); n += 64; break;
                }
                keep[slot] = o;
                slot = (slot + 1) % keep.Length;
            }
        }
    }
}
