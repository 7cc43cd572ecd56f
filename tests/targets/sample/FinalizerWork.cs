using System;
using System.Runtime.CompilerServices;
using System.Threading;

namespace Sample
{
    // --stuck-finalizer N: the finalizer thread blocks for good in Sample.Blocker's finalizer, then
    // N unreachable Sample.Orphan objects (each owning a byte[] of 100 bytes) wait behind it in the
    // GC's queue of objects ready for finalization: their only root is that queue. Prints
    // 'stuck N' once they are there.
    public sealed class Blocker
    {
        public static readonly ManualResetEventSlim Entered = new ManualResetEventSlim();

        ~Blocker()
        {
            Entered.Set();
            Thread.Sleep(Timeout.Infinite);
        }
    }

    public sealed class Orphan
    {
        public readonly byte[] Data = new byte[100];

        ~Orphan() { }
    }

    // --catch-park: thread catch-park throws a Sample.SampleException, catches it, and waits inside
    // the catch block (an exception handler's own frame, a funclet) holding a Sample.CatchHeld.
    public sealed class CatchHeld
    {
        public readonly string Name = "held in a catch block";
    }

    public static class CatchPark
    {
        [MethodImpl(MethodImplOptions.NoInlining)]
        public static void Run(CancellationToken stop)
        {
            var held = new CatchHeld();
            try
            {
                throw new SampleException();
            }
            catch (SampleException)
            {
                IdleWork.Park(stop);
                GC.KeepAlive(held);
            }
        }
    }

    public static class FinalizerWork
    {
        public static void Stick(int orphans)
        {
            Abandon(() => new Blocker());
            for (int i = 0; i < 50 && !Blocker.Entered.IsSet; i++)
            {
                GC.Collect();
                Blocker.Entered.Wait(100);
            }
            Abandon(() => { for (int i = 0; i < orphans; i++) new Orphan(); return null; });
            GC.Collect();
            Console.WriteLine("stuck " + orphans);
            Console.Out.Flush();
        }

        // allocates in a frame of its own, so that no local of the caller keeps the objects
        [MethodImpl(MethodImplOptions.NoInlining)]
        private static void Abandon(Func<object?> make) => make();
    }
}
