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
// unmapped cache. A private page that was ever written is no longer the
// file's, and MADV_DONTNEED would throw the writes away: so mappings that
// can be written are left alone, and so are read-only ones that hold
// written pages (in a PIE build the loader relocates the pointers in
// .data.rel.ro and then makes it read-only; released, they would be the
// file's unrelocated ones again, and the first interface call crashes).
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
// file that cannot be written and hold no written (anonymous) page. A
// mapping is the executable's if its device and inode are (so a binary
// replaced on disk since still matches), or its path is: on overlayfs, as
// in most containers, the maps show the underlying file's device and
// inode, not the ones stat sees.
func readOnlyExecutableSpans() ([]span, error) {
	var exe unix.Stat_t
	if err := unix.Stat("/proc/self/exe", &exe); err != nil {
		return nil, fmt.Errorf("stat /proc/self/exe: %w", err)
	}
	dev := fmt.Sprintf("%02x:%02x", unix.Major(exe.Dev), unix.Minor(exe.Dev))
	ino := strconv.FormatUint(exe.Ino, 10)
	path, _ := os.Readlink("/proc/self/exe")
	f, err := os.Open("/proc/self/smaps")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var (
		spans     []span
		cur       span
		candidate bool // cur is a read-only mapping of the executable
	)
	lines := bufio.NewScanner(f)
	for lines.Scan() {
		field := strings.Fields(lines.Text())
		if len(field) == 0 {
			continue
		}
		if lo, hi, ok := strings.Cut(field[0], "-"); ok && len(field) >= 5 {
			// A mapping's header: address perms offset dev inode [path].
			// Its fields follow, Anonymous among them; the span is kept
			// when the header of the next mapping (or the end) comes.
			if candidate {
				spans = append(spans, cur)
			}
			l, err1 := strconv.ParseUint(lo, 16, 64)
			h, err2 := strconv.ParseUint(hi, 16, 64)
			if err1 != nil || err2 != nil {
				return nil, fmt.Errorf("/proc/self/smaps: bad range %q", field[0])
			}
			cur = span{uintptr(l), uintptr(h)}
			candidate = len(field) >= 6 && !strings.ContainsRune(field[1], 'w') &&
				((field[3] == dev && field[4] == ino) || strings.Join(field[5:], " ") == path)
			continue
		}
		if candidate && field[0] == "Anonymous:" && (len(field) < 2 || field[1] != "0") {
			candidate = false // written pages: not the file's any more
		}
	}
	if candidate {
		spans = append(spans, cur)
	}
	return spans, lines.Err()
}
