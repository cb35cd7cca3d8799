// Package memstat measures a server process from outside: its resident set
// from /proc/PID/status, and its Go heap and goroutine count from a
// Prometheus-style text endpoint. The peer servers expose that endpoint
// with Handler (forcing a GC first, so the heap figure is live data only);
// edgemux exposes the same series names on its /metrics (client_golang's
// Go collector), which does not force a GC.
package memstat

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"runtime"
	"strconv"
	"strings"
)

// Series names, as client_golang's Go collector calls them.
const (
	HeapInuse  = "go_memstats_heap_inuse_bytes"
	Goroutines = "go_goroutines"
	// heapBeforeGC is the heap in use as the request came in, before the
	// forced GC: comparable to edgemux's unforced figure.
	heapBeforeGC = "wscompare_heap_inuse_before_gc_bytes"
)

// Limits with safe defaults.
const (
	maxBody       = 4 << 20 // bytes of metrics text read at most
	maxStatusSize = 64 << 10
)

// Sentinel errors.
var (
	ErrNoSeries = errors.New("memstat: series not found")
	ErrBadValue = errors.New("memstat: malformed value")
	ErrNoRSS    = errors.New("memstat: no VmRSS line")
	ErrHTTP     = errors.New("memstat: metrics endpoint failed")
)

// Handler serves the heap in use after runtime.GC() and the goroutine
// count, as Prometheus text.
func Handler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		before := ms.HeapInuse
		runtime.GC() // twice: the second frees what sync.Pools held (victim cache)
		runtime.GC()
		runtime.ReadMemStats(&ms)
		w.Header().Set("Content-Type", "text/plain; version=0.0.4")
		fmt.Fprintf(w, "%s %d\n%s %d\n%s %d\n",
			HeapInuse, ms.HeapInuse, heapBeforeGC, before, Goroutines, runtime.NumGoroutine())
	})
}

// Value finds the first sample of series name (without labels) in
// Prometheus text and returns its value.
func Value(text []byte, name string) (float64, error) {
	for line := range bytes.Lines(text) {
		line = bytes.TrimSpace(line)
		rest, ok := bytes.CutPrefix(line, []byte(name))
		if !ok || (len(rest) > 0 && rest[0] != ' ' && rest[0] != '\t') {
			continue // a comment, another series, or a longer name
		}
		fields := strings.Fields(string(rest))
		if len(fields) == 0 {
			return 0, fmt.Errorf("%w: %s: no value", ErrBadValue, name)
		}
		v, err := strconv.ParseFloat(fields[0], 64)
		if err != nil {
			return 0, fmt.Errorf("%w: %s: %v", ErrBadValue, name, err)
		}
		return v, nil
	}
	return 0, fmt.Errorf("%w: %s", ErrNoSeries, name)
}

// Fetch GETs url and returns its body (at most maxBody bytes).
func Fetch(ctx context.Context, client *http.Client, url string) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrHTTP, err)
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrHTTP, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxBody))
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrHTTP, err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%w: %s: %s", ErrHTTP, url, resp.Status)
	}
	return body, nil
}

// ParseVmRSS returns the VmRSS of a /proc/PID/status text, in bytes.
func ParseVmRSS(status []byte) (int64, error) {
	sc := bufio.NewScanner(bytes.NewReader(status))
	for sc.Scan() {
		rest, ok := strings.CutPrefix(sc.Text(), "VmRSS:")
		if !ok {
			continue
		}
		fields := strings.Fields(rest)
		if len(fields) != 2 || fields[1] != "kB" {
			return 0, fmt.Errorf("%w: VmRSS %q", ErrBadValue, rest)
		}
		kb, err := strconv.ParseInt(fields[0], 10, 64)
		if err != nil || kb < 0 || kb > 1<<40 {
			return 0, fmt.Errorf("%w: VmRSS %q", ErrBadValue, rest)
		}
		return kb * 1024, nil
	}
	return 0, ErrNoRSS
}

