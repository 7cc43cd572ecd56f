using System;
using System.Globalization;

namespace Sample
{
    // Command-line switches; each part of the workload can be turned off.
    public sealed class Options
    {
        public const string Usage =
            "usage: Sample [--seconds N] [--exit-code N] [--no-cpu] [--no-blocking] [--no-alloc]\n" +
            "              [--no-exceptions] [--no-counters] [--event-rate N] [--gen2 N] [--threads N]\n" +
            "              [--gc-induce N] [--gc-background] [--pool-starve] [--handoff] [--generic-park]\n" +
            "              [--alloc TYPE:BYTES_PER_S] [--throw N [--throw-count K] [--throw-delay S]]\n" +
            "              [--contend] [--crash-after S] [--spike-at S [--spike-for S] [--spike-threads N] [--spike-every S]] [--start-file PATH] [--alloc-total BYTES] [--async]\n" +
            "              [--heap N:K[:M]] [--stuck-finalizer N] [--catch-park]\n" +
            "  --seconds N      run N seconds, then exit (default: until killed or Ctrl+C)\n" +
            "  --exit-code N    exit with N when done\n" +
            "  --event-rate N   emit about N Sample-Load events per second (0: off; very high: as fast as possible)\n" +
            "  --gen2 N         force N gen2 collections before 'ready', then print 'gen2 COUNT' (GC.CollectionCount(2))\n" +
            "                   every 250 ms: the runtime's own count, for a test to compare with\n" +
            "  --threads N      also start N idle threads (idle-1 .. idle-N) parked in IdleWork.Park\n" +
            "  --generic-park   also start a thread parked in a generic method of a generic class\n" +
            "                   (GenericPark<long>.Wait<string>: dump analyze names its instantiations)\n" +
            "  --gc-induce N    call GC.Collect() N times a second, printing 'induced GC' after each, GC being\n" +
            "                   GC.CollectionCount(0) then: the number the runtime gave that collection\n" +
            "  --gc-background  with --gc-induce: every other induced collection is a background one; after each\n" +
            "                   'induced' line, 'bgc N': N the number of the latest background GC that has ended\n" +
            "                   (GC.GetGCMemoryInfo(GCKind.Background).Index; 0 before any)\n" +
            "  --pool-starve    queue 10 thread-pool work items a second that each block 5 s in Thread.Sleep, so the\n" +
            "                   pool starves and its gate thread adds threads; print 'pool N queue M'\n" +
            "                   (ThreadPool.ThreadCount, PendingWorkItemCount) every 250 ms\n" +
            "  --alloc TYPE:BYTES_PER_S  thread alloc-work allocates objects of TYPE (byte[], string or\n" +
            "                   Sample.Payload) at that rate in AllocWork.Allocate instead of its usual mix,\n" +
            "                   printing 'allocated TYPE N' every 250 ms and once at the end: N the bytes\n" +
            "                   Allocate allocated so far, GC.GetAllocatedBytesForCurrentThread's count\n" +
            "  --alloc-total BYTES  with --alloc: stop once Allocate has allocated BYTES, print the last\n" +
            "                   'allocated' line and exit (whatever the rate the machine allowed)\n" +
            "  --throw N        thread throw-work throws and catches N Sample.SampleException a second, from\n" +
            "                   Sample.ThrowWork.Fail, caught in Sample.ThrowWork.Catch\n" +
            "  --throw-count K  with --throw: stop after K, then print 'thrown K'\n" +
            "  --throw-delay S  with --throw: begin S seconds after 'ready' (for a session to start first)\n" +
            "  --crash-after S  thread crash-work throws a Sample.SampleException that nothing catches, S\n" +
            "                   seconds after 'ready' (the process dies of it, a second later)\n" +
            "  --spike-at S     S seconds after 'ready' (or the start file), an incident: for 3 s thread spike-burn\n" +
            "                   spins in Sample.SpikeWork.Burn and spike-alloc allocates; 1.5 s in, spike-burn\n" +
            "                   throws and catches 10 Sample.SampleException; prints 'spike' and 'spike over'\n" +
            "  --spike-for S    the spike lasts S seconds (default 3; the burst stays 1.5 s in)\n" +
            "  --spike-threads N  N more threads (spike-burn-2...) spin in Burn beside spike-burn, so that the\n" +
            "                   process's share of a busy machine's CPU stays high through the spike\n" +
            "  --spike-every S  the spike again every S seconds (from the start of the last) until stopped\n" +
            "  --start-file PATH  --throw, --crash-after, --spike-at and --event-rate begin once the file PATH exists, not at\n" +
            "                   'ready' (a test makes it once its session runs); their delays count from then\n" +
            "  --contend        threads contend-a and contend-b take turns at one lock in\n" +
            "                   Sample.ContendWork.HoldLock, each holding it about 5 ms; print 'contention N'\n" +
            "                   (Monitor.LockContentionCount, the runtime's count of contended waits) every 250 ms\n" +
            "  --handoff        also start threads waiter and setter: setter wakes waiter every 10 ms from\n" +
            "                   Sample.Handoff.SignalWaiter\n" +
            "  --async          thread async-driver runs Sample.AsyncWork.Outer, which awaits Middle, which awaits\n" +
            "                   Inner: Task.Delay(1), then about 5 ms of CountPrimes on a pool thread; over and\n" +
            "                   over, printing 'async N' (chains completed) every 250 ms\n" +
            "  --heap N:K[:M]   a static Sample.Cache of N Sample.CacheEntry objects, each owning a byte[] of K bytes\n" +
            "                   (the first one's bytes pinned, the last the key of a ConditionalWeakTable entry), 10 Sample.Finalizable, and\n" +
            "                   thread heap-growth adding M Sample.GrowthItem a second to a static list; prints\n" +
            "                   'heap N K' once built, then 'heap-growth COUNT' every 250 ms\n" +
            "  --stuck-finalizer N  the finalizer thread blocks for good in Sample.Blocker's finalizer, and N\n" +
            "                   unreachable Sample.Orphan (each owning a byte[100]) wait behind it, ready for\n" +
            "                   finalization; prints 'stuck N'\n" +
            "  --catch-park     thread catch-park throws and catches a Sample.SampleException, then waits inside\n" +
            "                   the catch block holding a Sample.CatchHeld";

