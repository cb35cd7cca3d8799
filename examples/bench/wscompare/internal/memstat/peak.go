package memstat

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Resident is one reading of a process's resident set from
// /proc/PID/status, in bytes: the whole (VmRSS), its peak so far (VmHWM),
// and the two parts that tell heap from binary: RssAnon (anonymous pages:
// the Go heap, stacks, C malloc) and RssFile (mapped files: the binary's
// text and rodata, shared libraries).
type Resident struct {
	RSS  int64 `json:"rss"`
	HWM  int64 `json:"hwm"`
	Anon int64 `json:"anon"`
	File int64 `json:"file"`
}

// statusKeys are the /proc/PID/status lines Resident is read from.
var statusKeys = map[string]func(*Resident) *int64{
	"VmRSS:":   func(r *Resident) *int64 { return &r.RSS },
	"VmHWM:":   func(r *Resident) *int64 { return &r.HWM },
	"RssAnon:": func(r *Resident) *int64 { return &r.Anon },
	"RssFile:": func(r *Resident) *int64 { return &r.File },
}

// ParseResident reads VmRSS, VmHWM, RssAnon and RssFile from a
// /proc/PID/status text. VmRSS is required; a kernel without the others
// leaves them 0 (shown as "-" by the report).
func ParseResident(status []byte) (Resident, error) {
	var r Resident
	found := false
	sc := bufio.NewScanner(bytes.NewReader(status))
	for sc.Scan() {
		key, rest, ok := strings.Cut(sc.Text(), "\t")
		field := statusKeys[key]
		if !ok || field == nil {
			continue
		}
		fields := strings.Fields(rest)
		if len(fields) != 2 || fields[1] != "kB" {
			return Resident{}, fmt.Errorf("%w: %s %q", ErrBadValue, key, rest)
		}
		kb, err := strconv.ParseInt(fields[0], 10, 64)
		if err != nil || kb < 0 || kb > 1<<40 {
			return Resident{}, fmt.Errorf("%w: %s %q", ErrBadValue, key, rest)
		}
		*field(&r) = kb * 1024
		found = found || key == "VmRSS:"
	}
	if !found {
		return Resident{}, ErrNoRSS
	}
	return r, nil
}

// ReadResident reads the resident set of process pid.
func ReadResident(pid int) (Resident, error) {
	f, err := os.Open("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return Resident{}, fmt.Errorf("memstat: %w", err)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxStatusSize))
	if err != nil {
		return Resident{}, fmt.Errorf("memstat: %w", err)
	}
	return ParseResident(b)
}

// ResetPeak sets process pid's VmHWM back to its current VmRSS (writing 5
// to /proc/PID/clear_refs, Linux 4.0 on; the process must be ours), so the
// VmHWM read after a phase is that phase's peak, not the whole life's.
func ResetPeak(pid int) error {
	err := os.WriteFile("/proc/"+strconv.Itoa(pid)+"/clear_refs", []byte("5"), 0)
	if err != nil {
		return fmt.Errorf("memstat: reset peak: %w", err)
	}
	return nil
}

// Peak is the most a process held during a phase. RSS is the larger of
// the kernel's VmHWM (exact, reset at the start of the phase) and the
// largest sampled VmRSS; Anon and File are the split of that largest
// sample (the kernel keeps no peak of either), so they are a sample's,
// taken every sampling interval, and may sum to less than RSS.
type Peak struct {
	RSS     int64 `json:"rss"`
	Sampled int64 `json:"sampled_rss"` // largest VmRSS sampled
	Anon    int64 `json:"anon"`        // RssAnon of that sample
	File    int64 `json:"file"`        // RssFile of that sample
	HWMSeen bool  `json:"hwm_reset"`   // VmHWM was reset at the start, so RSS includes it
	Samples int   `json:"samples"`
}

// observe takes one reading into the peak.
func (p *Peak) observe(r Resident) {
	p.Samples++
	if r.RSS > p.Sampled {
		p.Sampled, p.Anon, p.File = r.RSS, r.Anon, r.File
	}
	p.RSS = max(p.RSS, p.Sampled)
	if p.HWMSeen {
		p.RSS = max(p.RSS, r.HWM)
	}
}

// Sampler follows a process's resident set during a phase.
type Sampler struct {
	pid  int
	stop chan struct{}
	done chan struct{}
	mu   sync.Mutex
	peak Peak
}

// StartSampler resets pid's VmHWM (if it may) and samples its resident
// set every interval until Stop.
func StartSampler(pid int, interval time.Duration) *Sampler {
	s := &Sampler{pid: pid, stop: make(chan struct{}), done: make(chan struct{})}
	s.peak.HWMSeen = ResetPeak(pid) == nil
	s.sample()
	go s.run(interval)
	return s
}

func (s *Sampler) run(interval time.Duration) {
	defer close(s.done)
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-s.stop:
			return
		case <-t.C:
			s.sample()
		}
	}
}

func (s *Sampler) sample() {
	r, err := ReadResident(s.pid)
	if err != nil {
		return // the process is gone: the peak so far stands
	}
	s.mu.Lock()
	s.peak.observe(r)
	s.mu.Unlock()
}

// Stop takes a last sample (VmHWM then holds the whole phase's peak) and
// returns the peak.
func (s *Sampler) Stop() Peak {
	close(s.stop)
	<-s.done
	s.sample()
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.peak
}