// RSS reads the resident set of process pid, in bytes.
func RSS(pid int) (int64, error) {
	f, err := os.Open("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0, fmt.Errorf("memstat: %w", err)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxStatusSize))
	if err != nil {
		return 0, fmt.Errorf("memstat: %w", err)
	}
	return ParseVmRSS(b)
}

// Sample is one look at a server process.
type Sample struct {
	RSS        int64 `json:"rss"`        // bytes resident
	RSSAnon    int64 `json:"rss_anon"`   // of which anonymous (heap, stacks)
	RSSFile    int64 `json:"rss_file"`   // of which mapped files (the binary, libraries)
	HeapInuse  int64 `json:"heap_inuse"` // bytes of Go heap spans in use
	Goroutines int64 `json:"goroutines"`
}

// Take reads the RSS of pid and the heap and goroutines from metricsURL.
func Take(ctx context.Context, client *http.Client, pid int, metricsURL string) (Sample, error) {
	body, err := Fetch(ctx, client, metricsURL)
	if err != nil {
		return Sample{}, err
	}
	// RSS after the fetch: the peers' forced GC has run by then.
	res, err := ReadResident(pid)
	if err != nil {
		return Sample{}, err
	}
	heap, err := Value(body, HeapInuse)
	if err != nil {
		return Sample{}, err
	}
	g, err := Value(body, Goroutines)
	if err != nil {
		return Sample{}, err
	}
	return Sample{RSS: res.RSS, RSSAnon: res.Anon, RSSFile: res.File, HeapInuse: int64(heap), Goroutines: int64(g)}, nil
}

// ParseLoadAvg returns the 1-minute load average of a /proc/loadavg text.
func ParseLoadAvg(text []byte) (float64, error) {
	fields := strings.Fields(string(text))
	if len(fields) == 0 {
		return 0, fmt.Errorf("%w: loadavg %q", ErrBadValue, text)
	}
	v, err := strconv.ParseFloat(fields[0], 64)
	if err != nil || !(v >= 0 && v <= 1e6) { // also refuses NaN
		return 0, fmt.Errorf("%w: loadavg %q", ErrBadValue, fields[0])
	}
	return v, nil
}

// LoadAvg reads the machine's 1-minute load average: on shared cores it
// says how much the figures around it are worth.
func LoadAvg() (float64, error) {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return 0, fmt.Errorf("memstat: %w", err)
	}
	return ParseLoadAvg(b)
}

// clockTicks is USER_HZ, the unit of /proc/PID/stat times: 100 on every
// Linux architecture Go supports.
const clockTicks = 100

// ParseCPUSeconds returns utime+stime of a /proc/PID/stat text, in seconds.
// The command name may hold spaces and parentheses, so the fields are
// counted from the last ')'.
func ParseCPUSeconds(stat []byte) (float64, error) {
	end := bytes.LastIndexByte(stat, ')')
	if end < 0 {
		return 0, fmt.Errorf("%w: stat without a command name", ErrBadValue)
	}
	// After ")": state is field 3, so utime (14) and stime (15) are the
	// 12th and 13th fields of the rest.
	fields := strings.Fields(string(stat[end+1:]))
	if len(fields) < 13 {
		return 0, fmt.Errorf("%w: stat has %d fields after the name", ErrBadValue, len(fields))
	}
	var ticks int64
	for _, f := range fields[11:13] {
		v, err := strconv.ParseInt(f, 10, 64)
		if err != nil || v < 0 || v > 1<<50 {
			return 0, fmt.Errorf("%w: stat time %q", ErrBadValue, f)
		}
		ticks += v
	}
	return float64(ticks) / clockTicks, nil
}

// CPUSeconds reads the user+system CPU time process pid has used.
func CPUSeconds(pid int) (float64, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, fmt.Errorf("memstat: %w", err)
	}
	return ParseCPUSeconds(b)
}