        public double Seconds;
        public int ExitCode;
        public bool Cpu = true, Blocking = true, Alloc = true, Exceptions = true, Counters = true, Help;
        public long EventRate;
        public int Gen2 = -1;
        public int IdleThreads;
        public double GcInduce;
        public bool GcBackground;
        public bool PoolStarve;
        public bool GenericPark;
        public string? AllocType;
        public double AllocRate;
        public double ThrowRate, ThrowDelay;
        public long ThrowCount;
        public bool Contend;
        public double CrashAfter = -1;
        public double SpikeAt = -1, SpikeFor = 3;
        public int SpikeThreads;
        public double SpikeEvery;
        public string? StartFile;
        public long AllocTotal;
        public bool Handoff;
        public bool Async;
        public int HeapEntries = -1, HeapBytes;
        public int StuckFinalizer;
        public bool CatchPark;
        public double HeapGrowth;

        public static Options Parse(string[] args)
        {
            var o = new Options();
            for (int i = 0; i < args.Length; i++)
            {
                string a = args[i];
                switch (a)
                {
                    case "--seconds": o.Seconds = double.Parse(Value(args, ref i), CultureInfo.InvariantCulture); break;
                    case "--exit-code": o.ExitCode = int.Parse(Value(args, ref i), CultureInfo.InvariantCulture); break;
                    case "--event-rate": o.EventRate = long.Parse(Value(args, ref i), CultureInfo.InvariantCulture); break;
                    case "--gen2": o.Gen2 = int.Parse(Value(args, ref i), CultureInfo.InvariantCulture); break;
                    case "--threads": o.IdleThreads = int.Parse(Value(args, ref i), CultureInfo.InvariantCulture); break;
                    case "--gc-induce": o.GcInduce = double.Parse(Value(args, ref i), CultureInfo.InvariantCulture); break;
                    case "--gc-background": o.GcBackground = true; break;
                    case "--pool-starve": o.PoolStarve = true; break;
                    case "--generic-park": o.GenericPark = true; break;
                    case "--alloc": ParseAlloc(o, Value(args, ref i)); break;
                    case "--throw": o.ThrowRate = double.Parse(Value(args, ref i), CultureInfo.InvariantCulture); break;
                    case "--throw-count": o.ThrowCount = long.Parse(Value(args, ref i), CultureInfo.InvariantCulture); break;
                    case "--throw-delay": o.ThrowDelay = double.Parse(Value(args, ref i), CultureInfo.InvariantCulture); break;
                    case "--contend": o.Contend = true; break;
                    case "--crash-after": o.CrashAfter = double.Parse(Value(args, ref i), CultureInfo.InvariantCulture); break;
                    case "--spike-at": o.SpikeAt = double.Parse(Value(args, ref i), CultureInfo.InvariantCulture); break;
                    case "--spike-for": o.SpikeFor = double.Parse(Value(args, ref i), CultureInfo.InvariantCulture); break;
                    case "--spike-threads": o.SpikeThreads = int.Parse(Value(args, ref i), CultureInfo.InvariantCulture); break;
                    case "--spike-every": o.SpikeEvery = double.Parse(Value(args, ref i), CultureInfo.InvariantCulture); break;
                    case "--handoff": o.Handoff = true; break;
                    case "--async": o.Async = true; break;
                    case "--heap": ParseHeap(o, Value(args, ref i)); break;
                    case "--catch-park": o.CatchPark = true; break;
                    case "--stuck-finalizer": o.StuckFinalizer = int.Parse(Value(args, ref i), CultureInfo.InvariantCulture); break;
                    case "--start-file": o.StartFile = Value(args, ref i); break;
                    case "--alloc-total": o.AllocTotal = long.Parse(Value(args, ref i), CultureInfo.InvariantCulture); break;
                    case "--no-cpu": o.Cpu = false; break;
                    case "--no-blocking": o.Blocking = false; break;
                    case "--no-alloc": o.Alloc = false; break;
                    case "--no-exceptions": o.Exceptions = false; break;
                    case "--no-counters": o.Counters = false; break;
                    case "--help": case "-h": o.Help = true; break;
                    default: throw new ArgumentException("unknown argument '" + a + "'\n" + Usage);
                }
            }
            return o;
        }

