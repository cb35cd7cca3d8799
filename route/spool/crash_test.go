package spool

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// The SIGKILL test re-runs this test binary as a child that appends (one
// by one and in batches of 2 to 4, and now and then acks) with SyncAlways and reports every seq it got back,
// and every ack that returned, on stdout; the parent kills it mid-stream.
const crashDirEnv = "SPOOL_CRASH_CHILD_DIR"

func crashOpts(dir string) Options {
	return Options{Dir: dir, MaxBytes: 64 << 20, SegmentBytes: 64 << 10, Sync: SyncAlways}
}

func TestCrashChild(t *testing.T) {
	dir := os.Getenv(crashDirEnv)
	if dir == "" {
		t.Skip("the child process of TestSIGKILLLosesNothingSynced")
	}
	q, err := Open(crashOpts(dir))
	if err != nil {
		fmt.Println("error", err)
		os.Exit(1)
	}
	for i, round := 0, 0; ; round++ {
		first, n, err := crashAppend(q, i, round%4+1)
		if err != nil {
			fmt.Println("error", err)
			os.Exit(1)
		}
		for seq := first; seq < first+uint64(n); seq++ {
			fmt.Println("seq", seq)
			if seq%100 != 0 {
				continue
			}
			fmt.Println("acking", seq-50)
			if err := q.Ack(seq - 50); err != nil {
				fmt.Println("error", err)
				os.Exit(1)
			}
			fmt.Println("ack", seq-50)
		}
		i += n
	}
}

// crashAppend appends payload(i..i+k-1): one Append, or an AppendBatch
// of k, so that the guarantee is tested for both.
func crashAppend(q *Queue, i, k int) (uint64, int, error) {
	if k == 1 {
		seq, err := q.Append(payload(i, 300))
		return seq, 1, err
	}
	batch := make([][]byte, k)
	for j := range batch {
		batch[j] = payload(i+j, 300)
	}
	return q.AppendBatch(batch)
}

// TestSIGKILLLosesNothingSynced: after a SIGKILL mid-stream, every seq
// the child was told is there, in order, data intact, and nothing it
// acked (with SyncAlways the cursor is on disk when Ack returns) is
// delivered again.
func TestSIGKILLLosesNothingSynced(t *testing.T) {
	dir := t.TempDir()
	cmd, out := startChild(t, crashDirEnv+"="+dir, "-test.run=^TestCrashChild$", "-test.count=1")
	var reported []uint64
	var acked, acking uint64 // the last ack that returned, the last begun
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		word, num, _ := strings.Cut(sc.Text(), " ")
		n, err := strconv.ParseUint(num, 10, 64)
		switch {
		case word == "seq" && err == nil:
			reported = append(reported, n)
		case word == "ack" && err == nil:
			acked = n
		case word == "acking" && err == nil:
			acking = n
		default:
			t.Fatalf("child: %s", sc.Text())
		}
		if len(reported) == 1234 { // mid-stream: the child is appending
			cmd.Process.Signal(syscall.SIGKILL)
		}
	}
	err := cmd.Wait()
	if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || ws.Signal() != syscall.SIGKILL {
		t.Fatalf("child ended with %v, not by SIGKILL", err)
	}
	if len(reported) < 1234 || acked == 0 {
		t.Fatalf("child reported %d seqs, ack %d", len(reported), acked)
	}

	o := crashOpts(dir)
	o.Sync = SyncNever
	q := openQ(t, o)
	all := drainAll(t, q, 500)
	if len(all) == 0 || all[0].Seq <= acked || all[0].Seq > acking+1 {
		t.Fatalf("after the crash the queue starts at %v; acked up to %d, acking %d", all[0].Seq, acked, acking)
	}
	checkPayloads(t, all, int(all[0].Seq-1), 300)
	last := reported[len(reported)-1]
	if all[len(all)-1].Seq < last {
		t.Fatalf("the child was told seq %d, the queue ends at %d", last, all[len(all)-1].Seq)
	}
	t.Logf("reported %d seqs up to %d, acked %d; reopened: seqs %d..%d, cut %d bytes",
		len(reported), last, acked, all[0].Seq, all[len(all)-1].Seq, q.Stats().CutBytes)
}

// startChild re-runs this test binary with args and env added, and
// returns its stdout. A binary the kernel cannot run (a 32-bit ARM test
// binary that `go test -exec qemu-arm` started) is run under qemu-user
// the same way.
func startChild(t *testing.T, env string, args ...string) (*exec.Cmd, io.Reader) {
	t.Helper()
	for _, wrap := range []bool{false, true} {
		name, argv := os.Args[0], args
		if wrap {
			qemu, err := exec.LookPath("qemu-" + runtime.GOARCH)
			if err != nil {
				t.Fatalf("the test binary does not run natively and %v", err)
			}
			name, argv = qemu, append([]string{os.Args[0]}, args...)
		}
		cmd := exec.Command(name, argv...)
		cmd.Env = append(os.Environ(), env)
		cmd.Stderr = os.Stderr
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		err = cmd.Start()
		if err == nil {
			return cmd, out
		}
		if wrap || !errors.Is(err, syscall.ENOEXEC) {
			t.Fatal(err)
		}
	}
	panic("unreachable")
}
