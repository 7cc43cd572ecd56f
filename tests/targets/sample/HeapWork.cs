using System;
using System.Collections.Generic;
using System.Runtime.CompilerServices;
using System.Runtime.InteropServices;
using System.Threading;

namespace Sample
{
    // --heap N:K[:M]: a heap whose shape tests know, for heap snapshots (issue 24). A static
    // Sample.Cache holds N Sample.CacheEntry objects, each owning a byte[] of K bytes; thread
    // heap-growth adds M Sample.GrowthItem objects a second to a static list; the first entry's
    // byte[] is pinned by a GCHandle, the last entry is the key of a ConditionalWeakTable entry
    // whose value is a Sample.TableValue, and 10 Sample.Finalizable objects are kept alive.
    // Prints 'heap N K' once the cache is built, and 'heap-growth COUNT' every 250 ms.
    public sealed class CacheEntry
    {
        public readonly byte[] Data;
        public CacheEntry(int bytes) { Data = new byte[bytes]; }
    }

    public static class Cache
    {
        public static CacheEntry[] Entries = Array.Empty<CacheEntry>();
    }

    public sealed class GrowthItem
    {
        public long Value;
    }

    public sealed class TableValue
    {
        public long Value;
    }

    public sealed class Finalizable
    {
        ~Finalizable() { }
    }

    public static class HeapWork
    {
        private static readonly List<GrowthItem> Growth = new List<GrowthItem>();
        private static readonly ConditionalWeakTable<CacheEntry, TableValue> Table = new ConditionalWeakTable<CacheEntry, TableValue>();
        private static readonly Finalizable[] Finalizables = new Finalizable[10];
        private static GCHandle _pinned;

        public static void Build(int entries, int bytes)
        {
            var all = new CacheEntry[entries];
            for (int i = 0; i < entries; i++) all[i] = new CacheEntry(bytes);
            Cache.Entries = all;
            if (entries > 0)
            {
                _pinned = GCHandle.Alloc(all[0].Data, GCHandleType.Pinned);
                Table.Add(all[entries - 1], new TableValue { Value = 1 });
            }
            for (int i = 0; i < Finalizables.Length; i++) Finalizables[i] = new Finalizable();
            Console.WriteLine("heap " + entries + " " + bytes);
            Console.Out.Flush();
        }

        public static void Grow(double perSecond, CancellationToken stop)
        {
            var clock = System.Diagnostics.Stopwatch.StartNew();
            long added = 0, reported = -1;
            while (!stop.WaitHandle.WaitOne(TimeSpan.FromMilliseconds(10)))
            {
                long want = (long)(clock.Elapsed.TotalSeconds * perSecond);
                lock (Growth)
                    for (; added < want; added++) Growth.Add(new GrowthItem { Value = added });
                if (clock.ElapsedMilliseconds / 250 != reported)
                {
                    reported = clock.ElapsedMilliseconds / 250;
                    Console.WriteLine("heap-growth " + added);
                    Console.Out.Flush();
                }
            }
        }
    }
}
