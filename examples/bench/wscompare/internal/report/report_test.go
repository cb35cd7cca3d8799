package report

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/edgemux/edgemux/examples/bench/wscompare/internal/memstat"
)

func sample(rss, heap, g int64) memstat.Sample {
	return memstat.Sample{RSS: rss, HeapInuse: heap, Goroutines: g}
}

var (
	edgemux = Result{Server: "edgemux", Conns: 1000, Baseline: sample(10<<20, 4<<20, 18),
		Idle: sample(10<<20+1_000_000, 4<<20+500_000, 18), AfterFanout: sample(12<<20, 5<<20, 18),
		Publishes: 10, Expected: 10000, Delivered: 10000, FanoutSecs: 0.5,
		PeakFanout: memstat.Peak{RSS: 45 << 20, Anon: 33 << 20, File: 12 << 20, Samples: 5}}
	gorilla = Result{Server: "gorilla", Conns: 1000, HeapForcedGC: true, Baseline: sample(8<<20, 1<<20, 6),
		Idle: sample(8<<20+20_000_000, 1<<20+10_000_000, 2006), AfterFanout: sample(30<<20, 12<<20, 2006),
		Publishes: 10, Expected: 10000, Delivered: 10000, FanoutSecs: 1, ServerCPU: 2,
		PeakFanout: memstat.Peak{RSS: 30 << 20, Anon: 22 << 20, File: 8 << 20, Samples: 5}}
	failed = Result{Server: "nbio", HeapForcedGC: true, Baseline: sample(9<<20, 3<<20, 10), Note: "dial failed"}
)

func TestPerConn(t *testing.T) {
	cases := []struct {
		name string
		got  float64
		want float64
	}{
		{"rss", edgemux.RSSPerConn(), 1000},
		{"heap", edgemux.HeapPerConn(), 500},
		{"goroutines", gorilla.GoroutinesPerConn(), 2},
		{"msgs/s", gorilla.MsgsPerSec(), 10000},
		{"no conns", failed.RSSPerConn(), 0},
		{"no fan-out", failed.MsgsPerSec(), 0},
		{"cpu/delivery", gorilla.CPUPerDelivery(), 200},
		{"cpu/delivery, none", failed.CPUPerDelivery(), 0},
	}
	for _, tc := range cases {
		if tc.got != tc.want {
			t.Errorf("%s = %v, want %v", tc.name, tc.got, tc.want)
		}
	}
}

func TestTable(t *testing.T) {
	var b bytes.Buffer
	if err := Table(&b, []Result{edgemux, gorilla, failed}); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{
		"edgemux/gorilla", "edgemux/nbio",
		"1000 B", "20000 B", // RSS per conn
		"0.05",             // edgemux/gorilla RSS per conn
		"2.00",             // edgemux/gorilla deliveries/s
		"45.0 MiB", "1.50", // peak RSS in the fan-out and its ratio
		"33.0 MiB", "12.0 MiB", // its RssAnon and RssFile
		"note edgemux: heap read without a forced GC",
		"note nbio: dial failed",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "note gorilla") {
		t.Errorf("a clean run got a note:\n%s", out)
	}
	// The failed run shows dashes, never zeros that read as figures.
	for _, line := range strings.Split(out, "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "RSS/conn") && !strings.HasSuffix(strings.TrimSpace(line), "-") {
			t.Errorf("failed run's ratio is not a dash: %q", line)
		}
	}
	if err := Table(&b, nil); !errors.Is(err, ErrNoResult) {
		t.Fatalf("empty: %v", err)
	}
}

func TestTableWithoutEdgemux(t *testing.T) {
	var b bytes.Buffer
	if err := Table(&b, []Result{gorilla}); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(b.String(), "edgemux/") {
		t.Fatalf("ratio columns without edgemux:\n%s", b.String())
	}
}

var readCases = []struct {
	name string
	in   string
	n    int
	err  error
}{
	{"two", `{"server":"a","conns":1}` + "\n\n" + `{"server":"b"}` + "\n", 2, nil},
	{"empty", "", 0, nil},
	{"bad", `{"server":`, 0, ErrBadLine},
	{"wrong type", `{"conns":"many"}`, 0, ErrBadLine},
	{"too many", strings.Repeat(`{}`+"\n", maxResults+1), 0, ErrTooMany},
	{"line too long", `"` + strings.Repeat("x", maxLine) + `"`, 0, ErrBadLine},
}

func TestRead(t *testing.T) {
	for _, tc := range readCases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Read(strings.NewReader(tc.in))
			if !errors.Is(err, tc.err) || len(got) != tc.n {
				t.Fatalf("got %d results, %v; want %d, %v", len(got), err, tc.n, tc.err)
			}
		})
	}
}

func FuzzRead(f *testing.F) {
	for _, tc := range readCases[:4] {
		f.Add([]byte(tc.in))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		rs, err := Read(bytes.NewReader(in))
		if err != nil || len(rs) == 0 {
			return
		}
		var b bytes.Buffer
		if err := Table(&b, rs); err != nil {
			t.Fatal(err)
		}
	})
}

func TestFormat(t *testing.T) {
	cases := []struct {
		v    float64
		unit string
		want string
	}{
		{-0.0001, "x", "0.000"},
		{-0.2, "x", "-0.200"},
		{-0.001, "f2", "0.00"},
		{-5, "B", "-5 B"},
		{-0.4, "B", "0 B"},
		{3 << 20, "MiB", "3.0 MiB"},
		{1234.5, "/s", "1234/s"},
		{1.234, "us", "1.23 us"},
		{7, "n", "7"},
	}
	for _, tc := range cases {
		if got := format(tc.v, tc.unit); got != tc.want {
			t.Errorf("format(%v, %s) = %q, want %q", tc.v, tc.unit, got, tc.want)
		}
	}
}
