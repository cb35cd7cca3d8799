//go:build race

package gateway

import "golang.org/x/sys/unix"

// Under the race detector the sockets are read and written through
// unix.Read and unix.Write: they tell the detector that a write on one
// side happens before the read of it on the other, which tests that talk
// to the gateway from the same process rely on. sysio_linux.go says why
// other builds use raw system calls.

func sockRead(fd int, p []byte) (int, error)  { return unix.Read(fd, p) }
func sockWrite(fd int, p []byte) (int, error) { return unix.Write(fd, p) }

func sockWritev(fd int, bufs [][]byte, _ *[]unix.Iovec) (int, error) { return unix.Writev(fd, bufs) }
