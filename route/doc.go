// Package route holds the transfer layer's primitives: the SPSC Ring that
// carries events from an epoll loop to a worker, the Parker that lets an
// idle worker sleep until a producer has work for it, and the Dispatcher
// that chooses which worker owns a newly classified connection.
//
// The pieces fit together like this: a loop classifies a connection, asks
// Dispatcher.Pick for a worker, and from then on pushes that connection's
// events (fd<<32|gen) into the Ring it shares with that worker, calling the
// worker's Parker.Unpark after each push. The worker pops events, handles
// them, reports each to Dispatcher.Observe (which learns the traffic mix
// the worker serves), and parks when every ring it consumes is empty.
//
// Wakeups: a worker's Parker sleeps on a channel by default. A channel
// wake queues the worker on the waker's P, so an epoll loop that unparked
// a worker during a batch should call runtime.Gosched once before it
// blocks in EpollWait (Unpark reports whether it woke anyone); otherwise
// the worker waits until sysmon retakes the P. wake_bench_test.go has the
// measurements, including the eventfd alternative.
//
// Nothing here allocates on the hot path, and nothing here imports other
// edgemux packages.
package route
