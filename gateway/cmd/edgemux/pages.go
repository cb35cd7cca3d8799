package main

import (
	"bufio"
	"fmt"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// releaseStartupPages unmaps the executable's code and read-only data,
// once the gateway listens and again after each reload. Start-up touches
// most of the binary: every protocol package initialises itself, and the
// config is parsed and checked (a reload parses and checks it again). The
// kernel maps a cached file 64 KiB at a time around each page touched
// (fault-around), so after start-up about 11 MiB of the 13 MiB of code
// and read-only data stay mapped, and count in the process's RSS, though
// serving touches about 2 MiB of them; a reload maps about 1 MiB more.
//
// Unmapping them (madvise MADV_DONTNEED) leaves them in the page cache:
// the next touch maps a page back with a minor fault, and the pages
// nothing touches again are left for the kernel to reclaim like any
// unmapped cache. Only mappings that cannot be written are released:
// MADV_DONTNEED on a written private page would throw the writes away.
// It returns the bytes of the ranges released.
func releaseStartupPages() (int, error) {
	spans, err := readOnlyExecutableSpans()
	if err != nil {
		return 0, err
	}
	released := 0
	for _, s := range spans {
		if _, _, errno := unix.Syscall(unix.SYS_MADVISE, s.lo, s.hi-s.lo, unix.MADV_DONTNEED); errno != 0 {
			return released, fmt.Errorf("madvise %#x-%#x: %w", s.lo, s.hi, errno)
		}
		released += int(s.hi - s.lo)
	}
	return released, nil
}

// span is an address range [lo, hi).
type span struct{ lo, hi uintptr }

// readOnlyExecutableSpans lists the mappings of the running executable's
// file that are not writable. A mapping is the executable's if its device
// and inode are (so a binary replaced on disk since still matches), or
// its path is: on overlayfs, as in most containers, the maps show the
// underlying file's device and inode, not the ones stat sees.
func readOnlyExecutableSpans() ([]span, error) {
	var exe unix.Stat_t
	if err := unix.Stat("/proc/self/exe", &exe); err != nil {
		return nil, fmt.Errorf("stat /proc/self/exe: %w", err)
	}
	dev := fmt.Sprintf("%02x:%02x", unix.Major(exe.Dev), unix.Minor(exe.Dev))
	ino := strconv.FormatUint(exe.Ino, 10)
	path, _ := os.Readlink("/proc/self/exe")
	f, err := os.Open("/proc/self/maps")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var spans []span
	lines := bufio.NewScanner(f)
	for lines.Scan() {
		// address perms offset dev inode [path]
		field := strings.Fields(lines.Text())
		if len(field) < 6 || strings.ContainsRune(field[1], 'w') {
			continue // short: anonymous
		}
		if (field[3] != dev || field[4] != ino) && strings.Join(field[5:], " ") != path {
			continue
		}
		lo, hi, _ := strings.Cut(field[0], "-")
		l, err1 := strconv.ParseUint(lo, 16, 64)
		h, err2 := strconv.ParseUint(hi, 16, 64)
		if err1 != nil || err2 != nil {
			return nil, fmt.Errorf("/proc/self/maps: bad range %q", field[0])
		}
		spans = append(spans, span{uintptr(l), uintptr(h)})
	}
	return spans, lines.Err()
}