        private static void ParseAlloc(Options o, string v)
        {
            int colon = v.LastIndexOf(':');
            if (colon <= 0 || !double.TryParse(v.Substring(colon + 1), NumberStyles.Float, CultureInfo.InvariantCulture,
                                               out o.AllocRate) || o.AllocRate <= 0)
                throw new ArgumentException("--alloc wants TYPE:BYTES_PER_S, not '" + v + "'");
            o.AllocType = v.Substring(0, colon);
            if (!RatedAlloc.Known(o.AllocType))
                throw new ArgumentException("--alloc: unknown type '" + o.AllocType + "' (byte[], string or Sample.Payload)");
        }

        private static void ParseHeap(Options o, string v)
        {
            string[] p = v.Split(':');
            if (p.Length < 2 || p.Length > 3 || !int.TryParse(p[0], out o.HeapEntries) || o.HeapEntries < 0 ||
                !int.TryParse(p[1], out o.HeapBytes) || o.HeapBytes < 0 ||
                (p.Length == 3 && (!double.TryParse(p[2], NumberStyles.Float, CultureInfo.InvariantCulture, out o.HeapGrowth) ||
                                   o.HeapGrowth < 0)))
                throw new ArgumentException("--heap wants N:K[:M] (entries, bytes each, growth a second), not '" + v + "'");
        }

        private static string Value(string[] args, ref int i)
        {
            if (i + 1 >= args.Length) throw new ArgumentException("option '" + args[i] + "' needs a value");
            return args[++i];
        }
    }
}
