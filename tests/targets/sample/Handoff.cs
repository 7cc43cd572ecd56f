using System.IO;
using System.IO.Pipes;
using System.Runtime.CompilerServices;
using System.Threading;

namespace Sample
{
    // --handoff: thread `waiter` blocks on an event that thread `setter` signals every 10 ms from
    // one known method, Sample.Handoff.SignalWaiter: the known answer of `dntrace waits` (who
    // ended each wait, and from where). The event is a byte on a pipe: every wait of `waiter` is a
    // read in the kernel that `setter`'s write ends. (An AutoResetEvent is signalled through
    // glibc's pthread_cond_signal, which keeps no frame pointer: perf's call chain of the waker
    // stops there, before any managed frame.)
    public static class Handoff
    {
        public static void Start(Workers workers, CancellationToken stop)
        {
            var server = new AnonymousPipeServerStream(PipeDirection.Out);
            var client = new AnonymousPipeClientStream(PipeDirection.In, server.ClientSafePipeHandle);
            workers.Spawn("waiter", () => WaitLoop(client, stop));
            workers.Spawn("setter", () => SetLoop(server, stop));
        }

        [MethodImpl(MethodImplOptions.NoInlining)]
        public static void WaitLoop(Stream signal, CancellationToken stop)
        {
            var one = new byte[1];
            while (!stop.IsCancellationRequested && signal.Read(one, 0, 1) == 1) { }
        }

        private static void SetLoop(Stream signal, CancellationToken stop)
        {
            var one = new byte[1];
            while (!stop.IsCancellationRequested)
            {
                Thread.Sleep(10);
                SignalWaiter(signal, one);
            }
            SignalWaiter(signal, one); // the waiter sees the stop
        }

        [MethodImpl(MethodImplOptions.NoInlining)]
        public static void SignalWaiter(Stream signal, byte[] one) => signal.Write(one, 0, 1);
    }
}
